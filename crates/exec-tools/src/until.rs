//! `BashOutput`'s `until`: waiting, up to `wait_ms`, for the one thing an
//! agent is waiting for (a ready line, a port, quiet, the end) instead of
//! polling, and saying which of them ended the wait.

use std::time::Duration;

use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::{CleanOptions, OutputSlice, ReadCursor, ShellProcess, clean_text};
use tokio::time::Instant;

/// The longest `idle_ms` (as `wait_ms`: a quiet longer than the wait
/// could never be seen).
const MAX_IDLE_MS: u64 = 600_000;

/// How often a port is probed while it is closed: a dev server that starts
/// listening is seen within this, and a local connect costs next to nothing.
const PORT_POLL: Duration = Duration::from_millis(100);

/// How long one connect may take: on loopback a closed port refuses at
/// once, so a connect still pending this long counts as not accepting.
const CONNECT_LIMIT: Duration = Duration::from_millis(500);

/// What to wait for: exactly one of the fields.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UntilParams {
    /// Until a line of new output (unread lines count, stdout or stderr, escape sequences removed) matches this regular expression (Rust `regex` syntax, matched anywhere in the line), e.g. `"ready|listening on"`.
    pub regex: Option<String>,
    /// Until this TCP port accepts connections on loopback (`127.0.0.1` or `::1`), e.g. a dev server's port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    /// Until the shell printed nothing for this many milliseconds (counted from this call at the earliest).
    #[schemars(range(min = 1, max = MAX_IDLE_MS))]
    pub idle_ms: Option<u64>,
    /// `true`: until the shell exits (as `wait_ms` alone, without its early answer at a terminal prompt).
    pub exit: Option<bool>,
}

/// A checked `until`.
#[derive(Debug)]
pub(crate) enum Until {
    /// A new line matches.
    Regex(Regex),
    /// The port accepts on loopback.
    Port(u16),
    /// No output for this long.
    Idle(Duration),
    /// The shell ends.
    Exit,
}

impl Until {
    /// The one condition `params` names, or the message of a failed call:
    /// none or several named, a bad regex, `exit: false`.
    pub(crate) fn parse(params: &UntilParams) -> Result<Self, String> {
        let named: Vec<&str> = [
            ("regex", params.regex.is_some()),
            ("port", params.port.is_some()),
            ("idle_ms", params.idle_ms.is_some()),
            ("exit", params.exit.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect();
        if named.len() != 1 {
            let got = if named.is_empty() {
                "none".to_owned()
            } else {
                named
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            };
            return Err(format!(
                "`until` takes exactly one of `regex`, `port`, `idle_ms`, `exit`; got {got}"
            ));
        }
        if let Some(pattern) = &params.regex {
            return Regex::new(pattern)
                .map(Self::Regex)
                .map_err(|error| format!("Invalid until regex: {error}"));
        }
        if let Some(port) = params.port {
            return Ok(Self::Port(port));
        }
        if let Some(idle) = params.idle_ms {
            return Ok(Self::Idle(Duration::from_millis(idle)));
        }
        match params.exit {
            Some(true) => Ok(Self::Exit),
            _ => Err("`until.exit` can only be `true`".to_owned()),
        }
    }
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// A new line matched the regex.
    Regex,
    /// The port accepted a connection.
    Port(u16),
    /// No output for this many milliseconds.
    Idle(u64),
    /// The shell ended.
    Exited,
    /// `wait_ms` (this many milliseconds) ran out first.
    RanOut(u64),
}

impl Fired {
    /// The answer's line (CONTRACT.md, Remote and long-lived).
    pub(crate) fn line(self) -> String {
        match self {
            Self::Regex => "[until: regex matched]".to_owned(),
            Self::Port(port) => format!("[until: port {port} open]"),
            Self::Idle(ms) => format!("[until: idle {ms} ms]"),
            Self::Exited => "[until: exited]".to_owned(),
            Self::RanOut(ms) => format!("[until: wait ran out after {ms} ms]"),
        }
    }

    /// The metadata's name for it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Regex => "regex",
            Self::Port(_) => "port",
            Self::Idle(_) => "idle_ms",
            Self::Exited => "exit",
            Self::RanOut(_) => "wait_ran_out",
        }
    }
}

