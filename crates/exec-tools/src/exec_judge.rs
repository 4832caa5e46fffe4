//! Policy at every exec (docs/decisions/0018): the judge exec-tools gives
//! shell-runtime's `SpawnSpec::exec_judge`. Each exec of a command's tree
//! is judged by the same analysis as the command's text, on the argument
//! vector the process is about to run, its working directory and its
//! `HOME`; a refusal fails the exec with `EPERM`, and is kept for the
//! answer (`[refused at run time: ...]`, `runtime_refusals`) and written
//! to the audit log.
//!
//! A program is judged by what it is as well as by how it was spelled:
//! the names tried are the spelling's last component, the resolved file's
//! (a symlink named `x` to `rm` is `rm`), and, for a hard link or a copy
//! of a known program found on the server's `PATH`, that program's (same
//! device and inode, or the same size and content hash, cached by
//! identity). The strictest verdict among them wins.
//!
//! An exec the rules ask about (a policy-file `ask` rule, or a built-in
//! one that stands on literal arguments) runs when the person approved
//! that very effect before the command ran (the same executable, argument
//! vector, directory, environment and script digests, taken again at the
//! exec: [`Effects`]), when an approval of it is remembered,
//! or when the person, asked now, approves it: the question is put with
//! the call's approver while the call is still running, and the command's
//! timeout stands still meanwhile. Nobody to ask: the ask fallback.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use exec_policy::{
    AnalysisContext, Analyzer, AnalyzerConfig, ApprovalKey, Decision, Denial, LITERAL_ASK_RULES,
    RuleSource,
};
use shell_runtime::{
    ExecJudge, ExecRequest, ExecVerdict, FileIdentity, ProcessView, Redactions, TimeoutHold,
};
use tool_core::{Approval, Approver, ExecutionContext};

use crate::approval::{
    Effects, Remembered, Waiting, approval_message, text_key, wait_for_approval,
};
use crate::audit::{AuditEntry, AuditLog};
use crate::quote::quote;

/// Programs recognised by identity (hard link, copy) when found on the
/// server's `PATH`: the ones the built-in rules are about, and the shells
/// and interpreters the analysis unwraps. The policy file's programs are
/// added to them.
const KNOWN_PROGRAMS: &[&str] = &[
    "rm", "rmdir", "dd", "shred", "mkfs", "wipefs", "fdisk", "sfdisk", "parted", "chmod", "chown",
    "chgrp", "mv", "cp", "find", "truncate", "git", "kill", "pkill", "killall", "shutdown",
    "reboot", "halt", "poweroff", "sudo", "doas", "env", "xargs", "bash", "sh", "dash", "zsh",
    "ksh", "python3", "python", "perl", "ruby", "node", "rsync", "tar",
];

/// Files larger than this are never hashed (no known program is).
const MAX_HASHED: u64 = 64 << 20;

/// A known program as found on `PATH`.
#[derive(Debug)]
struct Known {
    name: String,
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    hash: OnceLock<Option<u64>>,
}

/// What every command's judge shares for the server's life.
#[derive(Debug)]
pub(crate) struct ExecChecks {
    config: AnalyzerConfig,
    /// One analyzer per `HOME` a process had (the rules protect it).
    analyzers: Mutex<HashMap<String, Arc<Analyzer>>>,
    /// The known programs on the server's `PATH`, found at the first exec.
    known: OnceLock<Vec<Known>>,
    /// Which known program a file of that identity is a copy of.
    copies: Mutex<HashMap<FileIdentity, Option<String>>>,
    /// Decisions already made, by (text, cwd, home): the analysis is a
    /// pure function of them, and a build or a loop runs the same
    /// command line many times.
    decisions: Mutex<HashMap<DecisionKey, Decision>>,
}

/// What a decision depends on: the command text, the cwd and `HOME`.
type DecisionKey = (String, String, Option<String>);

