//! Turning captured streams into the answer text a model reads.

use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use shell_runtime::{CleanOptions, OutputSlice, ShellProcess, SpillShortfall, Stream, clean_text};

use crate::environment::{ExecEnvironment, OUTPUT_FILE_CAP};
use crate::text::{Cut, assemble, plan_cut};

/// An answer text and what became of its output.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) text: String,
    pub(crate) truncated: bool,
    pub(crate) output_file: Option<PathBuf>,
    /// Characters of output the text leaves out (the truncation line's count).
    pub(crate) omitted_chars: Option<u64>,
}

/// Applies the configured clean-ups (escape sequences, progress redraws)
/// with the cleaner tty output files get, so an answer and a file show the
/// same text. Text they changed is redacted again: a secret drawn in pieces
/// (`SEC\e[0mRET`) is whole only once the sequences are gone.
pub(crate) fn clean(env: &ExecEnvironment, text: &str) -> String {
    let cleaned = clean_text(
        text,
        CleanOptions {
            escapes: env.config.strip_ansi,
            redraws: env.config.collapse_progress,
        },
    );
    if cleaned == text {
        cleaned
    } else {
        env.redact(&cleaned)
    }
}

/// The output part of an answer, and what in it is not output: the lines
/// that stand for what a buffer dropped and the `[stderr]` separator, so
/// that a truncation line can count exactly the output it leaves out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Body {
    text: String,
    /// Byte ranges of `text` that are notices, not output; in order.
    notices: Vec<Range<usize>>,
    /// Characters of output the buffers dropped: never in `text`.
    dropped_chars: u64,
}

impl Body {
    /// One stream's new output. `shape` turns each run of its text into what
    /// is shown (clean-ups, a filter); a gap becomes one
    /// `[... N bytes dropped ...]` line, which no filter removes.
    pub(crate) fn from_slice(slice: &OutputSlice, shape: impl Fn(&str) -> String) -> Self {
        let mut body = Self {
            text: shape(&slice.before_gap),
            ..Self::default()
        };
        if slice.dropped > 0 {
            let start = body.text.len();
            if !body.text.is_empty() && !body.text.ends_with('\n') {
                body.text.push('\n');
            }
            body.text
                .push_str(&format!("[... {} bytes dropped ...]\n", slice.dropped));
            body.notices.push(start..body.text.len());
            body.dropped_chars = slice.dropped_chars;
        }
        body.text.push_str(&shape(&slice.after_gap));
        body
    }

    /// Both streams' new output, each shaped by `shape`, joined.
    pub(crate) fn from_streams(
        stdout: &OutputSlice,
        stderr: &OutputSlice,
        shape: impl Fn(&str) -> String,
    ) -> Self {
        Self::join(
            Self::from_slice(stdout, &shape),
            Self::from_slice(stderr, &shape),
        )
    }

    /// stdout, then `\n[stderr]\n` and stderr when there is any.
    pub(crate) fn join(stdout: Self, stderr: Self) -> Self {
        if stderr.text.is_empty() {
            return stdout;
        }
        let mut body = stdout;
        let separator = body.text.len();
        body.text.push_str("\n[stderr]\n");
        body.notices.push(separator..body.text.len());
        let offset = body.text.len();
        body.text.push_str(&stderr.text);
        body.notices.extend(
            stderr
                .notices
                .into_iter()
                .map(|range| range.start + offset..range.end + offset),
        );
        body.dropped_chars += stderr.dropped_chars;
        body
    }

    /// The text as shown when it fits.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Moves the ends of `cut` out of any notice (a notice is shown whole or
    /// not at all) and returns it with the characters of output it leaves
    /// out, counting what the buffers dropped.
    fn omitted_output(&self, cut: Cut) -> (Cut, u64) {
        let (mut head_end, mut tail_start) = (cut.head_end, cut.tail_start);
        for notice in &self.notices {
            if notice.start < head_end && head_end < notice.end {
                head_end = notice.start;
            }
            if notice.start < tail_start && tail_start < notice.end {
                tail_start = notice.end;
            }
        }
        let cut = if (head_end, tail_start) == (cut.head_end, cut.tail_start) {
            cut
        } else {
            Cut::new(&self.text, head_end, tail_start)
        };
        let notices_left_out: usize = self
            .notices
            .iter()
            .filter(|notice| cut.head_end <= notice.start && notice.end <= cut.tail_start)
            .map(|notice| self.text[notice.clone()].chars().count())
            .sum();
        let omitted = (cut.omitted - notices_left_out) as u64 + self.dropped_chars;
        (cut, omitted)
    }
}

