//! What the four tools share within one server: configuration, the policy,
//! the scrubbed environment, the shell manager and the output files.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use std::sync::Arc;

use exec_policy::{
    Analyzer, AnalyzerConfig, EnvRules, NetworkAccess, Policy, SandboxMode, SandboxSpec,
    ScrubbedEnv, scrub_environment,
};
use shell_runtime::{
    ConfineError, Confinement, ConfinementSpec, Redactions, ShellManager, SpillBudget, TokenPattern,
};

use crate::audit::AuditLog;

/// The answer text is held to this many characters (plus one truncation
/// line) unless [`ExecConfig::max_output_chars`] says otherwise.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Bytes of one command's full output kept on disk.
pub const OUTPUT_FILE_CAP: u64 = 64 * 1024 * 1024;
/// Bytes of all output files of one server, oldest removed first.
pub const OUTPUT_TOTAL_CAP: u64 = 1024 * 1024 * 1024;
/// The foreground timeout when the call names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(120_000);

/// How the tools behave; built once per server.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// Directories commands may run in (canonical). The first is the default.
    pub roots: Vec<PathBuf>,
    /// Dangerous-command analysis settings (protected paths, regexes).
    pub analyzer: AnalyzerConfig,
    /// The environment commands get, and the secrets removed from it.
    pub env: ScrubbedEnv,
    /// Redact tokens in well-known formats (`secret_formats::FORMATS`)
    /// from all output, besides the scrubbed values (`[redact] formats`).
    pub redact_formats: bool,
    /// Process names left running when a foreground command ends.
    pub keep_processes: Vec<String>,
    /// Where output files go (the server's temp dir).
    pub output_dir: PathBuf,
    /// `NAME <EMAIL>` added as a `Co-authored-by` trailer to `git commit`.
    pub coauthor: Option<String>,
    /// Strip escape sequences (every ECMA-48 family) and stray control
    /// characters from answers.
    pub strip_ansi: bool,
    /// Keep only the last drawing of `\r`-redrawn progress lines in answers,
    /// and apply backspaces.
    pub collapse_progress: bool,
    /// One sentence appended to the Bash description (the sandbox, say).
    pub description_note: Option<String>,
    /// The most characters of output an answer of `Bash` or `BashOutput`
    /// shows (head and tail, plus one truncation line; [`MAX_OUTPUT_CHARS`]
    /// unless changed, for clients that keep less of a tool result).
    pub max_output_chars: usize,
    /// The sandbox every command runs in, prepared by [`prepare_sandbox`].
    pub confinement: Option<Arc<Confinement>>,
    /// Under write walls (`read-only`, `workspace-write`): where writes
    /// stay allowed, so an answer can name a write the walls refused.
    pub write_walls: Option<WriteWalls>,
    /// `TMPDIR` for commands (the sandbox's private temp dir), if set.
    pub tmpdir: Option<PathBuf>,
    /// A foreground command still running after this long goes on as a
    /// background shell (for clients whose call timeout is shorter than a
    /// command); `None` waits until the command ends.
    pub background_after: Option<Duration>,
    /// The timeout of a foreground call that gives none ([`DEFAULT_TIMEOUT`],
    /// the contract's 120000 ms, unless changed).
    pub default_timeout: Duration,
    /// Bytes all output files of this server may hold together
    /// ([`OUTPUT_TOTAL_CAP`] unless changed).
    pub output_budget: u64,
    /// Where every decision and every end of a command is recorded, if anywhere.
    pub audit: Option<Arc<AuditLog>>,
    /// Judge every exec of a command's tree with the policy as it runs
    /// (docs/decisions/0018; Linux). On unless turned off.
    pub check_execs: bool,
    /// What an `ask` command gets when nobody can be asked.
    pub ask_fallback: AskFallback,
    /// How long a question waits for the person before it counts as
    /// `cancel` (default five minutes).
    pub ask_timeout: Duration,
    /// Bytes all unread output of this server's shells may hold in memory
    /// together, foreground output included
    /// ([`DEFAULT_MEMORY_BUDGET`](shell_runtime::DEFAULT_MEMORY_BUDGET)
    /// unless changed); past it the oldest output of the shell holding the
    /// most is dropped (its output file keeps it).
    pub memory_budget: u64,
    /// The limits of every command's own cgroup, where one can be made:
    /// its process cap (`[processes] max`, 1024 unless changed) and
    /// memory (`[limits] memory` or `--memory-limit`; none unless set).
    pub command_limits: shell_runtime::CommandLimits,
    /// The policy file the server loaded, where a `save` answer appends
    /// its `allow` rule; `None` when it runs without one.
    pub policy_file: Option<PathBuf>,
    /// Shell ids are handles nobody can guess: 32 random hex digits (128
    /// bits) instead of 8, for a server many clients reach (`serve`).
    pub long_handles: bool,
}

