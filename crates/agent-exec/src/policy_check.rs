//! `agent-exec policy check`: the decision on a command, as JSON, without
//! running it; how a user tests a policy before trusting it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use exec_policy::{AnalysisContext, Analyzer, Decision, Policy};

use crate::cli::CheckArgs;

/// Exit code when no decision could be made (sysexits' `EX_USAGE`).
pub(crate) const EXIT_UNDECIDED: u8 = 64;
/// Exit code for `ask`.
const EXIT_ASK: u8 = 3;
/// Exit code for `deny`.
const EXIT_DENY: u8 = 2;

/// Decides on `args.command` and prints the JSON object to `out`; on any
/// problem prints nothing there, says why on stderr and exits 64.
pub(crate) fn run(args: &CheckArgs, out: &mut dyn Write) -> ExitCode {
    match decide(args) {
        Ok((decision, json)) => {
            let mut text = json.to_string();
            text.push('\n');
            if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                crate::report(&format!("agent-exec: error: writing to stdout: {error}"));
                return ExitCode::from(EXIT_UNDECIDED);
            }
            ExitCode::from(match decision {
                Decision::Allow { .. } => 0,
                Decision::Ask(_) => EXIT_ASK,
                Decision::Deny(_) => EXIT_DENY,
            })
        }
        Err(error) => {
            crate::report(&format!("agent-exec: error: {error:#}"));
            ExitCode::from(EXIT_UNDECIDED)
        }
    }
}

fn decide(args: &CheckArgs) -> anyhow::Result<(Decision, serde_json::Value)> {
    let policy = match &args.policy {
        Some(path) => Policy::load(path).context("--policy")?,
        None => Policy::default(),
    };
    let (cwd, _) = crate::setup::working_dir_and_roots(args.cwd.as_deref(), &args.roots)?;
    let mut config = policy.analyzer;
    // As the server does: the analysis protects the user's home.
    config.home = std::env::var("HOME").ok().filter(|home| !home.is_empty());
    let analyzer = Analyzer::new(config);
    let command = args.command.join(" ");
    let context = AnalysisContext {
        cwd: Some(cwd.to_string_lossy().into_owned()),
        vars: args.env.iter().cloned().collect(),
    };
    let decision = analyzer.analyze_in(&command, &context).decision;
    let commands = analyzer.simple_commands(&command, &context);
    let denial = decision.denial();
    let json = serde_json::json!({
        "decision": decision.name(),
        "rule": denial.map(|d| d.rule_id.clone()),
        "reason": denial.map(|d| d.reason.clone()),
        "matched": denial.and_then(|d| d.matched.clone()),
        "commands": commands,
    });
    Ok((decision, json))
}
