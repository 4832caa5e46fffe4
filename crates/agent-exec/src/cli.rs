//! The command line, as the contract lays it out.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tool_core::DefinitionFormat;

/// A shell an LLM agent can trust.
#[derive(Debug, Parser)]
#[command(name = "agent-exec", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the tools over MCP on stdio (newline-delimited JSON-RPC).
    Mcp(McpArgs),
    /// Serve the tools over MCP (Streamable HTTP) on a Unix socket or a TCP
    /// address, as one long-lived server that owns its shells whatever
    /// connects.
    ///
    /// Without --listen it listens on `$XDG_RUNTIME_DIR/agent-exec/serve.sock`
    /// (else `/tmp/agent-exec-$UID/serve.sock`) in a directory only its user
    /// can enter. It prints its endpoint and token file on stderr and runs
    /// until SIGTERM, SIGINT or SIGHUP, which end every shell.
    Serve(ServeArgs),
    /// Run one Bash call through the full pipeline and print its result.
    ///
    /// The result goes to stdout: the command's output, its stderr after a
    /// `[stderr]` line, and a first line such as `Command failed with exit
    /// code N` when it failed. When the output is cut, the whole of it is
    /// kept in a file under the temp dir, named there and on stderr.
    ///
    /// Exit status: the command's own; 124 when it timed out; 130 after
    /// Ctrl+C; 2 when agent-exec refused the command (dangerous, invalid;
    /// nothing ran) or could not start (a bad flag or policy file). Then
    /// stderr has a line starting with `agent-exec: refused: ` or
    /// `agent-exec: error: ` (`error: ` for a malformed command line); a
    /// command's own exit code 2 prints neither, so scripts tell them apart
    /// by stderr.
    Run(RunArgs),
    /// Print the tool definitions as a JSON array.
    Schema(SchemaArgs),
    /// Test a policy: decide on commands without running them.
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Print the decision on a command as JSON, without running it.
    ///
    /// One JSON object on stdout: `decision` (`allow`, `ask` or `deny`),
    /// `rule` and `reason` (null when allowed), and `commands` (the simple
    /// commands the analysis saw, after unwrapping).
    ///
    /// Exit status: 0 allow, 3 ask, 2 deny, 64 when it cannot decide (bad
    /// arguments, a refused policy file, a --cwd outside the roots; nothing
    /// on stdout, the reason on stderr).
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The policy file to test (default: none, the built-in rules only).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Directory the command would start in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// A directory commands may work in; repeatable (default: --cwd).
    #[arg(long = "root", value_name = "DIR")]
    pub(crate) roots: Vec<PathBuf>,
    /// A variable of the session the command would run in; repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    pub(crate) env: Vec<(String, String)>,
    /// The command; its words are joined with spaces, as for `run`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// `NAME=VALUE` with a shell variable name.