/// The write walls of `read-only` and `workspace-write`, as answers name
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteWalls {
    /// Where writes stay allowed (canonical): the roots, the private temp
    /// dir, the policy's `[sandbox] writable`, the server's own.
    pub writable: Vec<PathBuf>,
    /// `read-only`: the roots themselves are walled too.
    pub read_only: bool,
}

/// How long a question waits for the person by default.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_millis(300_000);

/// What an `ask` command gets when nobody can be asked (no client that
/// can ask the person, or a dry run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AskFallback {
    /// Refused, with a message that says how to allow it.
    #[default]
    Deny,
    /// Run (`approved_by: "fallback"`).
    Allow,
}

/// Turns the policy's sandbox request into a confinement shell-runtime
/// applies to every command; `None` when the sandbox is off. Fails when
/// the kernel cannot enforce what was asked.
///
/// In every mode but `off` each command runs in PID, mount and IPC
/// namespaces of its own, under a small init of shell-runtime's as its
/// PID 1; `read-only` and `workspace-write` add Landlock's write walls and
/// the sandbox's resource limits.
pub fn prepare_sandbox(spec: &SandboxSpec) -> Result<Option<Arc<Confinement>>, ConfineError> {
    if spec.is_off() {
        return Ok(None);
    }
    // Under plain `contain` the user's limits stay (each command still has
    // a cgroup of its own); the wall modes and `--network deny` without
    // namespaces keep the sandbox's.
    let limits = spec.mode != SandboxMode::Contain;
    let confinement = ConfinementSpec {
        restrict_writes: spec.mode.has_walls(),
        writable: spec.writable.clone(),
        deny_network: spec.network == NetworkAccess::Deny,
        max_file_size: limits.then_some(spec.limits.max_file_size),
        max_open_files: limits.then_some(spec.limits.max_open_files),
        no_core_dumps: limits && spec.limits.no_core_dumps,
        // Each command has its own cap (`ExecConfig::command_limits`), not
        // one shared by all: one command cannot take another's processes.
        max_processes: None,
        isolate_processes: spec.mode.contains(),
    };
    Confinement::prepare(&confinement).map(|prepared| Some(Arc::new(prepared)))
}

impl ExecConfig {
    /// Defaults: the given roots, the process's own environment scrubbed by
    /// the built-in rules, answers cleaned of ANSI codes and progress redraws.
    pub fn new(roots: Vec<PathBuf>, output_dir: PathBuf) -> Self {
        // `vars` would panic on a variable that is not UTF-8; such a one
        // cannot be passed on as text, so it is left out.
        let parent_env = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        Self::from_policy(&Policy::default(), roots, output_dir, parent_env)
    }

