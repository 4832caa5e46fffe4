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
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use brush_parser::ast::Program;
use brush_parser::word::{self, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

use super::lexical::quoted_bytes;

/// How long one parse may take before the fallback is used. Legitimate text
/// parses in about a millisecond per 10 KB here.
const BUDGET: Duration = Duration::from_millis(500);

/// How long all the parses of one analysis may take together: a command
/// with many slow pieces (substitutions, `bash -c` bodies, words) must not
/// add up their budgets. Past it, what is left takes the fallback.
pub(crate) const ANALYSIS_BUDGET: Duration = Duration::from_secs(1);

/// Workers abandoned mid-parse at most at one time. One: a stuck worker
/// spins a core until brush-parser gives up (which may be never), so a
/// client sending such text can cost one core, not the machine.
const MAX_STUCK: usize = 1;

/// Grouping openers (outside quotes) above which a parse goes to a worker.
const INLINE_OPENERS: usize = 12;

/// The same for one word, counting each `$` too: the word grammar blows up
/// sooner (fuzzing: six unclosed `${x[` in one word took 4 s inline). A
/// typical word (`"$HOME/x"`, `"build-$(date +%s).log"`) stays inline.
const INLINE_WORD_OPENERS: usize = 6;

/// What every time budget here is multiplied by (see [`scale_parse_budgets`]).
static SCALE: AtomicU32 = AtomicU32::new(1);

/// Multiplies the parse budgets (per parse and per analysis) by `factor`
/// for the rest of the process. For measuring under an instruction
/// counter (valgrind runs code 50 to 100 times slower, and a parse that
/// outlasts its budget takes the fallback, which is not what is being
/// measured); nothing in agent-exec calls it.
pub fn scale_parse_budgets(factor: u32) {
    SCALE.store(factor.max(1), Ordering::Relaxed);
}

fn scaled(budget: Duration) -> Duration {
    budget.saturating_mul(SCALE.load(Ordering::Relaxed))
}

/// The moment an analysis stops parsing slow text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// The deadline of one analysis, [`ANALYSIS_BUDGET`] from now.
    pub(crate) fn for_analysis() -> Self {
        Self::after(scaled(ANALYSIS_BUDGET))
    }

    /// A deadline `budget` from now.
    pub(crate) fn after(budget: Duration) -> Self {
        Self(Instant::now() + budget)
    }

    fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }
}

/// A parse to run on the worker; `false` when its caller gave up on it.
type Job = Box<dyn FnOnce() -> bool + Send>;

/// A job's progress, settled by whichever of caller and worker comes last.
const PENDING: u8 = 0;
const DONE: u8 = 1;
const ABANDONED: u8 = 2;

/// A parser worker and the count of those abandoned.
struct Watchdog {
    stuck: &'static AtomicUsize,
    worker: Mutex<Option<Sender<Job>>>,
    budget: Duration,
}

static GLOBAL_STUCK: AtomicUsize = AtomicUsize::new(0);
static GLOBAL: Watchdog = Watchdog::new(&GLOBAL_STUCK, BUDGET);

/// Parses `script`; `None` when it does not parse, panics, or runs out of time.
pub(crate) fn parse(script: &str, options: &ParserOptions, deadline: Deadline) -> Option<Program> {
    if openers(script) <= INLINE_OPENERS {
        return parse_inline(script, options);
    }
    let (script, options) = (script.to_owned(), options.clone());
    GLOBAL.run(deadline, move || parse_inline(&script, &options))
}

/// Parses one word into its pieces, under the same rules as [`parse`]:
/// brush-parser's word grammar backtracks as badly as its script grammar
/// (fuzzing: a 1.5 KB word of nested `$[`, `{`, backticks and quotes).
pub(crate) fn parse_word(
    raw: &str,
    options: &ParserOptions,
    deadline: Deadline,
) -> Option<Vec<WordPieceWithSource>> {
    if openers_and_dollars(raw) <= INLINE_WORD_OPENERS {
        return parse_word_inline(raw, options);
    }
    let (raw, options) = (raw.to_owned(), options.clone());
    GLOBAL.run(deadline, move || parse_word_inline(&raw, &options))
}