fn parse_env(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not a variable name"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Flags shared by `mcp`, `serve` and `run`.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// Directory commands start in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// A directory commands may work in; repeatable (default: --cwd).
    #[arg(long = "root", value_name = "DIR")]
    pub(crate) roots: Vec<PathBuf>,
    /// Check and echo commands without running them.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The most characters of output an answer shows (head and tail, plus
    /// one truncation line naming the file with the whole output); lower
    /// it for clients that keep less of a tool result (at least 1000).
    #[arg(long, value_name = "N", default_value_t = exec_tools::MAX_OUTPUT_CHARS)]
    pub(crate) max_output_chars: usize,
    /// A TOML policy file with extra rules (examples/policy.toml); one that
    /// does not exist is refused.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// How commands are contained: `contain` (the default) gives each its
    /// own PID, mount and IPC namespaces; `read-only` and `workspace-write`
    /// add write walls; `off` runs them beside the server.
    #[arg(long, value_enum, default_value_t = SandboxMode::Contain)]
    pub(crate) sandbox: SandboxMode,
    /// Whether commands may open network sockets.
    #[arg(long, value_enum, default_value_t = NetworkMode::Allow)]
    pub(crate) network: NetworkMode,
    /// The memory each command may use (its own cgroup's limit), such as
    /// 512M, 4G or 1.5G; past it the command is killed and its answer says
    /// `killed: out of memory`. Wins over the policy's `[limits] memory`;
    /// default: none.
    #[arg(long, value_name = "SIZE", value_parser = exec_policy::parse_memory_limit)]
    pub(crate) memory_limit: Option<u64>,
    /// What a command the policy says to ask about gets when nobody can be
    /// asked (a client without MCP elicitation, `run`, a dry run).
    #[arg(long, value_enum, default_value_t = AskFallbackArg::Deny)]
    pub(crate) ask_fallback: AskFallbackArg,
    /// How long a question to the person (MCP elicitation) waits for an
    /// answer before it counts as `cancel`, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ask_timeout: u64,
    /// Append one JSON line per decision and per command end to FILE
    /// (created with mode 0600); a log that cannot be written stops commands.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Bytes all output files of the server may hold together (default:
    /// 1 GiB, or a quarter of the free space where they go if that is less).
    /// For tests: a small budget is reached quickly.
    #[arg(long, value_name = "BYTES", hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) output_budget: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AskFallbackArg {
    /// Refuse it, saying how to allow it.
    Deny,
    /// Run it (`approved_by: "fallback"`).
    Allow,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Add a `Co-authored-by` trailer to `git commit`s, e.g. "Name <email>".
    #[arg(long, value_name = "NAME <EMAIL>")]
    pub(crate) coauthor: Option<String>,
    /// A foreground command still running after MS milliseconds goes on as
    /// a background shell (for clients that cut long calls); default: off.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) background_after: Option<u64>,
    /// Bridge stdio to a running `agent-exec serve` instead of serving here
    /// (`unix:PATH` or `http://HOST:PORT/mcp`): its shells outlive this
    /// process. The token comes from --token-file or `AGENT_EXEC_TOKEN`.
    #[arg(long, value_name = "unix:PATH|URL")]
    pub(crate) attach: Option<String>,
    /// With --attach: the file holding the token (its first line; a
    /// `NAME:TOKEN` line gives TOKEN).
    #[arg(long, value_name = "FILE", requires = "attach")]
    pub(crate) token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Where to listen: `unix:PATH` or `HOST:PORT` (default: a Unix socket
    /// in the user's runtime directory).
    #[arg(long, value_name = "unix:PATH|HOST:PORT")]
    pub(crate) listen: Option<String>,
    /// The bearer tokens, one principal per line (`NAME:TOKEN`, or a bare
    /// token named by its line number); created (mode 0600) with one
    /// generated token when it does not exist (default: `token` beside the
    /// default socket).
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Accept calls without a token (only on a Unix socket or a loopback
    /// address); every caller is the one principal `local`.
    #[arg(long, conflicts_with = "token_file")]
    pub(crate) no_auth: bool,
    /// Listen beyond loopback without TLS because a TLS proxy fronts this
    /// server (TLS itself is not built in).
    #[arg(long)]
    pub(crate) insecure_behind_proxy: bool,
    /// Add a `Co-authored-by` trailer to `git commit`s, e.g. "Name <email>".
    #[arg(long, value_name = "NAME <EMAIL>")]
    pub(crate) coauthor: Option<String>,
    /// A foreground command still running after MS milliseconds goes on as
    /// a background shell; default: off.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) background_after: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Timeout in milliseconds (1000..=600000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1000..=600_000))]
    pub(crate) timeout: Option<u64>,
    /// The command; its words are joined with spaces, as ssh does.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    /// Which API's tool shape to print.
    #[arg(long, value_enum, default_value_t = FormatArg::Mcp)]
    pub(crate) format: FormatArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// MCP `tools/list` entries.
    Mcp,
    /// OpenAI Chat Completions functions.
    Openai,
    /// Anthropic Messages tools.
    Anthropic,
}

impl From<FormatArg> for DefinitionFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Mcp => Self::Mcp,
            FormatArg::Openai => Self::OpenAi,
            FormatArg::Anthropic => Self::Anthropic,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SandboxMode {
    /// No OS confinement: commands see and can signal the user's processes.
    Off,
    /// Namespaces of its own for each command; writes and network stay
    /// the user's.
    Contain,
    /// No writes anywhere.
    ReadOnly,
    /// Writes only inside the roots, a private temp directory and the
    /// policy file's `[sandbox] writable` directories.
    WorkspaceWrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkMode {
    /// Commands may use the network.
    Allow,
    /// Commands cannot open network sockets.
    Deny,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_joins_words_after_double_dash() {
        let cli = Cli::try_parse_from([
            "agent-exec",
            "run",
            "--timeout",
            "5000",
            "--",
            "echo",
            "a b",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.command, ["echo", "a b"]);
        assert_eq!(args.timeout, Some(5000));
    }

    #[test]
    fn run_refuses_an_out_of_range_timeout() {
        let error = Cli::try_parse_from(["agent-exec", "run", "--timeout", "999", "--", "true"])
            .unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn roots_repeat() {
        let cli = Cli::try_parse_from([
            "agent-exec",
            "mcp",
            "--root",
            "/a",
            "--root",
            "/b",
            "--sandbox",
            "workspace-write",
        ])
        .unwrap();
        let Command::Mcp(args) = cli.command else {
            panic!("not mcp")
        };
        assert_eq!(
            args.common.roots,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(args.common.sandbox, SandboxMode::WorkspaceWrite);
        assert_eq!(args.common.network, NetworkMode::Allow);
    }
}