    /// From a loaded policy file and a parent environment.
    pub fn from_policy<I, K, V>(
        policy: &Policy,
        roots: Vec<PathBuf>,
        output_dir: PathBuf,
        parent_env: I,
    ) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            roots,
            analyzer: policy.analyzer.clone(),
            env: scrub_environment(parent_env, &policy.env),
            redact_formats: policy.redact.formats,
            keep_processes: policy.keep_processes.clone(),
            command_limits: shell_runtime::CommandLimits {
                max_processes: Some(
                    policy
                        .max_processes
                        .unwrap_or(shell_runtime::DEFAULT_MAX_PROCESSES),
                ),
                memory: policy.memory_limit,
            },
            output_dir,
            policy_file: None,
            long_handles: false,
            coauthor: None,
            strip_ansi: true,
            collapse_progress: true,
            description_note: None,
            max_output_chars: MAX_OUTPUT_CHARS,
            confinement: None,
            write_walls: None,
            tmpdir: None,
            background_after: None,
            default_timeout: DEFAULT_TIMEOUT,
            output_budget: OUTPUT_TOTAL_CAP,
            audit: None,
            check_execs: true,
            ask_fallback: AskFallback::Deny,
            ask_timeout: DEFAULT_ASK_TIMEOUT,
            memory_budget: shell_runtime::DEFAULT_MEMORY_BUDGET,
        }
    }

    /// The same with an explicit environment and rules (for tests and embedders).
    #[must_use]
    pub fn with_env<I, K, V>(mut self, parent_env: I, rules: &EnvRules) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.env = scrub_environment(parent_env, rules);
        self
    }
}

/// The shared state behind the three tools.
#[derive(Debug)]
pub struct ExecEnvironment {
    pub(crate) config: ExecConfig,
    pub(crate) analyzer: Analyzer,
    pub(crate) manager: ShellManager,
    /// The one redaction table: the scrubbed values (`[REDACTED:NAME]`)
    /// and, unless turned off, the token formats (`[REDACTED:FORMAT]`).
    /// Every command's streams share it; the configuration keeps only the
    /// names of the scrubbed variables.
    pub(crate) redactions: Arc<Redactions>,
    /// bash's absolute path, found once in the server's own `PATH`.
    pub(crate) shell_program: PathBuf,
    /// Output files kept for the model, oldest first.
    files: Mutex<VecDeque<KeptFile>>,
    /// The ledger's length at which `keep_files` next drops the entries of
    /// untracked shells whose files were never made.
    sweep_at: AtomicUsize,
    /// The bytes all output files may hold together.
    budget: SpillBudget,
    counter: AtomicU64,
    /// Approvals given with `remember: true`, for the server's life: keys
    /// of command text, working directory and the values of the variables
    /// the command uses.
    remembered: Arc<crate::approval::Remembered>,
    /// The judge of every exec (`None` when `check_execs` is off).
    pub(crate) exec_checks: Option<Arc<crate::exec_judge::ExecChecks>>,
    /// Each tty shell's refusals at run time, by pid, for the answers of
    /// later calls (`WriteStdin`).
    pub(crate) exec_refusals:
        Mutex<std::collections::HashMap<u32, Arc<crate::exec_judge::Refusals>>>,
    /// Which principal started each background shell (`shells.rs`).
    pub(crate) owners: crate::shells::ShellOwners,
    /// Each tty shell's approved effects, by pid: a line approved with
    /// `WriteStdin` adds its own.
    pub(crate) exec_approved:
        Mutex<std::collections::HashMap<u32, Arc<crate::exec_judge::Approved>>>,
}

impl ExecEnvironment {
    /// Shared state for `config`, with a shell manager of its own. The
    /// scrubbed values move into the redaction table: `config().env.removed`
    /// keeps their names with empty values.
    pub fn new(mut config: ExecConfig) -> Self {
        let output_budget = config.output_budget;
        let literals = config
            .env
            .redactions()
            .into_iter()
            .map(|(name, value)| (value, format!("[REDACTED:{name}]")));
        let patterns = if config.redact_formats {
            token_patterns()
        } else {
            Vec::new()
        };
        let redactions = Arc::new(Redactions::new(literals, patterns));
        for value in config.env.removed.values_mut() {
            *value = String::new();
        }
        let exec_checks = config
            .check_execs
            .then(|| Arc::new(crate::exec_judge::ExecChecks::new(config.analyzer.clone())));
        Self {
            analyzer: Analyzer::new(config.analyzer.clone()),
            exec_checks,
            exec_refusals: Mutex::default(),
            exec_approved: Mutex::default(),
            manager: ShellManager::new()
                .with_memory(shell_runtime::MemoryPool::new(config.memory_budget))
                .with_id_digits(if config.long_handles {
                    shell_runtime::LONG_ID_DIGITS
                } else {
                    shell_runtime::SHORT_ID_DIGITS
                }),
            redactions,
            shell_program: find_program("bash", config.env.vars.get("PATH").map(String::as_str)),
            config,
            files: Mutex::new(VecDeque::new()),
            sweep_at: AtomicUsize::new(0),
            budget: SpillBudget::new(output_budget),

            counter: AtomicU64::new(0),
            remembered: Arc::default(),
            owners: crate::shells::ShellOwners::default(),
        }
    }

