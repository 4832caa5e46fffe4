//! `--network proxy`: the egress proxy's rules are `[network]`
//! (`exec_policy::NetworkRules`), its questions go through the approvals
//! of the call that started the command, and its decisions go to the audit
//! log and to the command's answer (`[network: refused HOST:PORT
//! (REASON)]`, `network_refusals`).
//!
//! Each command reaches the proxy through a listener of its own, named by
//! a tag, so a refusal is reported in the answer of the command that made
//! it. The rules can be replaced while the server runs
//! ([`EgressGate::replace_rules`]); the change is logged.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use egress_proxy::{Admission, ConnectionEvent, Gatekeeper, Outcome, Refusal, Target};
use exec_policy::{NetworkRules, NetworkVerdict};
use tool_core::{Approval, Approver};

use crate::audit::{AuditEntry, AuditLog, NetworkAudit};

/// Refusals kept per command before the oldest are dropped (a command that
/// retries forever must not grow the server).
const MAX_REFUSALS_PER_COMMAND: usize = 64;

/// Reads a variable of the server's environment.
type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// What the server knows of a command whose connections the proxy serves.
struct Listener {
    /// Who may be asked about its `ask` hosts.
    approver: Option<Arc<dyn Approver>>,
    /// The answer's lines, oldest first.
    refusals: Vec<String>,
    /// Refusals beyond [`MAX_REFUSALS_PER_COMMAND`].
    dropped: u64,
}

/// The proxy's gatekeeper for one server.
pub struct EgressGate {
    rules: RwLock<Arc<NetworkRules>>,
    /// The credentials' values, by host: `(header, value)`, the value's
    /// `${NAME}` expanded from the server's environment at load.
    credentials: RwLock<HashMap<String, Vec<(String, String)>>>,
    lookup: Box<EnvLookup>,
    audit: Option<Arc<AuditLog>>,
    listeners: Mutex<HashMap<u64, Listener>>,
    /// `host:port` the person allowed for the server's life.
    remembered: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for EgressGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        f.debug_struct("EgressGate").finish_non_exhaustive()
    }
}

impl EgressGate {
    /// A gatekeeper for `rules`; `lookup` reads the server's environment
    /// for the credentials' `${NAME}`s (a missing one leaves that
    /// credential out, and start-up says so).
    pub fn new(
        rules: NetworkRules,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
        audit: Option<Arc<AuditLog>>,
    ) -> Self {
        let gate = Self {
            rules: RwLock::new(Arc::new(NetworkRules::default())),
            credentials: RwLock::new(HashMap::new()),
            lookup: Box::new(lookup),
            audit,
            listeners: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashSet::new()),
        };
        gate.install(rules);
        gate
    }

    /// Replaces the rules (a reloaded policy file); the change goes to the
    /// audit log. Returns the credentials left out (their variables are
    /// unset), for the caller to report.
    pub fn replace_rules(&self, rules: NetworkRules) -> Vec<String> {
        let missing = self.install(rules);
        if let Some(log) = &self.audit {
            let _ = log.write(&AuditEntry {
                event: "network_rules",
                tool: "server",
                status: Some("replaced".to_owned()),
                ..AuditEntry::default()
            });
        }
        missing
    }

    /// Installs `rules`; returns the credentials left out.
    fn install(&self, rules: NetworkRules) -> Vec<String> {
        let mut credentials: HashMap<String, Vec<(String, String)>> = HashMap::new();
        let mut missing = Vec::new();
        for credential in &rules.credentials {
            match expand(&credential.value, &self.lookup) {
                Ok(value) => credentials
                    .entry(credential.host.clone())
                    .or_default()
                    .push((credential.header.clone(), value)),
                Err(name) => missing.push(format!(
                    "{} for {} (`{name}` is not set)",
                    credential.header, credential.host
                )),
            }
        }
        *self
            .credentials
            .write()
            .unwrap_or_else(PoisonError::into_inner) = credentials;
        *self.rules.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
        missing
    }

    /// Starts serving a command's listener `tag`; `approver` is asked about
    /// its `ask` hosts.
    pub fn open_listener(&self, tag: u64, approver: Option<Arc<dyn Approver>>) {
        self.lock_listeners().insert(
            tag,
            Listener {
                approver,
                refusals: Vec::new(),
                dropped: 0,
            },
        );
    }

    /// Stops serving `tag`; returns its refusals not yet taken.
    pub fn close_listener(&self, tag: u64) -> Vec<String> {
        self.lock_listeners()
            .remove(&tag)
            .map(|listener| lines(listener.refusals, listener.dropped))
            .unwrap_or_default()
    }

    /// The answer's lines for `tag`'s refusals since the last call.
    pub fn take_refusals(&self, tag: u64) -> Vec<String> {
        let mut listeners = self.lock_listeners();
        let Some(listener) = listeners.get_mut(&tag) else {
            return Vec::new();
        };
        let dropped = std::mem::take(&mut listener.dropped);
        lines(std::mem::take(&mut listener.refusals), dropped)
    }

    fn lock_listeners(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Listener>> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn rules(&self) -> Arc<NetworkRules> {
        Arc::clone(&self.rules.read().unwrap_or_else(PoisonError::into_inner))
    }

    async fn ask(&self, tag: u64, target: &Target, rule: &str) -> Admission {
        let key = target.to_string();
        if self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&key)
        {
            return Admission::Allow;
        }
        let approver = self
            .lock_listeners()
            .get(&tag)
            .and_then(|listener| listener.approver.clone());
        let refuse = |reason: String| {
            Admission::Refuse(Refusal {
                reason,
                remedy: format!(
                    "add \"{}\" to [network] allow in the policy file",
                    target.host
                ),
            })
        };
        let Some(approver) = approver else {
            return refuse(format!(
                "[network] ask \"{rule}\" needs a person to approve, and none can be asked"
            ));
        };
        let question =
            format!("A command wants to connect to {target} ([network] ask \"{rule}\"). Allow it?");
        match approver.ask(question).await {
            Approval::Accept { remember: false } => Admission::Allow,
            Approval::Accept { remember: true } | Approval::Save => {
                self.remembered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key);
                Admission::Allow
            }
            Approval::Decline => {
                refuse(format!("declined by the person ([network] ask \"{rule}\")"))
            }
            Approval::Cancel | Approval::Unavailable => refuse(format!(
                "not approved ([network] ask \"{rule}\"): the question went unanswered"
            )),
        }
    }
}