/// Lays out `prefix`, the output and `notes`, keeping the whole within
/// `budget` characters (plus one truncation line). A foreground shell's
/// spill files (`spill`) become the one output file when the output is cut,
/// and are removed otherwise.
pub(crate) fn render_streams(
    env: &ExecEnvironment,
    stdout: &OutputSlice,
    stderr: &OutputSlice,
    prefix: Option<&str>,
    notes: &[String],
    budget: usize,
    spill: Option<(&ShellProcess, &Path)>,
) -> Rendered {
    let body = Body::from_streams(stdout, stderr, |text| clean(env, text));
    let rendered = layout(prefix, &body, notes, budget, || {
        spill.and_then(|(shell, stem)| combine_spills(env, shell, stem))
    });
    if let Some((shell, _)) = spill {
        remove_spills(env, shell);
    }
    rendered
}

/// Where the output not shown can be read, and how much of it is there.
#[derive(Debug)]
pub(crate) struct SavedOutput {
    /// The file (for `BashOutput`, both files' paths joined with ` and `);
    /// `None` when nothing could be written (`output_file` is then left out).
    pub(crate) path: Option<PathBuf>,
    /// For the truncation line: `full output in FILE` when the file holds
    /// the whole output, `first N bytes in FILE: WHY` when it holds part,
    /// `no output file: WHY` when nothing could be written.
    pub(crate) place: String,
}

impl SavedOutput {
    /// Describes `path`, which holds `bytes` bytes of the output, all of
    /// it unless `shortfall` says why not.
    pub(crate) fn new(path: PathBuf, bytes: u64, shortfall: Option<SpillShortfall>) -> Self {
        match shortfall {
            None => Self {
                place: format!("full output in {}", path.display()),
                path: Some(path),
            },
            Some(shortfall) if bytes == 0 => Self {
                place: format!("no output file: {}", shortfall.reason()),
                path: None,
            },
            Some(shortfall) => Self {
                place: format!(
                    "first {bytes} bytes in {}: {}",
                    path.display(),
                    shortfall.reason()
                ),
                path: Some(path),
            },
        }
    }
}

/// The layout shared by `Bash` and `BashOutput`. `output_file` is asked for
/// only when the text must be cut. The truncation line counts every
/// character of output the answer does not show: what the head-and-tail cut
/// leaves out and what the buffers dropped before (notices such as the
/// `[stderr]` line are not output). Characters cut are counted after the
/// clean-ups, characters dropped as they came.
pub(crate) fn layout(
    prefix: Option<&str>,
    body: &Body,
    notes: &[String],
    budget: usize,
    output_file: impl FnOnce() -> Option<SavedOutput>,
) -> Rendered {
    let fixed: usize = prefix.map_or(0, |p| p.chars().count() + 1)
        + notes
            .iter()
            .map(|note| note.chars().count() + 1)
            .sum::<usize>();
    let room = budget.saturating_sub(fixed + 1);
    let mut file = None;
    let mut omitted_chars = None;
    let (body, truncated) = match plan_cut(body.text(), room) {
        None => (body.text().to_owned(), false),
        Some(cut) => {
            let (cut, omitted) = body.omitted_output(cut);
            let saved = output_file();
            let place = saved
                .as_ref()
                .map(|saved| format!("; {}", saved.place))
                .unwrap_or_default();
            file = saved.and_then(|saved| saved.path);
            omitted_chars = Some(omitted);
            let marker = format!("[Output truncated: {omitted} characters omitted{place}]");
            (assemble(body.text(), cut, &marker), true)
        }
    };
    let mut text = String::new();
    if let Some(prefix) = prefix {
        text.push_str(prefix);
        if !body.is_empty() {
            text.push('\n');
        }
    }
    text.push_str(&body);
    for note in notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(note);
    }
    Rendered {
        text,
        truncated,
        output_file: file,
        omitted_chars,
    }
}

