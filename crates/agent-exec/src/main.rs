//! `agent-exec`: a shell an LLM agent can trust, as an MCP server over stdio
//! (`agent-exec mcp`), a one-shot CLI (`agent-exec run`), and a printer of
//! its tool definitions (`agent-exec schema`).

mod cli;
mod mcp;
mod reexec;
mod run_command;
mod setup;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser as _;
use exec_policy::Policy;
use exec_tools::ExecEnvironment;
use tool_core::{DefinitionFormat, ExecutionContext, ToolExecutor, ToolRegistry};

use crate::cli::{Cli, Command, CommonArgs};

/// Exit code for refusals and usage errors, as clap uses for bad arguments.
const EXIT_REFUSED: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            report(&format!("agent-exec: {error:#}"));
            ExitCode::from(EXIT_REFUSED)
        }
    }
}

/// `tracing` to stderr, filtered by `RUST_LOG` (warnings by default).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
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
        Command::Mcp(args) => {
            let (setup, env, executor) = prepare(&args.common, args.coauthor.as_deref())?;
            let bridge = agent_exec::Bridge::new(executor, setup.cwd.clone(), setup.dry_run);
            let runtime = runtime()?;
            let served = runtime.block_on(async {
                let served = mcp::serve(bridge).await;
                env.shutdown().await;
                served
            });
            // The stdin reader sits in a blocking read that only the client
            // can end; every shell is gone already, so do not wait for it.
            runtime.shutdown_background();
            drop(setup);
            served?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let (setup, env, executor) = prepare(&args.common, None)?;
            let context = ExecutionContext::new(setup.cwd.clone()).with_dry_run(setup.dry_run);
            let runtime = runtime()?;
            let code = runtime.block_on(async {
                let code = run_command::run(&executor, context, &args.command, args.timeout).await;
                env.shutdown().await;
                code
            });
            runtime.shutdown_background();
            drop(setup);
            code
        }
    }
}

/// Policy, secrets, flags, tools: everything checked before anything runs.
fn prepare(
    common: &CommonArgs,
    coauthor: Option<&str>,
) -> anyhow::Result<(setup::Setup, Arc<ExecEnvironment>, ToolExecutor)> {
    let policy = match &common.policy {
        Some(path) => Policy::load(path).map_err(|error| anyhow::anyhow!("--policy: {error}"))?,
        None => Policy::default(),
    };
    let secrets = reexec::hide_secrets(&policy.env);
    let setup = setup::setup(common, &policy, coauthor, secrets)?;
    let env = Arc::new(ExecEnvironment::new(setup.config.clone()));
    let mut registry = ToolRegistry::new();
    exec_tools::register_execution_tools(&mut registry, &env)
        .context("building the tool registry")?;
    Ok((setup, env, ToolExecutor::new(Arc::new(registry))))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
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

/// Writes one line to stderr; stdout is reserved for results and the protocol.
fn report(line: &str) {
    let mut stderr = std::io::stderr().lock();
    // Nothing sensible remains to do if stderr itself is gone.
    let _ = writeln!(stderr, "{line}");
}