impl Watchdog {
    const fn new(stuck: &'static AtomicUsize, budget: Duration) -> Self {
        Self {
            stuck,
            worker: Mutex::new(None),
            budget,
        }
    }

    /// Runs `work` on the worker and waits for it within the budget.
    fn run<T: Send + 'static>(
        &self,
        deadline: Deadline,
        work: impl FnOnce() -> Option<T> + Send + 'static,
    ) -> Option<T> {
        let budget = scaled(self.budget).min(deadline.remaining());
        if budget.is_zero() || self.stuck.load(Ordering::Relaxed) >= MAX_STUCK {
            return None;
        }
        let (reply, answer): (Sender<Option<T>>, Receiver<Option<T>>) = mpsc::channel();
        let state = Arc::new(AtomicU8::new(PENDING));
        let job_state = Arc::clone(&state);
        let job: Job = Box::new(move || {
            // The receiver may be gone already; the state says what to do.
            let _ = reply.send(work());
            job_state.swap(DONE, Ordering::AcqRel) != ABANDONED
        });
        {
            let mut worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner);
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
        if let Ok(parsed) = answer.recv_timeout(budget) {
            return parsed;
        }
        // Counted before the state changes, so the worker's release (which
        // needs to see ABANDONED) can never come first and underflow.
        self.stuck.fetch_add(1, Ordering::AcqRel);
        if state.swap(ABANDONED, Ordering::AcqRel) == DONE {
            // It finished just now: not stuck after all.
            self.stuck.fetch_sub(1, Ordering::AcqRel);
            return answer.try_recv().ok().flatten();
        }
        // The worker is busy for who knows how long: later parses get a new one.
        *self.worker.lock().unwrap_or_else(PoisonError::into_inner) = None;
        None
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

fn parse_word_inline(raw: &str, options: &ParserOptions) -> Option<Vec<WordPieceWithSource>> {
    // The word grammar unwraps number parses (`~99999999999999999999`,
    // `{1..99999999999999999999}` panic; found by fuzzing): a panic is a
    // word we cannot expand, never a crash.
    catch_unwind(AssertUnwindSafe(|| word::parse(raw, options)))
        .ok()
        .and_then(Result::ok)
}

/// The parser thread's stack.
const PARSER_STACK: usize = 64 << 20;

fn spawn_worker(stuck: &'static AtomicUsize) -> Option<Sender<Job>> {
    let (sender, jobs) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("policy-parser".into())
        // brush-parser recurses once per nesting level of the text; with
        // the default 2 MiB a fuzzed command of nested braces, parameter
        // expansions and fed scripts overflowed this stack (SIGSEGV, the
        // whole server gone). Untouched stack costs only address space.
        .stack_size(PARSER_STACK)
        .spawn(move || {
            for job in jobs {
                if !job() {
                    // Its caller gave up and counted this worker as stuck;
                    // a new worker has taken its place.
                    stuck.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
            }
        })
        .ok()?;
    Some(sender)
}

/// Grouping openers and double quotes, outside text that is surely
/// single-quoted. Only surely: a `'` inside double quotes or backticks
/// opens nothing, and counting it as a quote hid a 1.8 KB command full of
/// `{`, `$[` and backticks from the budget (fuzzing, `tool_arguments`).
fn openers(script: &str) -> usize {
    count_unquoted(script, |byte| {
        matches!(byte, b'(' | b'[' | b'{' | b'`' | b'"')
    })
}

/// [`openers`] plus each `$`, outside surely single-quoted text.
fn openers_and_dollars(word: &str) -> usize {
    count_unquoted(word, |byte| {
        matches!(byte, b'(' | b'[' | b'{' | b'`' | b'"' | b'$')
    })
}

fn count_unquoted(text: &str, counted: impl Fn(u8) -> bool) -> usize {
    text.bytes()
        .zip(quoted_bytes(text))
        .filter(|&(byte, quoted)| !quoted && counted(byte))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_commands_are_parsed_inline_and_deep_ones_by_a_worker() {
        assert_eq!(openers("git status"), 0);
        assert_eq!(openers("echo '((((' $(date)"), 1);
        assert_eq!(openers("jq '.[] | {a: .b}' \"$f\""), 2);
        // After a double quote, a `'` is no longer trusted to quote.
        assert_eq!(openers("echo \"'\" '(('"), 4);
        // Its single quotes were taken at face value: 12 or fewer counted,
        // 1.2 s in the word grammar under fuzzing instrumentation.
        let found =
            include_str!("../../../../fuzz/seeds/analyzer_bytes/regression-quotes-hid-openers");
        assert!(openers(found) > INLINE_OPENERS);
        let options = ParserOptions::default();
        let deadline = Deadline::after(Duration::from_secs(60));
        assert!(parse("ls -la && echo ok", &options, deadline).is_some());
        let busy = format!("echo {}", "$(a) ".repeat(40));
        assert!(openers(&busy) > INLINE_OPENERS);
        assert!(parse(&busy, &options, deadline).is_some());
        assert!(parse_word(&"$(a)".repeat(40), &options, deadline).is_some());
    }

    /// Found by fuzzing (`tool_arguments`): brush-parser took 6 s on a 1.8 KB
    /// command; this 225-byte reduction still takes seconds.
    #[test]
    fn a_pathological_command_is_cut_off_by_the_budget() {
        let slow = "o[9$[(e.$['''' | ''(c`bb~!b`b(] $[''|~e$[:::.$[''|.''|'A'::$[$['':W(_$C[T(_,] .'']]:d ]~r(n[`nt wo~b`bbbTe['' ~: _)''[''ke[''$''| 'A'. :::::.$[ke$['' |~[T'A'..$[oke$[C[T(n[ e,] 'A'.'Z'](n[ )] )]]I]:d(_)]|~[Tn:(n,_)] 'A'.='Z'I";
        // A watchdog of its own, so the global one is not left with a stuck worker.
        let watchdog = Watchdog::new(Box::leak(Box::new(AtomicUsize::new(0))), BUDGET);
        let started = std::time::Instant::now();
        let (slow, options) = (slow.to_owned(), ParserOptions::default());
        let deadline = Deadline::after(Duration::from_secs(60));
        assert!(
            watchdog
                .run(deadline, move || parse_inline(&slow, &options))
                .is_none()
        );
        // Generous for a loaded machine; without the budget it is seconds to minutes.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    /// A worker that was given up on is counted as stuck only until it
    /// finishes; then parsing on a worker works again.
    #[test]
    fn an_abandoned_worker_is_released_when_it_finishes() {
        let stuck: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        // Generous: a fresh worker must answer within it even under ptrace
        // (coverage) on a loaded machine; the slow job outlasts it surely.
        let watchdog = Watchdog::new(stuck, Duration::from_secs(2));
        let deadline = Deadline::after(Duration::from_secs(60));
        let slow = watchdog.run(deadline, || {
            std::thread::sleep(Duration::from_secs(5));
            Some(1)
        });
        assert_eq!(slow, None);
        assert_eq!(stuck.load(Ordering::Acquire), 1);
        // While it is stuck, nothing else goes to a worker.
        assert_eq!(watchdog.run(deadline, || Some(2)), None);
        let released = Instant::now() + Duration::from_secs(30);
        while stuck.load(Ordering::Acquire) != 0 && Instant::now() < released {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stuck.load(Ordering::Acquire), 0);
        assert_eq!(watchdog.run(deadline, || Some(3)), Some(3));
    }

    /// Once an analysis has used its budget, slow text is not parsed at all.
    #[test]
    fn a_spent_deadline_sends_nothing_to_the_worker() {
        let stuck: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let watchdog = Watchdog::new(stuck, BUDGET);
        let spent = Deadline::after(Duration::ZERO);
        assert_eq!(watchdog.run(spent, || Some(1)), None);
        assert_eq!(stuck.load(Ordering::Acquire), 0);
    }
}