/// The answer's lines: one per refusal, and one for those dropped.
fn lines(mut refusals: Vec<String>, dropped: u64) -> Vec<String> {
    if dropped > 0 {
        refusals.push(format!("[network: {dropped} more connections refused]"));
    }
    refusals
}

/// `value` with each `${NAME}` replaced by `lookup(NAME)`; the first name
/// that has no value is the error.
fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(rest.get(..start).unwrap_or_default());
        let after = rest.get(start + 2..).unwrap_or_default();
        let Some(end) = after.find('}') else {
            out.push_str(rest.get(start..).unwrap_or_default());
            return Ok(out);
        };
        let name = after.get(..end).unwrap_or_default();
        out.push_str(&lookup(name).ok_or_else(|| name.to_owned())?);
        rest = after.get(end + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

#[async_trait::async_trait]
impl Gatekeeper for EgressGate {
    async fn admit(&self, listener: u64, target: &Target) -> Admission {
        self.admit_for(listener, target).await
    }

    fn resolve_override(&self, host: &str) -> Option<IpAddr> {
        self.rules().resolved(host)
    }

    fn check_address(&self, target: &Target, address: IpAddr) -> Result<(), Refusal> {
        self.rules()
            .check_address(&target.host, address, target.port)
            .map_err(|refusal| Refusal {
                reason: refusal.to_string(),
                remedy: refusal.remedy(&target.host, target.port),
            })
    }

    fn record(&self, event: ConnectionEvent) {
        let (decision, status, sent, received) = match &event.outcome {
            Outcome::Closed { sent, received } => ("allow", "closed".to_owned(), *sent, *received),
            Outcome::Refused(refusal) => ("deny", format!("refused: {}", refusal.reason), 0, 0),
            Outcome::Failed { error } => ("allow", format!("failed: {error}"), 0, 0),
        };
        if let Outcome::Refused(refusal) = &event.outcome {
            let line = format!("[network: refused {} ({})]", event.target, refusal.reason);
            if let Some(listener) = self.lock_listeners().get_mut(&event.listener) {
                if listener.refusals.len() < MAX_REFUSALS_PER_COMMAND {
                    listener.refusals.push(line);
                } else {
                    listener.dropped += 1;
                }
            }
        }
        if let Some(log) = &self.audit {
            let _ = log.write(&AuditEntry {
                event: "network",
                tool: "Bash",
                decision: Some(decision),
                status: Some(status),
                network: Some(NetworkAudit {
                    protocol: event.protocol.name(),
                    host: event.target.host.clone(),
                    port: event.target.port,
                    sent_bytes: sent,
                    received_bytes: received,
                    credential: event.credential,
                }),
                ..AuditEntry::default()
            });
        }
    }

    fn credentials(&self, target: &Target) -> Vec<(String, String)> {
        self.credentials
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&target.host)
            .cloned()
            .unwrap_or_default()
    }
}

