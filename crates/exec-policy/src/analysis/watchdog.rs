//! brush-parser with a time budget. Fuzzing found inputs of a few hundred
//! bytes (nested `$[`, `[`, `(` and quotes) on which its PEG grammar
//! backtracks for seconds or longer, and a thread cannot be stopped from
//! outside. So text that could be slow is parsed on a worker thread: when
//! the answer does not come within the budget, the analysis takes the
//! token-level fallback and the worker is left to finish on its own (a new
//! one takes its place). At most [`MAX_STUCK`] worker may be stuck at
//! once; past that, such text is not parsed at all until it finishes.
//! Short, plain commands (nearly every agent command) are parsed inline,
//! at no extra cost.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use brush_parser::ast::Program;
use brush_parser::{Parser, ParserOptions};

/// How long a parse may take before the fallback is used. Legitimate text
/// parses in about a millisecond per 10 KB here.
const BUDGET: Duration = Duration::from_millis(500);

/// Workers abandoned mid-parse at most at one time. One: a stuck worker
/// spins a core until brush-parser gives up (which may be never), so a
/// client sending such text can cost one core, not the machine.
const MAX_STUCK: usize = 1;

/// Grouping openers (outside quotes) above which a parse goes to a worker.
const INLINE_OPENERS: usize = 12;

type Reply = Option<Program>;
type Job = (String, ParserOptions, Sender<Reply>);

/// A parser worker and the count of those abandoned.
struct Watchdog {
    stuck: &'static AtomicUsize,
    worker: Mutex<Option<Sender<Job>>>,
    budget: Duration,
}

static GLOBAL_STUCK: AtomicUsize = AtomicUsize::new(0);
static GLOBAL: Watchdog = Watchdog::new(&GLOBAL_STUCK, BUDGET);

/// Parses `script`; `None` when it does not parse, panics, or runs out of time.
pub(crate) fn parse(script: &str, options: &ParserOptions) -> Option<Program> {
    if openers(script) <= INLINE_OPENERS {
        return parse_inline(script, options);
    }
    GLOBAL.parse(script, options)
}

impl Watchdog {
    const fn new(stuck: &'static AtomicUsize, budget: Duration) -> Self {
        Self {
            stuck,
            worker: Mutex::new(None),
            budget,
        }
    }

    fn parse(&self, script: &str, options: &ParserOptions) -> Option<Program> {
        if self.stuck.load(Ordering::Relaxed) >= MAX_STUCK {
            return None;
        }
        let (reply, answer): (Sender<Reply>, Receiver<Reply>) = mpsc::channel();
        {
            let mut worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner);
            let job = (script.to_owned(), options.clone(), reply);
            let sender = match worker.as_ref() {
                Some(sender) => sender.clone(),
                None => {
                    let sender = spawn_worker(self.stuck)?;
                    *worker = Some(sender.clone());
                    sender
                }
            };
            if sender.send(job).is_err() {
                *worker = None;
                return None;
            }
        }
        match answer.recv_timeout(self.budget) {
            Ok(program) => program,
            Err(_) => {
                // The worker is busy for who knows how long: later parses get a new one.
                self.stuck.fetch_add(1, Ordering::Relaxed);
                *self.worker.lock().unwrap_or_else(PoisonError::into_inner) = None;
                None
            }
        }
    }
}

fn parse_inline(script: &str, options: &ParserOptions) -> Option<Program> {
    // A parser panic is a fallback, never a crash.
    catch_unwind(AssertUnwindSafe(|| {
        Parser::new(script.as_bytes(), options).parse_program()
    }))
    .ok()
    .and_then(Result::ok)
}

fn spawn_worker(stuck: &'static AtomicUsize) -> Option<Sender<Job>> {
    let (sender, jobs) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("policy-parser".into())
        .spawn(move || {
            for (script, options, reply) in jobs {
                let program = parse_inline(&script, &options);
                if reply.send(program).is_err() {
                    // Its caller gave up: this worker was counted as stuck.
                    stuck.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
        })
        .ok()?;
    Some(sender)
}

/// Grouping openers outside single quotes: `(`, `[`, `{`, and backticks.
fn openers(script: &str) -> usize {
    let mut count = 0;
    let mut in_single = false;
    for byte in script.bytes() {
        match byte {
            b'\'' => in_single = !in_single,
            b'(' | b'[' | b'{' | b'`' if !in_single => count += 1,
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_commands_are_parsed_inline_and_deep_ones_by_a_worker() {
        assert_eq!(openers("git status"), 0);
        assert_eq!(openers("echo '((((' $(date)"), 1);
        let options = ParserOptions::default();
        assert!(parse("ls -la && echo ok", &options).is_some());
        let busy = format!("echo {}", "$(a) ".repeat(40));
        assert!(openers(&busy) > INLINE_OPENERS);
        assert!(parse(&busy, &options).is_some());
    }

    /// Found by fuzzing (`tool_arguments`): brush-parser took 6 s on a 1.8 KB
    /// command; this 225-byte reduction still takes seconds.
    #[test]
    fn a_pathological_command_is_cut_off_by_the_budget() {
        let slow = "o[9$[(e.$['''' | ''(c`bb~!b`b(] $[''|~e$[:::.$[''|.''|'A'::$[$['':W(_$C[T(_,] .'']]:d ]~r(n[`nt wo~b`bbbTe['' ~: _)''[''ke[''$''| 'A'. :::::.$[ke$['' |~[T'A'..$[oke$[C[T(n[ e,] 'A'.'Z'](n[ )] )]]I]:d(_)]|~[Tn:(n,_)] 'A'.='Z'I";
        // A watchdog of its own, so the global one is not left with a stuck worker.
        let watchdog = Watchdog::new(Box::leak(Box::new(AtomicUsize::new(0))), BUDGET);
        let started = std::time::Instant::now();
        assert!(watchdog.parse(slow, &ParserOptions::default()).is_none());
        // Generous for a loaded machine; without the budget it is seconds to minutes.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
}