    /// Keeps a shell's refusals at run time for the answers of later calls
    /// (`BashOutput`, `WriteStdin`); entries of processes gone are dropped.
    pub(crate) fn keep_refusals(
        &self,
        shell: &shell_runtime::ShellProcess,
        checks: &crate::exec_judge::Checks,
    ) {
        if checks.judge.is_none() {
            return;
        }
        let mut kept = self
            .exec_refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= 64 {
            kept.retain(|pid, _| std::path::Path::new(&format!("/proc/{pid}")).exists());
        }
        kept.insert(shell.pid(), Arc::clone(&checks.refusals));
        drop(kept);
        let mut approved = self
            .exec_approved
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if approved.len() >= 64 {
            approved.retain(|pid, _| std::path::Path::new(&format!("/proc/{pid}")).exists());
        }
        approved.insert(shell.pid(), Arc::clone(&checks.approved));
    }

    /// Adds the effects of a line approved for the shell `pid` to those
    /// its execs are held to.
    pub(crate) fn approve_for_shell(&self, pid: u32, effects: crate::approval::Effects) {
        let approved = self
            .exec_approved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pid)
            .cloned();
        if let Some(approved) = approved {
            approved.add(effects);
        }
    }

    /// The lines of a shell's refusals at run time no answer reported yet,
    /// and their count.
    pub(crate) fn new_refusal_lines(&self, pid: u32) -> (Vec<String>, u64) {
        let refusals = self
            .exec_refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pid)
            .cloned();
        refusals.map_or_else(
            || (Vec::new(), 0),
            |refusals| {
                crate::exec_judge::Checks {
                    judge: None,
                    refusals,
                    hold: None,
                    asking: crate::exec_judge::AskSlot::default(),
                    approved: Arc::default(),
                }
                .new_lines()
            },
        )
    }

    /// Whether an approval for `key` was remembered.
    pub(crate) fn is_remembered(&self, key: &str) -> bool {
        self.remembered.contains(key)
    }

    /// Remembers an approval for `key`.
    pub(crate) fn remember(&self, key: String) {
        self.remembered.insert(key);
    }

    /// The approvals remembered, shared with the judges of execs.
    pub(crate) fn remembered(&self) -> Arc<crate::approval::Remembered> {
        Arc::clone(&self.remembered)
    }

    /// The configuration.
    pub fn config(&self) -> &ExecConfig {
        &self.config
    }

    /// The shells started in the background.
    pub fn manager(&self) -> &ShellManager {
        &self.manager
    }

    /// Ends every shell tree started through these tools.
    pub async fn shutdown(&self) {
        self.manager.shutdown(shell_runtime::KILL_GRACE).await;
    }

    /// Replaces every scrubbed secret value and token in `text`.
    pub fn redact(&self, text: &str) -> String {
        self.redactions.replace_all(text)
    }

    /// A fresh path stem under the output directory.
    pub(crate) fn next_path(&self, kind: &str) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.config.output_dir.join(format!("{kind}-{n}"))
    }

    /// Records output files kept for the model: a truncated answer's file
    /// (`owner` `None`) or a background shell's spills (`owner` its id).
    /// Then, while the output budget has less than an eighth of it free (room
    /// for the next command's files), removes the oldest files of foreground
    /// calls, of shells no longer tracked and of finished shells whose
    /// output was read to its end, giving their bytes back. Files of other
    /// shells are never removed: they stop growing at the budget instead
    /// (see [`SpillBudget`]).
    pub(crate) fn keep_files(&self, owner: Option<&str>, paths: &[&Path]) {
        /// Entries kept at most, files or not: a long-running server's ledger
        /// stays small.
        const MAX_ENTRIES: usize = 4096;
        /// Entries below which the ledger is not swept.
        const SWEEP_FLOOR: usize = 512;
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.extend(paths.iter().map(|path| KeptFile {
            path: path.to_path_buf(),
            owner: owner.map(str::to_owned),
        }));
        let headroom = self.budget.limit() / 8;
        let removable = |kept: &KeptFile| {
            kept.owner.as_deref().is_none_or(|id| {
                self.manager
                    .get(id)
                    .is_none_or(|shell| shell.is_read_to_end())
            })
        };
        if files.len() >= self.sweep_at.load(Ordering::Relaxed) {
            // A background shell's spill paths are recorded when it starts,
            // but its files are made only once its output outgrows memory:
            // most never are. Entries of shells no longer tracked that have
            // no file hold nothing to remove or give back; without this
            // sweep the ledger grew to MAX_ENTRIES of them (about 1 MiB of
            // a soak's RSS). Amortised: the next sweep waits until the
            // ledger has doubled.
            files.retain(|kept| !removable(kept) || kept.path.exists());
            self.sweep_at
                .store((files.len() * 2).max(SWEEP_FLOOR), Ordering::Relaxed);
        }
        while self.budget.used() + headroom > self.budget.limit() || files.len() > MAX_ENTRIES {
            let newest = files.len().saturating_sub(paths.len());
            let Some(index) = files.iter().take(newest).position(removable) else {
                break;
            };
            if let Some(old) = files.remove(index) {
                let size = std::fs::metadata(&old.path).map_or(0, |meta| meta.len());
                if std::fs::remove_file(&old.path).is_ok() {
                    self.budget.give_back(size);
                }
            }
        }
    }

    /// The budget every output file of this server takes its bytes from.
    pub(crate) fn budget(&self) -> &SpillBudget {
        &self.budget
    }

    /// The base environment of every command, before the carried changes.
    pub(crate) fn base_env(&self) -> &BTreeMap<String, String> {
        &self.config.env.vars
    }
}