impl EgressGate {
    /// The decision for `target` from listener `tag`: the rules, and the
    /// person for `ask` hosts.
    pub async fn admit_for(&self, tag: u64, target: &Target) -> Admission {
        match self.rules().decide(&target.host, target.port) {
            NetworkVerdict::Allow { .. } => Admission::Allow,
            NetworkVerdict::Ask { rule } => self.ask(tag, target, &rule).await,
            NetworkVerdict::Deny(refusal) => Admission::Refuse(Refusal {
                reason: refusal.to_string(),
                remedy: refusal.remedy(&target.host, target.port),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn rules(allow: &[&str], ask: &[&str]) -> NetworkRules {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        NetworkRules::new(&owned(allow), &[], &owned(ask), &BTreeMap::new()).unwrap()
    }

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
        }
    }

    struct Answers(Mutex<Vec<Approval>>, Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl Approver for Answers {
        async fn ask(&self, message: String) -> Approval {
            self.1.lock().unwrap().push(message);
            self.0.lock().unwrap().remove(0)
        }
    }

    #[test]
    fn credential_values_come_from_the_environment_and_a_missing_one_is_named() {
        let lookup = |name: &str| (name == "GH").then(|| "t0k".to_owned());
        assert_eq!(expand("Bearer ${GH}", &lookup), Ok("Bearer t0k".into()));
        assert_eq!(expand("${GH}:${GH}", &lookup), Ok("t0k:t0k".into()));
        assert_eq!(expand("x ${NOPE}", &lookup), Err("NOPE".into()));
        assert_eq!(expand("plain ${open", &lookup), Ok("plain ${open".into()));
    }

    #[tokio::test]
    async fn refusals_reach_the_answer_of_the_command_that_made_them() {
        let gate = EgressGate::new(rules(&["ok.example"], &[]), |_| None, None);
        gate.open_listener(1, None);
        gate.open_listener(2, None);
        let Admission::Refuse(refusal) = gate.admit_for(1, &target("evil.example", 443)).await
        else {
            panic!("refused");
        };
        gate.record(ConnectionEvent {
            listener: 1,
            protocol: egress_proxy::Protocol::Connect,
            target: target("evil.example", 443),
            outcome: Outcome::Refused(refusal),
            credential: false,
        });
        assert!(gate.take_refusals(2).is_empty());
        assert_eq!(
            gate.take_refusals(1),
            ["[network: refused evil.example:443 (not in [network] allow)]"]
        );
        assert!(gate.take_refusals(1).is_empty(), "taken once");
        assert_eq!(
            gate.admit_for(1, &target("ok.example", 1)).await,
            Admission::Allow
        );
    }

    #[tokio::test]
    async fn ask_hosts_go_to_the_person_and_a_remembered_yes_holds() {
        let gate = EgressGate::new(rules(&[], &["*.corp.example"]), |_| None, None);
        let answers = Arc::new(Answers(
            Mutex::new(vec![Approval::Decline, Approval::Accept { remember: true }]),
            Mutex::new(Vec::new()),
        ));
        gate.open_listener(3, Some(answers.clone()));
        gate.open_listener(4, None);
        let git = target("git.corp.example", 443);
        assert!(matches!(
            gate.admit_for(3, &git).await,
            Admission::Refuse(_)
        ));
        assert_eq!(gate.admit_for(3, &git).await, Admission::Allow);
        // Remembered for the server's life: no question, even where nobody
        // could be asked.
        assert_eq!(gate.admit_for(4, &git).await, Admission::Allow);
        let asked = answers.1.lock().unwrap().clone();
        assert_eq!(asked.len(), 2);
        assert!(asked[0].contains("git.corp.example:443"), "{asked:?}");
        let Admission::Refuse(refusal) = gate.admit_for(4, &target("x.corp.example", 1)).await
        else {
            panic!("nobody to ask");
        };
        assert!(refusal.reason.contains("none can be asked"), "{refusal:?}");
    }

    #[test]
    fn credentials_are_resolved_per_host_and_replaced_with_the_rules() {
        let mut with = rules(&["api.example"], &[]);
        with.credentials.push(exec_policy::Credential {
            host: "api.example".into(),
            header: "Authorization".into(),
            value: "Bearer ${TOKEN}".into(),
        });
        with.credentials.push(exec_policy::Credential {
            host: "other.example".into(),
            header: "X-Key".into(),
            value: "${UNSET}".into(),
        });
        let gate = EgressGate::new(with, |name| (name == "TOKEN").then(|| "v".into()), None);
        assert_eq!(
            gate.credentials(&target("api.example", 443)),
            [("Authorization".to_owned(), "Bearer v".to_owned())]
        );
        assert!(gate.credentials(&target("other.example", 443)).is_empty());
        assert!(!format!("{gate:?}").contains("Bearer v"));
        let missing = gate.replace_rules(rules(&[], &[]));
        assert!(missing.is_empty());
        assert!(gate.credentials(&target("api.example", 443)).is_empty());
    }
}
