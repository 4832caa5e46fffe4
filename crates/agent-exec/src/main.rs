//! `agent-exec`: a shell an LLM agent can trust, as an MCP server over stdio
//! (`agent-exec mcp`), a one-shot CLI (`agent-exec run`), and a printer of
//! its tool definitions (`agent-exec schema`).

mod cli;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use tool_core::{DefinitionFormat, ToolRegistry};

use crate::cli::{Cli, Command};

/// Exit code for refusals and usage errors, as clap uses for bad arguments.
const EXIT_REFUSED: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            report(&format!("agent-exec: {error:#}"));
            ExitCode::from(EXIT_REFUSED)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Schema(args) => {
            let registry =
                exec_tools::execution_registry().context("building the tool registry")?;
            let text = schema_text(&registry, args.format.into())?;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .context("writing to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(_) => not_yet("mcp", "the agent-exec binary issue"),
        Command::Run(_) => not_yet("run", "the agent-exec binary issue"),
    }
}

/// The tool definitions in `format`, as a pretty JSON array with a newline.
fn schema_text(registry: &ToolRegistry, format: DefinitionFormat) -> anyhow::Result<String> {
    let definitions: Vec<serde_json::Value> = registry
        .definitions()
        .iter()
        .map(|definition| definition.render(format))
        .collect();
    let mut text = serde_json::to_string_pretty(&definitions)?;
    text.push('\n');
    Ok(text)
}

/// The only stub the foundation allows: subcommands whose issues have not landed.
fn not_yet(subcommand: &str, issue: &str) -> anyhow::Result<ExitCode> {
    report(&format!(
        "agent-exec {subcommand}: not yet implemented (arrives with {issue})"
    ));
    Ok(ExitCode::from(EXIT_REFUSED))
}

/// Writes one line to stderr; stdout is reserved for results and the protocol.
fn report(line: &str) {
    let mut stderr = std::io::stderr().lock();
    // Nothing sensible remains to do if stderr itself is gone.
    let _ = writeln!(stderr, "{line}");
}