/// An output file in the ledger, and the shell it belongs to, if any.
#[derive(Debug)]
struct KeptFile {
    path: PathBuf,
    owner: Option<String>,
}

/// The well-known token formats for shell-runtime. They are compiled once
/// per process, on a warm-up thread started here, so neither start-up nor
/// a stream's reader waits for them (compiling all of them takes tens of
/// milliseconds, and a reader still compiling when its command has long
/// ended would be cut off).
fn token_patterns() -> Vec<TokenPattern> {
    static WARM_UP: std::sync::Once = std::sync::Once::new();
    WARM_UP.call_once(|| {
        // Without the thread, each format compiles on first use instead.
        let _ = std::thread::Builder::new()
            .name("token-formats".to_owned())
            .spawn(secret_formats::compile_all);
    });
    (0..secret_formats::FORMATS.len())
        .filter_map(TokenPattern::well_known)
        .collect()
}

/// `name`'s path in the first `PATH` directory that has it as an
/// executable file, or `name` itself for the spawn to look up.
fn find_program(name: &str, path: Option<&str>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn environment(policy: &Policy, vars: &[(&str, &str)]) -> ExecEnvironment {
        let dir = std::env::temp_dir();
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        ExecEnvironment::new(ExecConfig::from_policy(
            policy,
            vec![dir.clone()],
            dir,
            vars,
        ))
    }

    /// What exec-policy finds in `text`, replaced: the stream must agree.
    fn expected(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(found) = secret_formats::find_token(rest) {
            out.push_str(&rest[..found.start]);
            out.push_str(&format!("[REDACTED:{}]", found.format.id));
            rest = &rest[found.end..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn every_token_format_is_redacted_and_look_alikes_are_not() {
        let env = environment(&Policy::default(), &[]);
        assert_eq!(token_patterns().len(), secret_formats::FORMATS.len());
        for format in secret_formats::FORMATS {
            let text = format!("cat .env\nKEY={}\n", format.example);
            let redacted = env.redact(&text);
            assert!(
                redacted.contains(&format!("[REDACTED:{}]", format.id)),
                "{redacted}"
            );
            assert_eq!(redacted, expected(&text));
            for look_alike in format.not_examples {
                assert_eq!(env.redact(look_alike), *look_alike, "{}", format.id);
            }
        }
        for text in secret_formats::NOT_SECRETS {
            assert_eq!(env.redact(text), *text);
        }
    }

    #[test]
    fn the_policy_can_turn_format_redaction_off_but_not_value_scrubbing() {
        let token = secret_formats::FORMATS
            .iter()
            .find(|format| format.id == "github-token")
            .expect("a GitHub format")
            .example;
        let mut policy = Policy::default();
        policy.redact.formats = false;
        let env = environment(
            &policy,
            &[("DEPLOY_HOOK", "https://ci:pa55word-x@ci.example.com/")],
        );
        assert_eq!(env.redact(token), token, "formats are off");
        assert_eq!(
            env.redact("https://ci:pa55word-x@ci.example.com/"),
            "[REDACTED:DEPLOY_HOOK]",
            "a variable scrubbed by its value is still redacted"
        );
        assert_eq!(env.redact("pa55word-x"), "[REDACTED:DEPLOY_HOOK]");
        assert!(!env.config().env.vars.contains_key("DEPLOY_HOOK"));
        assert_eq!(
            env.config()
                .env
                .removed
                .get("DEPLOY_HOOK")
                .map(String::as_str),
            Some(""),
            "the value lives in the redaction table only"
        );
    }

    proptest! {
        /// Any text with an embedded token, split anywhere into chunks,
        /// comes out of a stream with the token redacted and everything
        /// else unchanged.
        #[test]
        fn a_token_is_redacted_from_a_stream_however_it_is_cut(
            head in "[a-z .,:\n\r]{0,40}",
            tail in "[a-z .,:\n\r]{0,40}",
            which in 0..secret_formats::FORMATS.len(),
            cuts in proptest::collection::vec(0usize..300, 0..8),
        ) {
            let env = environment(&Policy::default(), &[]);
            let token = secret_formats::FORMATS[which].example;
            let text = format!("{head} {token} {tail}");
            let out = shell_runtime::replace_in_pieces(&env.redactions, &text, &cuts);
            let redacted = expected(token);
            prop_assert!(redacted != token);
            prop_assert_eq!(out, format!("{head} {redacted} {tail}"));
        }
    }

    /// Background shells record their spill paths when they start; most
    /// never make the files. Once those shells are no longer tracked their
    /// entries go, so the ledger does not grow to its 4096-entry cap.
    #[test]
    fn the_ledger_drops_untracked_shells_entries_without_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        let env = ExecEnvironment::new(config);
        let kept = dir.path().join("kept");
        std::fs::write(&kept, "x").expect("write");
        env.keep_files(Some("shell_gone"), &[&kept]);
        for n in 0..3_000 {
            let stem = dir.path().join(format!("background-{n}"));
            env.keep_files(
                Some("shell_gone"),
                &[
                    &stem.with_extension("stdout"),
                    &stem.with_extension("stderr"),
                ],
            );
        }
        let files = env.files.lock().expect("ledger");
        assert!(files.len() <= 1_024, "{} entries", files.len());
        assert!(
            files.iter().any(|entry| entry.path == kept),
            "a file that exists stays"
        );
    }

    #[test]
    fn output_files_of_untracked_shells_go_oldest_first_to_make_room() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        config.output_budget = 8_000;
        let env = ExecEnvironment::new(config);
        let paths: Vec<PathBuf> = (0..3)
            .map(|n| dir.path().join(format!("out-{n}")))
            .collect();
        for (index, path) in paths.iter().enumerate() {
            std::fs::write(path, vec![b'x'; 3_000]).expect("write");
            assert_eq!(
                env.budget().take(3_000),
                if index < 2 { 3_000 } else { 2_000 }
            );
            // `shell_x` is no shell the manager tracks: its files may go.
            env.keep_files(if index == 0 { Some("shell_x") } else { None }, &[path]);
        }
        assert!(!paths[0].exists(), "the oldest was removed");
        assert!(paths[1].exists() && paths[2].exists());
        assert_eq!(env.budget().used(), 5_000);
    }
}