/// The most decisions kept; past it the cache starts over.
const MAX_DECISIONS: usize = 4096;

/// One exec refused while a command ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The simple command as the rule saw it (redacted).
    pub(crate) command: String,
    /// The rule's id.
    pub(crate) rule: String,
    /// Why.
    pub(crate) why: Why,
}

/// Why an exec was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// A `deny` rule.
    Denied,
    /// It needs approval, and nobody could be asked (the call had
    /// answered, or the client cannot ask) while the fallback is `deny`.
    NobodyToAsk,
    /// The person declined.
    Declined,
    /// Nobody answered within `--ask-timeout`.
    TimedOut,
    /// The call was cancelled while the question was open.
    Cancelled,
    /// Approved, but what the exec runs changed while the question was open.
    Changed,
}

impl Refusal {
    /// The answer's line for it.
    pub(crate) fn line(&self) -> String {
        let why = match self.why {
            Why::Denied => "",
            Why::NobodyToAsk => ": it needs approval, and nobody could be asked",
            Why::Declined => ": declined",
            Why::TimedOut => ": not answered within the ask timeout",
            Why::Cancelled => ": the call was cancelled while asking",
            Why::Changed => ": what it runs changed while the question was open",
        };
        format!(
            "[refused at run time: {} (rule {}{why})]",
            self.command, self.rule
        )
    }
}

/// The refusals of one command, filled by its supervisor thread, and how
/// many of them an answer has reported already.
#[derive(Debug, Default)]
pub(crate) struct Refusals(Mutex<(Vec<Refusal>, usize)>);

impl Refusals {
    /// The refusals no answer has reported yet, now reported.
    pub(crate) fn take_new(&self) -> Vec<Refusal> {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (list, reported) = &mut *guard;
        let new = list.get(*reported..).unwrap_or_default().to_vec();
        *reported = list.len();
        new
    }

    fn push(&self, refusal: Refusal) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .push(refusal);
    }
}

/// A command's judge and where its refusals go.
pub(crate) struct Checks {
    /// `None` when execs are not checked.
    pub(crate) judge: Option<ExecJudge>,
    pub(crate) refusals: Arc<Refusals>,
    /// The command's timeout, stopped while a question at an exec is open.
    pub(crate) hold: Option<Arc<TimeoutHold>>,
    /// Who the judge can ask, emptied when the call answers.
    pub(crate) asking: AskSlot,
    /// The effects approved for the command's execs.
    pub(crate) approved: Arc<Approved>,
}

impl Checks {
    /// The lines for the refusals not yet reported, and their count.
    pub(crate) fn new_lines(&self) -> (Vec<String>, u64) {
        let new = self.refusals.take_new();
        let count = u64::try_from(new.len()).unwrap_or(u64::MAX);
        (new.iter().map(Refusal::line).collect(), count)
    }
}

/// What one command's judge knows of the call it belongs to.
pub(crate) struct CallContext {
    /// Where its refusals go.
    pub(crate) refusals: Arc<Refusals>,
    /// The audit log, if any, and the call's number there.
    pub(crate) audit: Option<(Arc<AuditLog>, u64)>,
    /// The tool whose command this is.
    pub(crate) tool: &'static str,
    /// What the person approved of the command before it ran, and of
    /// the lines typed to it since (a tty shell): an exec with one of
    /// these effects is not asked about again.
    pub(crate) approved: Arc<Approved>,
    /// Approvals remembered (`remember: true`), the server's own.
    pub(crate) remembered: Arc<Remembered>,
    /// Who can be asked, while the call is running.
    pub(crate) asking: AskSlot,
    /// Whether, with nobody to ask, the fallback allows (`--ask-fallback allow`).
    pub(crate) fallback_allows: bool,
    /// The command's timeout, stopped while a question is open.
    pub(crate) hold: Arc<TimeoutHold>,
    /// Secret values never written to the answer or the log.
    pub(crate) redactions: Arc<Redactions>,
}