/// Writes stdout's spill, `\n[stderr]\n` and stderr's spill into one file.
fn combine_spills(
    exec: &ExecEnvironment,
    shell: &ShellProcess,
    stem: &Path,
) -> Option<SavedOutput> {
    let out = shell.ensure_spill_file(Stream::Stdout)?;
    let err = shell.ensure_spill_file(Stream::Stderr)?;
    let path = stem.with_extension("txt");
    const SEPARATOR: &[u8] = b"\n[stderr]\n";
    let wanted = (out.written + SEPARATOR.len() as u64 + err.written).min(OUTPUT_FILE_CAP);
    let granted = exec.budget().take(wanted);
    let mut copy = CappedCopy {
        to: std::fs::File::create(&path).ok()?,
        room: granted,
        room_ends: if granted < wanted {
            SpillShortfall::Budget
        } else {
            SpillShortfall::Cap
        },
        written: 0,
        shortfall: out.shortfall.or(err.shortfall),
    };
    copy.file(&out.file.path);
    if err.written > 0 {
        copy.bytes(SEPARATOR);
        copy.file(&err.file.path);
    }
    // A failed write may have written part of what it was given.
    let bytes = copy.to.metadata().map_or(copy.written, |meta| meta.len());
    exec.budget().give_back(granted.saturating_sub(bytes));
    if bytes == 0 {
        // Nothing could be written: no file is named, and none is left.
        let _ = std::fs::remove_file(&path);
    } else {
        exec.keep_files(None, &[&path]);
    }
    Some(SavedOutput::new(path, bytes, copy.shortfall))
}

/// Copies into the combined output file, up to the room taken from the
/// budget (at most the per-command cap), remembering the first reason it
/// holds less than the whole output.
struct CappedCopy {
    to: std::fs::File,
    room: u64,
    /// Why the room ends: the per-command cap, or the server's budget.
    room_ends: SpillShortfall,
    written: u64,
    shortfall: Option<SpillShortfall>,
}

