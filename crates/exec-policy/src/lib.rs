//! Pure decisions for agent shell commands: dangerous-command analysis,
//! environment scrubbing (by name, and by value with the `secret-formats`
//! crate's formats),
//! working-directory rules and the sandbox request.
//!
//! ```
//! use exec_policy::{Analyzer, AnalyzerConfig, Decision};
//! let analyzer = Analyzer::new(AnalyzerConfig::default());
//! assert!(analyzer.check("cargo test && rm -rf target").is_allowed());
//! let Decision::Deny(denial) = analyzer.check("sudo rm -rf --no-preserve-root /") else {
//!     panic!("a recursive delete of / is refused");
//! };
//! assert!(denial.message().contains("blocked"));
//! ```
//!
//! **Architecture Invariant:** this crate starts no process and knows
//! nothing of tokio. It reads only the policy file it is handed and
//! filesystem metadata (to canonicalise working directories).

mod analysis;
mod approval_key;
mod env;
mod exports;
mod glob;
mod network_rules;
mod policy_file;
mod policy_rule;
mod sandbox;
mod workdir;

#[doc(hidden)]
pub use analysis::scale_parse_budgets;
pub use analysis::{
    ASK_RULES, Analysis, AnalysisContext, Analyzer, AnalyzerConfig, CommandFacts, Decision, Denial,
    FORK_BOMB, GitCommit, LITERAL_ASK_RULES, RULES, Rule, RuleSource,
};
pub use approval_key::{
    ApprovalKey, BOUND_VARIABLES, PlannedCommand, bound_env, is_builtin, is_keyword, script_operand,
};
pub use env::{
    EnvRules, MIN_REDACTED_LEN, NON_INTERACTIVE, ScrubbedEnv, is_secret_name, scrub_environment,
};
pub use exports::{NotCarried, export_carries};
pub use network_rules::{
    AddressKind, Credential, HostRule, HostRuleError, NetworkRefusal, NetworkRules, NetworkVerdict,
    address_kind,
};
pub use policy_file::{
    MIN_MEMORY_LIMIT, Policy, PolicyError, RedactRules, parse_memory_limit, parse_size,
};
pub use policy_rule::{PolicyRule, RuleDecision, RuleMatcher};
pub use sandbox::{
    NOT_CONTAINED, NetworkAccess, ResourceLimits, SandboxMode, SandboxSpec, SkippedWritable,
};
pub use workdir::{
    WorkdirError, canonical_dir, is_within_roots, nearest_existing_ancestor, resolve_working_dir,
};