/// The effects approved for one command's execs: its own approval, and
/// those of lines typed to it.
#[derive(Debug, Default)]
pub(crate) struct Approved(Mutex<Vec<Effects>>);

impl Approved {
    /// The list, starting with `first`.
    pub(crate) fn new(first: Option<Effects>) -> Arc<Self> {
        Arc::new(Self(Mutex::new(first.into_iter().collect())))
    }

    /// Adds the effects of an approval given since.
    pub(crate) fn add(&self, effects: Effects) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded: a long session's approvals past this ask again.
        if list.len() < 256 {
            list.push(effects);
        }
    }

    fn list(&self) -> Vec<Effects> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Who can be asked about an exec while the call runs.
#[derive(Clone)]
pub(crate) struct Asking {
    /// The call's approver.
    pub(crate) approver: Arc<dyn Approver>,
    /// The call's context (its cancellation, progress, session turn).
    pub(crate) context: ExecutionContext,
    /// `--ask-timeout`.
    pub(crate) ask_timeout: Duration,
    /// The runtime the question is put on (the judge runs on a thread of
    /// its own and waits for it).
    pub(crate) runtime: tokio::runtime::Handle,
}

/// The call's [`Asking`], emptied once the call has answered: after that
/// nobody can be asked.
#[derive(Clone, Default)]
pub(crate) struct AskSlot(Arc<Mutex<Option<Asking>>>);

impl AskSlot {
    /// A slot holding `asking`.
    pub(crate) fn new(asking: Option<Asking>) -> Self {
        Self(Arc::new(Mutex::new(asking)))
    }