impl CappedCopy {
    fn file(&mut self, from: &Path) {
        let Ok(source) = std::fs::File::open(from) else {
            self.shortfall
                .get_or_insert(SpillShortfall::WriteFailed(std::io::ErrorKind::NotFound));
            return;
        };
        let length = source.metadata().map_or(0, |meta| meta.len());
        if length > self.room {
            self.shortfall.get_or_insert(self.room_ends);
        }
        let mut limited = source.take(self.room);
        match std::io::copy(&mut limited, &mut self.to) {
            Ok(copied) => self.advance(copied),
            Err(error) => {
                self.shortfall
                    .get_or_insert(SpillShortfall::WriteFailed(error.kind()));
                self.room = 0;
            }
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        if (bytes.len() as u64) > self.room {
            self.shortfall.get_or_insert(self.room_ends);
            self.room = 0;
            return;
        }
        match self.to.write_all(bytes) {
            Ok(()) => self.advance(bytes.len() as u64),
            Err(error) => {
                self.shortfall
                    .get_or_insert(SpillShortfall::WriteFailed(error.kind()));
                self.room = 0;
            }
        }
    }

    fn advance(&mut self, copied: u64) {
        self.room -= copied;
        self.written += copied;
    }
}

fn remove_spills(exec: &ExecEnvironment, shell: &ShellProcess) {
    for stream in [Stream::Stdout, Stream::Stderr] {
        if let Some(spill) = shell.spill_report(stream).filter(|spill| spill.on_disk)
            && std::fs::remove_file(&spill.file.path).is_ok()
        {
            exec.budget().give_back(spill.written);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment() -> ExecEnvironment {
        let dir = std::env::temp_dir();
        ExecEnvironment::new(crate::environment::ExecConfig::from_policy(
            &exec_policy::Policy::default(),
            vec![dir.clone()],
            dir,
            vec![(
                "MY_SERVICE_TOKEN".to_owned(),
                "tok-0123456789-abcdef".to_owned(),
            )],
        ))
    }

    #[test]
    fn every_sequence_family_leaves_no_stray_character_in_an_answer() {
        let env = environment();
        for case in test_support::escapes::ESCAPE_FAMILIES {
            assert_eq!(clean(&env, case.text), case.cleaned, "{}", case.family);
            assert_eq!(
                test_support::clean_in_pieces(case.text, &[]),
                case.cleaned,
                "{} (tty file)",
                case.family
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn an_answer_shows_what_a_tty_file_holds_however_the_stream_was_cut(
            text in test_support::escapes::ESCAPE_HEAVY_TEXT,
            cuts in proptest::collection::vec(0usize..800, 0..6),
        ) {
            let env = environment();
            let answer = clean(&env, &text);
            proptest::prop_assert_eq!(&answer, &test_support::clean_in_pieces(&text, &cuts));
            proptest::prop_assert!(
                !answer.chars().any(|c| c.is_control() && c != '\t' && c != '\n'),
                "{:?}",
                answer
            );
        }

        #[test]
        fn an_answer_of_any_text_holds_no_control_but_tab_and_newline(text in "(?s).{0,400}") {
            let answer = clean(&environment(), &text);
            proptest::prop_assert!(
                !answer.chars().any(|c| c.is_control() && c != '\t' && c != '\n'),
                "{:?}",
                answer
            );
        }
    }

    #[test]
    fn a_secret_split_by_an_escape_sequence_is_redacted_once_cleaned() {
        let env = environment();
        assert_eq!(
            clean(&env, "k=tok-0123\u{1b}[0m456789-abcdef\r\n"),
            "k=[REDACTED:MY_SERVICE_TOKEN]\n"
        );
    }

    fn plain(text: &str) -> Body {
        Body::from_slice(
            &OutputSlice {
                before_gap: text.to_owned(),
                ..OutputSlice::default()
            },
            str::to_owned,
        )
    }

    /// The count in the truncation line of `text`.
    fn omitted_in(text: &str) -> u64 {
        let marker = text
            .lines()
            .find(|line| line.starts_with("[Output truncated: "))
            .expect("a truncation line");
        marker["[Output truncated: ".len()..]
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a count")
    }

    #[test]
    fn the_whole_answer_fits_the_budget() {
        let body = plain(&"x".repeat(50_000));
        let notes = vec!["[ended 1 background job(s) left by the command]".to_owned()];
        let rendered = layout(
            Some("Command failed with exit code 1"),
            &body,
            &notes,
            30_000,
            || Some(SavedOutput::new(PathBuf::from("/tmp/out.txt"), 1, None)),
        );
        assert!(rendered.truncated);
        let without_marker: String = rendered
            .text
            .lines()
            .filter(|line| !line.starts_with("[Output truncated"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            without_marker.chars().count() <= 30_000,
            "{}",
            without_marker.chars().count()
        );
        assert!(
            rendered
                .text
                .starts_with("Command failed with exit code 1\n")
        );
        assert!(rendered.text.ends_with(&notes[0]));
        assert!(rendered.text.contains("full output in /tmp/out.txt]"));
    }

    #[test]
    fn stderr_follows_a_marker() {
        assert_eq!(
            Body::join(plain("out\n"), plain("err\n")).text(),
            "out\n\n[stderr]\nerr\n"
        );
        assert_eq!(Body::join(plain("out\n"), plain("")).text(), "out\n");
    }

    #[test]
    fn the_count_includes_what_the_buffer_dropped_and_no_notice() {
        let slice = OutputSlice {
            before_gap: "a\n".repeat(100),
            dropped: 5000,
            dropped_chars: 2000,
            after_gap: "é\n".repeat(100),
        };
        let body = Body::join(
            Body::from_slice(&slice, str::to_owned),
            plain(&"e\n".repeat(100)),
        );
        assert!(body.text().contains("\n[... 5000 bytes dropped ...]\né\n"));
        let rendered = layout(None, &body, &[], 101, || None);
        assert!(rendered.truncated);
        // 40 characters of head and 60 of tail are shown, of 600 + 2000.
        assert_eq!(omitted_in(&rendered.text), 600 + 2000 - 100);
        assert!(!rendered.text.contains("bytes dropped"));
        assert!(!rendered.text.contains("[stderr]"));
    }

    #[test]
    fn a_notice_is_shown_whole_or_not_at_all() {
        // The head would end inside the gap line.
        let slice = OutputSlice {
            before_gap: "ab".to_owned(),
            dropped: 7,
            dropped_chars: 7,
            after_gap: "x".repeat(100),
        };
        let body = Body::from_slice(&slice, str::to_owned);
        let rendered = layout(None, &body, &[], 31, || None);
        assert!(
            rendered.text.starts_with("ab\n[Output truncated: "),
            "{}",
            rendered.text
        );
        // "ab" and 27 characters of tail are shown, of 2 + 7 + 100.
        assert_eq!(omitted_in(&rendered.text), 109 - 2 - 27);
    }
}