/// Waits up to `limit` for `until` on `shell`; the shell ending ends any
/// wait. A condition that holds when the shell has ended still wins (the
/// ready line among its last output is what was asked about).
pub(crate) async fn wait_until(shell: &ShellProcess, until: &Until, limit: Duration) -> Fired {
    let start = Instant::now();
    let deadline = start + limit;
    let mut lines = LineScan::new(shell);
    let mut events = shell.subscribe_output();
    let mut events_open = true;
    loop {
        let finished = shell.status().is_finished();
        let holds = match until {
            Until::Regex(regex) => lines.finds(shell, regex, finished),
            Until::Port(port) => port_accepts(*port).await,
            Until::Idle(idle) => quiet_since(shell, start) >= *idle,
            Until::Exit => false,
        };
        if holds {
            return fired(until);
        }
        if finished {
            return Fired::Exited;
        }
        let now = Instant::now();
        if now >= deadline {
            return Fired::RanOut(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
        }
        // When to look again without news: the deadline, or sooner for
        // what only a look can tell.
        let look = match until {
            Until::Port(_) => (now + PORT_POLL).min(deadline),
            Until::Idle(idle) => {
                (now + idle.saturating_sub(quiet_since(shell, start))).min(deadline)
            }
            Until::Regex(_) | Until::Exit => deadline,
        };
        let watch_output = events_open && matches!(until, Until::Regex(_));
        tokio::select! {
            _ = shell.wait() => {}
            changed = events.changed(), if watch_output => events_open = changed.is_ok(),
            () = tokio::time::sleep_until(look) => {}
        }
    }
}

fn fired(until: &Until) -> Fired {
    match until {
        Until::Regex(_) => Fired::Regex,
        Until::Port(port) => Fired::Port(*port),
        Until::Idle(idle) => Fired::Idle(u64::try_from(idle.as_millis()).unwrap_or(u64::MAX)),
        Until::Exit => Fired::Exited,
    }
}

/// How long the shell printed nothing, counting from `start` at the
/// earliest: a shell quiet before the call (waiting for the input just
/// typed, say) has not yet answered it.
fn quiet_since(shell: &ShellProcess, start: Instant) -> Duration {
    shell.quiet_for().min(start.elapsed())
}

/// Whether something accepts a TCP connection on `port` on loopback, over
/// IPv4 or IPv6 (dev servers bind either `localhost` spelling).
async fn port_accepts(port: u16) -> bool {
    let connect = |address: std::net::SocketAddr| async move {
        matches!(
            tokio::time::timeout(CONNECT_LIMIT, tokio::net::TcpStream::connect(address)).await,
            Ok(Ok(_))
        )
    };
    let v4 = connect((std::net::Ipv4Addr::LOCALHOST, port).into());
    let v6 = connect((std::net::Ipv6Addr::LOCALHOST, port).into());
    let (v4, v6) = tokio::join!(v4, v6);
    v4 || v6
}

/// Reads the unread output line by line without consuming it: the answer
/// that follows the wait still shows every line.
struct LineScan {
    cursor: ReadCursor,
    /// The unfinished last line of each stream (stdout, stderr).
    partial: [String; 2],
}

impl LineScan {
    fn new(shell: &ShellProcess) -> Self {
        Self {
            cursor: shell.unseen_cursor(),
            partial: [String::new(), String::new()],
        }
    }

    /// Whether a whole line that arrived since the last look matches
    /// (once the shell has `finished`, its unfinished last line too).
    fn finds(&mut self, shell: &ShellProcess, regex: &Regex, finished: bool) -> bool {
        let new = shell.read_since(&mut self.cursor);
        let [out, err] = &mut self.partial;
        let mut found = scan(out, &new.stdout, regex) | scan(err, &new.stderr, regex);
        if finished {
            for rest in [out, err] {
                found |= !rest.is_empty() && line_matches(rest, regex);
                rest.clear();
            }
        }
        found
    }
}

/// Scans the whole lines `partial` and `slice` make; keeps the unfinished
/// last one in `partial`. A gap ends the line it cut.
fn scan(partial: &mut String, slice: &OutputSlice, regex: &Regex) -> bool {
    let mut found = false;
    for (index, text) in [&slice.before_gap, &slice.after_gap]
        .into_iter()
        .enumerate()
    {
        if index == 1 && slice.dropped > 0 {
            found |= !partial.is_empty() && line_matches(partial, regex);
            partial.clear();
        }
        partial.push_str(text);
        if let Some(end) = partial.rfind('\n') {
            found |= partial[..end]
                .split('\n')
                .any(|line| line_matches(line, regex));
            partial.drain(..=end);
        }
    }
    found
}

/// A line as a person would read it: escape sequences and redraws gone.
fn line_matches(line: &str, regex: &Regex) -> bool {
    let shown = clean_text(
        line.strip_suffix('\r').unwrap_or(line),
        CleanOptions {
            escapes: true,
            redraws: true,
        },
    );
    regex.is_match(&shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(before: &str, dropped: u64, after: &str) -> OutputSlice {
        OutputSlice {
            before_gap: before.to_owned(),
            dropped,
            dropped_chars: dropped,
            after_gap: after.to_owned(),
        }
    }

    #[test]
    fn only_whole_lines_are_matched_and_a_line_split_across_reads_is_joined() {
        let regex = Regex::new("^ready on 5173$").expect("a regex");
        let mut partial = String::new();
        assert!(!scan(
            &mut partial,
            &slice("building\nready on 51", 0, ""),
            &regex
        ));
        assert_eq!(partial, "ready on 51");
        assert!(scan(&mut partial, &slice("73\nmore", 0, ""), &regex));
        assert_eq!(partial, "more");
    }

    #[test]
    fn a_gap_ends_the_line_it_cuts() {
        let regex = Regex::new("^ab$").expect("a regex");
        let mut partial = String::new();
        // "a", a gap, then "b\n": no line "ab" was ever printed whole.
        assert!(!scan(&mut partial, &slice("a", 10, "b\n"), &regex));
    }

    #[test]
    fn escape_sequences_and_carriage_returns_are_gone_before_matching() {
        let regex = Regex::new("Local: +http://localhost:5173/$").expect("a regex");
        assert!(line_matches(
            "  \u{1b}[32m➜\u{1b}[39m  \u{1b}[1mLocal\u{1b}[22m:   \u{1b}[36mhttp://localhost:5173/\u{1b}[39m\r",
            &regex
        ));
    }

    #[test]
    fn exactly_one_kind_is_accepted() {
        let none = Until::parse(&UntilParams::default()).expect_err("none is refused");
        assert!(none.contains("got none"), "{none}");
        let two = Until::parse(&UntilParams {
            regex: Some("x".to_owned()),
            port: Some(80),
            ..UntilParams::default()
        })
        .expect_err("two are refused");
        assert!(two.contains("got `regex` and `port`"), "{two}");
        let bad = Until::parse(&UntilParams {
            regex: Some("(".to_owned()),
            ..UntilParams::default()
        })
        .expect_err("a bad regex is refused");
        assert!(bad.starts_with("Invalid until regex: "), "{bad}");
        let no_exit = Until::parse(&UntilParams {
            exit: Some(false),
            ..UntilParams::default()
        })
        .expect_err("exit false is refused");
        assert!(no_exit.contains("only be `true`"), "{no_exit}");
        assert!(matches!(
            Until::parse(&UntilParams {
                idle_ms: Some(300),
                ..UntilParams::default()
            }),
            Ok(Until::Idle(idle)) if idle == Duration::from_millis(300)
        ));
    }

    #[test]
    fn each_line_is_the_contracts() {
        assert_eq!(Fired::Regex.line(), "[until: regex matched]");
        assert_eq!(Fired::Port(5173).line(), "[until: port 5173 open]");
        assert_eq!(Fired::Idle(500).line(), "[until: idle 500 ms]");
        assert_eq!(Fired::Exited.line(), "[until: exited]");
        assert_eq!(
            Fired::RanOut(2000).line(),
            "[until: wait ran out after 2000 ms]"
        );
    }
}