    /// Empties the slot: the call has answered.
    pub(crate) fn close(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    fn get(&self) -> Option<Asking> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ExecChecks {
    /// Checks with the server's analysis configuration.
    pub(crate) fn new(config: AnalyzerConfig) -> Self {
        Self {
            config,
            analyzers: Mutex::default(),
            known: OnceLock::new(),
            copies: Mutex::default(),
            decisions: Mutex::default(),
        }
    }

    /// The judge for one command.
    pub(crate) fn judge(self: &Arc<Self>, call: CallContext) -> ExecJudge {
        let checks = Arc::clone(self);
        ExecJudge(Arc::new(move |request: &ExecRequest| {
            checks.decide(&call, request)
        }))
    }

    fn analyzer_for(&self, home: Option<&str>) -> Arc<Analyzer> {
        let home = home
            .filter(|home| !home.is_empty())
            .map(str::to_owned)
            .or_else(|| self.config.home.clone())
            .unwrap_or_default();
        let mut analyzers = self
            .analyzers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(analyzers.entry(home.clone()).or_insert_with(|| {
            let mut config = self.config.clone();
            config.home = (!home.is_empty()).then_some(home);
            Arc::new(Analyzer::new(config))
        }))
    }

    fn decide(&self, call: &CallContext, request: &ExecRequest) -> ExecVerdict {
        let cwd = request.cwd.to_string_lossy().into_owned();
        let home = request.home.as_deref().and_then(OsStr::to_str);
        let analyzer = self.analyzer_for(home);
        let context = AnalysisContext {
            cwd: Some(cwd.clone()),
            vars: home
                .map(|home| [("HOME".to_owned(), home.to_owned())].into())
                .unwrap_or_default(),
        };
        let args: Vec<String> = request
            .argv
            .iter()
            .skip(1)
            .map(|arg| quote(&arg.to_string_lossy()))
            .collect();
        let names = self.names(request);
        // The arguments again with their paths resolved as the process sees
        // them (`$tmp/link/etc` is `/etc`, `/dev/fd/3/x` a file of the
        // directory on fd 3), when that changes any.
        let resolved = resolved_operands(request, &names);
        let mut worst: Option<Decision> = None;
        let mut candidates = Vec::with_capacity(names.len() * 2);
        for name in names {
            // A name with `=` would read as an assignment.
            let program = if name.contains('=') {
                format!("'{}'", name.replace('\'', r"'\''"))
            } else {
                quote(&name)
            };
            for operands in std::iter::once(&args).chain(resolved.as_ref()) {
                let text = std::iter::once(program.clone())
                    .chain(operands.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ");
                candidates.push(text);
            }
        }
        // The user's own home stays protected when a process points `HOME`
        // elsewhere (`HOME=/tmp/x git x` running `rm -rf /home/user`).
        let server_home = self.config.home.as_deref();
        let homes: Vec<(Arc<Analyzer>, Option<&str>)> = if server_home.is_some()
            && home.is_some_and(|home| !home.is_empty())
            && home != server_home
        {
            vec![(analyzer, home), (self.analyzer_for(None), server_home)]
        } else {
            vec![(analyzer, home)]
        };
        let judged = homes.iter().flat_map(|(analyzer, home)| {
            candidates
                .iter()
                .map(move |text| (analyzer, text.clone(), *home))
        });
        for (analyzer, text, home) in judged {
            let decision = self.decision(analyzer, text, &context, home);
            let rank = |decision: &Decision| match decision {
                Decision::Allow { .. } => 0,
                Decision::Ask(_) => 1,
                Decision::Deny(_) => 2,
            };
            if worst
                .as_ref()
                .is_none_or(|worst| rank(&decision) > rank(worst))
            {
                worst = Some(decision);
            }
        }
        let denial = match worst {
            Some(Decision::Deny(denial)) => denial,
            // A built-in ask is about text whose target is known only at
            // run time: here it is run, and each exec it leads to is
            // judged again with its literal arguments. Those that stand on
            // literal arguments (deleting a repository) are asked here.
            Some(Decision::Ask(denial))
                if denial.source == RuleSource::PolicyFile
                    || LITERAL_ASK_RULES.contains(&denial.rule_id.as_str()) =>
            {
                return match settle_ask(call, request, &denial) {
                    Ok(by) => {
                        if let Some(by) = by {
                            Self::log_approved(call, &denial, by, &cwd);
                        }
                        ExecVerdict::Allow
                    }
                    Err(why) => {
                        Self::refuse(call, &denial, why, &cwd);
                        ExecVerdict::Deny
                    }
                };
            }
            _ => return ExecVerdict::Allow,
        };
        Self::refuse(call, &denial, Why::Denied, &cwd);
        ExecVerdict::Deny
    }

    /// The audit line of an exec the person approved at run time.
    fn log_approved(call: &CallContext, denial: &Denial, by: &'static str, cwd: &str) {
        if let Some((log, number)) = &call.audit {
            // The exec goes on either way; the answer does not mention it.
            let _ = log.write(&AuditEntry {
                event: "exec",
                call: *number,
                tool: call.tool,
                command: Some(call.redactions.replace_all(&denial.command)),
                cwd: Some(call.redactions.replace_all(cwd)),
                decision: Some("ask"),
                rule: Some(denial.rule_id.clone()),
                approved_by: Some(by),
                status: Some("approved_at_run_time".to_owned()),
                ..AuditEntry::default()
            });
        }
    }

    /// The analysis's decision on `text`, from the cache when it was made.
    fn decision(
        &self,
        analyzer: &Analyzer,
        text: String,
        context: &AnalysisContext,
        home: Option<&str>,
    ) -> Decision {
        let key = (
            text,
            context.cwd.clone().unwrap_or_default(),
            home.map(str::to_owned),
        );
        if let Some(decision) = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return decision.clone();
        }
        let decision = analyzer.analyze_in(&key.0, context).decision;
        let mut decisions = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if decisions.len() >= MAX_DECISIONS {
            decisions.clear();
        }
        decisions.insert(key, decision.clone());
        decision
    }

    fn refuse(call: &CallContext, denial: &Denial, why: Why, cwd: &str) {
        let refusal = Refusal {
            command: call.redactions.replace_all(&denial.command),
            rule: denial.rule_id.clone(),
            why,
        };
        if let Some((log, number)) = &call.audit {
            // A line that cannot be written changes nothing here: the exec
            // is refused either way, and the answer says so.
            let _ = log.write(&AuditEntry {
                event: "exec",
                call: *number,
                tool: call.tool,
                command: Some(refusal.command.clone()),
                cwd: Some(call.redactions.replace_all(cwd)),
                decision: Some(if why == Why::Denied { "deny" } else { "ask" }),
                rule: Some(refusal.rule.clone()),
                status: Some("refused_at_run_time".to_owned()),
                ..AuditEntry::default()
            });
        }
        call.refusals.push(refusal);
    }

    /// The names the program goes by: as spelled, as resolved, as known.
    fn names(&self, request: &ExecRequest) -> Vec<String> {
        let mut names: Vec<String> = Vec::with_capacity(3);
        let mut add = |name: Option<&OsStr>| {
            if let Some(name) = name.map(|name| name.to_string_lossy().into_owned())
                && !name.is_empty()
                && !names.contains(&name)
            {
                names.push(name);
            }
        };
        add(Path::new(&request.path).file_name());
        add(request.real_path.as_deref().and_then(Path::file_name));
        // A multi-call binary (systemctl behind `shutdown`, busybox) acts by
        // the name in `argv[0]`, which `exec -a` sets apart from the path.
        add(request
            .argv
            .first()
            .and_then(|arg0| Path::new(arg0).file_name()));
        if let Some(known) = self.identify(request) {
            add(Some(OsStr::new(&known)));
        }
        if names.is_empty() {
            names.push(request.path.to_string_lossy().into_owned());
        }
        names
    }

    /// The known program the file is a hard link or a copy of.
    fn identify(&self, request: &ExecRequest) -> Option<String> {
        let file = request.file?;
        let known = self.known.get_or_init(|| find_known(&self.config));
        if let Some(program) = known
            .iter()
            .find(|known| known.dev == file.dev && known.ino == file.ino)
        {
            return Some(program.name.clone());
        }
        let same_size: Vec<&Known> = known.iter().filter(|k| k.size == file.size).collect();
        if same_size.is_empty() || file.size > MAX_HASHED {
            return None;
        }
        let mut copies = self.copies.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = copies.get(&file) {
            return found.clone();
        }
        let path = request.real_path.as_deref()?;
        let hash = content_hash(path);
        let found = hash.and_then(|hash| {
            same_size
                .iter()
                .find(|known| *known.hash.get_or_init(|| content_hash(&known.path)) == Some(hash))
                .map(|known| known.name.clone())
        });
        copies.insert(file, found.clone());
        found
    }
}

/// An exec the rules ask about: approved before (that effect), remembered,
/// or asked now; `Ok` with who approved (`None`: the approval of the
/// command's text covered it, or the fallback allowed it).
fn settle_ask(
    call: &CallContext,
    request: &ExecRequest,
    denial: &Denial,
) -> Result<Option<&'static str>, Why> {
    let env = env_map(&request.env);
    let approved = call.approved.list();
    let covered = approved.iter().any(|effects| {
        let assigned: Vec<&str> = effects.assigned.iter().map(String::as_str).collect();
        let key = effect_key(request, &env, &assigned);
        effects
            .keys
            .iter()
            .any(|approved| same_effect(approved, &key))
    });
    if covered {
        return Ok(None);
    }
    let text = exec_text(request);
    let remembered = remembered_key(request, &env, &text);
    if call.remembered.contains(&remembered) {
        return Ok(Some("remembered"));
    }
    let asked = call
        .asking
        .get()
        .filter(|asking| !asking.context.dry_run())
        .map(|asking| {
            let shown = call.redactions.replace_all(&text);
            let message =
                call.redactions
                    .replace_all(&approval_message(&shown, &request.cwd, denial, &env));
            // The question's time counts toward no limit of the command.
            let _held = call.hold.hold();
            asking.runtime.block_on(wait_for_approval(
                asking.ask_timeout,
                &asking.context,
                asking.approver.as_ref(),
                message,
            ))
        });
    match asked.unwrap_or(Waiting::Answer(Approval::Unavailable)) {
        // Taken again as the exec goes on: an approval holds only for what
        // the person was shown (a link re-pointed or a script edited
        // meanwhile is another effect).
        Waiting::Answer(Approval::Accept { .. } | Approval::Save)
            if remembered_key(request, &env, &text) != remembered =>
        {
            Err(Why::Changed)
        }
        Waiting::Answer(Approval::Accept { remember }) => {
            if remember {
                call.remembered.insert(remembered);
            }
            Ok(Some("user"))
        }
        // A rule is saved only from a command's own question.
        Waiting::Answer(Approval::Save) => {
            call.remembered.insert(remembered);
            Ok(Some("user"))
        }
        Waiting::Answer(Approval::Unavailable) if call.fallback_allows => Ok(None),
        Waiting::Answer(Approval::Unavailable) => Err(Why::NobodyToAsk),
        Waiting::Answer(Approval::Decline | Approval::Cancel) => Err(Why::Declined),
        Waiting::TimedOut => Err(Why::TimedOut),
        Waiting::CallCancelled => Err(Why::Cancelled),
    }
}

/// Whether the exec `key` is the effect `approved` (found before the
/// command ran): everything equal, but an argument the analysis knew only
/// as written (an expansion, a glob) stands for whatever it became, since
/// the question said it was known only at run time.
fn same_effect(approved: &ApprovalKey, key: &ApprovalKey) -> bool {
    let run_time = |word: &str| word.contains(['$', '`', '*', '?', '[', '~']);
    approved.exe == key.exe
        && approved.exe_digest == key.exe_digest
        && approved.script_digest == key.script_digest
        && approved.cwd == key.cwd
        && approved.env == key.env
        && approved.argv.len() == key.argv.len()
        && approved
            .argv
            .iter()
            .zip(&key.argv)
            .all(|(approved, arg)| approved == arg || run_time(approved))
}

/// The exec as one line of shell text, its program word as given.
fn exec_text(request: &ExecRequest) -> String {
    request
        .argv
        .iter()
        .map(|arg| quote(&arg.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The environment's UTF-8 entries by name (the first of a name wins, as
/// `getenv` finds it).
fn env_map(env: &[std::ffi::OsString]) -> HashMap<String, String> {
    let mut map = HashMap::with_capacity(env.len());
    for entry in env {
        if let Some((name, value)) = entry.to_str().and_then(|entry| entry.split_once('=')) {
            map.entry(name.to_owned())
                .or_insert_with(|| value.to_owned());
        }
    }
    map
}

/// The effect of the exec as it is now: the file its path leads to in
/// the process's view (resolved again, so a link re-pointed since the
/// notification counts), its content, argv, cwd and environment.
fn effect_key(request: &ExecRequest, env: &HashMap<String, String>, extra: &[&str]) -> ApprovalKey {
    let view = ProcessView::of(request.pid);
    let exe = view
        .resolve(&request.cwd, &request.path, true)
        .or_else(|| request.real_path.clone());
    let host = exe.as_deref().map(|exe| view.host_path(exe));
    let argv: Vec<String> = request
        .argv
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    crate::binding::exec_key_of_file(
        exe.as_deref().zip(host.as_deref()),
        &argv,
        &request.cwd,
        env,
        extra,
    )
}

/// The key a remembered approval of this exec is kept by: the same shape
/// as a command's ([`crate::approval::Binding::key`]), so an approval
/// remembered for the same words run the same way holds for both.
fn remembered_key(request: &ExecRequest, env: &HashMap<String, String>, text: &str) -> String {
    text_key(text, &request.cwd, env, &[effect_key(request, env, &[])])
}

/// Programs whose operands are paths the rules protect: for them an
/// expanded glob that names every entry of a directory is judged as the
/// glob (`cd ~/.ssh && rm -rf ./*` runs `rm -rf ./id_ed25519 ./known_hosts`).
const PATH_PROGRAMS: &[&str] = &[
    "rm", "rmdir", "unlink", "shred", "truncate", "chmod", "chown", "chgrp", "mv", "find",
];

/// `request`'s arguments, quoted, with each path operand resolved in the
/// process's view, and for a program of [`PATH_PROGRAMS`] `DIR/*` added
/// when its operands name every visible entry (two or more) of `DIR`;
/// `None` when nothing changes.
fn resolved_operands(request: &ExecRequest, names: &[String]) -> Option<Vec<String>> {
    use std::os::unix::ffi::OsStrExt;
    let path_program = names
        .iter()
        .any(|name| PATH_PROGRAMS.contains(&name.as_str()));
    // A recursive delete of a directory that holds a repository deletes
    // its history too (docs/decisions/0022).
    let recursive_rm = names.iter().any(|name| name == "rm")
        && request.argv.iter().skip(1).any(|arg| {
            let arg = arg.as_bytes();
            arg.starts_with(b"--rec")
                || (arg.starts_with(b"-")
                    && !arg.starts_with(b"--")
                    && arg.iter().any(|b| matches!(b, b'r' | b'R')))
        });
    let view = ProcessView::of(request.pid);
    let mut changed = false;
    let mut operands = Vec::with_capacity(request.argv.len());
    let mut by_parent: HashMap<PathBuf, Vec<std::ffi::OsString>> = HashMap::new();
    for arg in request.argv.iter().skip(1) {
        let bytes = arg.as_bytes();
        let is_operand = !bytes.is_empty() && !bytes.starts_with(b"-");
        let real = (is_operand && (bytes.contains(&b'/') || path_program))
            .then(|| view.resolve(&request.cwd, arg, false))
            .flatten()
            // A descriptor itself (`tee /dev/fd/63` of `>(...)`) is what it
            // opens: a pipe is no path, and the argument stays as given.
            .and_then(|real| {
                if real.starts_with("/proc/self/fd") || real.starts_with("/proc/thread-self/fd") {
                    view.resolve(&request.cwd, arg, true)
                } else {
                    Some(real)
                }
            });
        let Some(real) = real else {
            operands.push(quote(&arg.to_string_lossy()));
            continue;
        };
        if bytes.contains(&b'/') && Path::new(arg) != real {
            changed = true;
            operands.push(quote(&real.to_string_lossy()));
        } else {
            operands.push(quote(&arg.to_string_lossy()));
        }
        let repository = real.join(".git");
        // A scratch clone under /tmp goes unasked: its history has a remote.
        let scratch = real.starts_with("/tmp") || real.starts_with("/var/tmp");
        if recursive_rm
            && !scratch
            && std::fs::symlink_metadata(view.host_path(&repository))
                .is_ok_and(|meta| meta.is_dir())
        {
            changed = true;
            operands.push(quote(&repository.to_string_lossy()));
        }
        if path_program && let (Some(parent), Some(name)) = (real.parent(), real.file_name()) {
            by_parent
                .entry(parent.to_path_buf())
                .or_default()
                .push(name.to_owned());
        }
    }
    for (parent, named) in by_parent {
        if named.len() < 2 {
            continue;
        }
        let Some(entries) = view.entries(&parent) else {
            continue;
        };
        let visible: Vec<_> = entries
            .iter()
            .filter(|entry| !entry.as_bytes().starts_with(b"."))
            .collect();
        if visible.len() >= 2 && visible.iter().all(|entry| named.contains(entry)) {
            changed = true;
            let parent = parent.to_string_lossy();
            operands.push(format!("{}/*", quote(parent.trim_end_matches('/'))));
        }
    }
    changed.then_some(operands)
}

/// The known programs (and the policy file's) on the server's `PATH`.
fn find_known(config: &AnalyzerConfig) -> Vec<Known> {
    use std::os::unix::fs::MetadataExt;
    let mut names: Vec<String> = KNOWN_PROGRAMS.iter().map(|&name| name.to_owned()).collect();
    for rule in &config.rules {
        if let exec_policy::RuleMatcher::Program { program, .. } = &rule.matcher
            && !names.contains(program)
        {
            names.push(program.clone());
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .collect();
    let mut found = Vec::new();
    for name in names {
        let Some((path, meta)) = dirs.iter().find_map(|dir| {
            let path = dir.join(&name);
            let meta = std::fs::metadata(&path)
                .ok()
                .filter(std::fs::Metadata::is_file)?;
            Some((path, meta))
        }) else {
            continue;
        };
        // A name that is a link to a file of another name (`shutdown` ->
        // systemctl, `sh` -> dash) is that file's other personality, chosen
        // by `argv[0]`: the file itself, run by any other name, is not it
        // (judging every systemctl as shutdown refused `systemctl status`).
        if !same_name(&path, &name) {
            continue;
        }
        found.push(Known {
            name,
            path,
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            hash: OnceLock::new(),
        });
    }
    found
}

/// Whether `path`, with every symlink resolved, still ends in `name`.
fn same_name(path: &Path, name: &str) -> bool {
    std::fs::canonicalize(path)
        .ok()
        .is_some_and(|real| real.file_name() == Some(OsStr::new(name)))
}

/// A hash of the file's content (not cryptographic: it tells an exact copy
/// of a program from other files of the same size; evading it takes a
/// changed byte, which any hash would see, and then the file is no copy).
fn content_hash(path: &Path) -> Option<u64> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = file.read(&mut buffer).ok()?;
        if read == 0 {
            break;
        }
        buffer[..read].hash(&mut hasher);
    }
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approved_effect_matches_only_the_same_program_run_the_same_way() {
        let key = |exe: &str, argv: &[&str], digest: &str| ApprovalKey {
            exe: exe.to_owned(),
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            cwd: "/w".to_owned(),
            env: vec![("PATH".to_owned(), Some("/bin".to_owned()))],
            exe_digest: Some(digest.to_owned()),
            script_digest: None,
        };
        let approved = key("/bin/touch", &["touch", "\"$V\"", "b"], "d1");
        assert!(same_effect(
            &approved,
            &key("/bin/touch", &["touch", "a", "b"], "d1")
        ));
        // A literal argument, the file, its content, the count of words.
        assert!(!same_effect(
            &approved,
            &key("/bin/touch", &["touch", "a", "c"], "d1")
        ));
        assert!(!same_effect(
            &approved,
            &key("/tmp/touch", &["touch", "a", "b"], "d1")
        ));
        assert!(!same_effect(
            &approved,
            &key("/bin/touch", &["touch", "a", "b"], "d2")
        ));
        assert!(!same_effect(
            &approved,
            &key("/bin/touch", &["touch", "a", "b", "c"], "d1")
        ));
        let mut moved = key("/bin/touch", &["touch", "a", "b"], "d1");
        moved.env[0].1 = Some("/tmp:/bin".to_owned());
        assert!(!same_effect(&approved, &moved));
    }

    #[test]
    fn a_refusal_line_names_the_command_and_the_rule() {
        let refusal = Refusal {
            command: "rm -rf /etc".to_owned(),
            rule: "recursive-delete-protected".to_owned(),
            why: Why::Denied,
        };
        assert_eq!(
            refusal.line(),
            "[refused at run time: rm -rf /etc (rule recursive-delete-protected)]"
        );
    }
}
