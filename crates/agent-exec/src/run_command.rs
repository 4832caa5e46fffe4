//! `agent-exec run -- COMMAND...`: one Bash call through the full pipeline.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};
use tool_core::{CancellationToken, ExecutionContext, ToolExecutor};

/// Exit code for a command that timed out, as `timeout(1)` uses.
const EXIT_TIMEOUT: u8 = 124;
/// Exit code after Ctrl+C, as a shell reports SIGINT.
const EXIT_INTERRUPTED: u8 = 130;
/// How a refusal starts on stderr. Exit code 2 is also a command's own, so
/// scripts tell the two apart by this line (the command's own stderr goes to
/// stdout, under `[stderr]`, like the rest of its result).
const REFUSED_PREFIX: &str = "agent-exec: refused: ";
/// Name of a kept output file under the system temp dir. `remove_stale` in
/// `setup.rs` never takes it for a dead server's directory: `run` is not a
/// pid.
const KEPT_PREFIX: &str = "agent-exec-run-";

/// Runs `words` (joined with spaces, as ssh does) and returns the exit code
/// the contract gives: the command's own, 124 on timeout, 2 when refused.
/// The result goes to `out` (stdout); a refusal to stderr, as one
/// `agent-exec: refused: REASON` line.
pub(crate) async fn run(
    executor: &ToolExecutor,
    context: ExecutionContext,
    words: &[String],
    timeout: Option<u64>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let token = CancellationToken::new();
    let context = context.with_cancellation(token.clone());
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            token.cancel();
        }
    });
    let mut arguments = json!({ "command": words.join(" ") });
    if let Some(timeout) = timeout {
        arguments["timeout"] = json!(timeout);
    }
    let executed = executor.execute("Bash", &context, arguments).await?;
    interrupt.abort();
    let result = executed.result;
    let metadata = result.metadata_value();
    let status = metadata.get("status").and_then(Value::as_str);
    let exit_code = metadata.get("exit_code").and_then(Value::as_i64);
    // A refusal (blocked, invalid arguments, a working directory outside the
    // roots) ran nothing: no exit code, and no status but `blocked`.
    let refused =
        status == Some("blocked") || (exit_code.is_none() && status.is_none() && !result.success);
    if refused {
        crate::report(&format!("{REFUSED_PREFIX}{}", result.text()));
        return Ok(ExitCode::from(crate::EXIT_REFUSED));
    }
    let code = match (status, exit_code) {
        (Some("timeout"), _) => EXIT_TIMEOUT,
        (Some("killed"), _) => EXIT_INTERRUPTED,
        (_, Some(code)) => u8::try_from(code).unwrap_or(1),
        _ if result.success => 0,
        _ => 1,
    };
    let mut text = result.text().to_owned();
    if let Some(file) = metadata.get("output_file").and_then(Value::as_str) {
        text = keep_output_file(&text, Path::new(file));
    }
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') && !text.is_empty() {
        out.write_all(b"\n")?;
    }
    Ok(ExitCode::from(code))
}

/// The full output of a truncated answer lives in the server's temp dir,
/// which is removed when `run` exits: keep it beside that dir (same
/// filesystem, so a hard link, no copy), mode 0600, and name the kept file
/// in `text` and on stderr. If it cannot be kept, `text` says so instead:
/// an answer never names a file that is gone once `run` has exited.
fn keep_output_file(text: &str, file: &Path) -> String {
    let shown = file.display().to_string();
    match keep(file, &std::env::temp_dir()) {
        Ok(kept) => {
            crate::report(&format!(
                "agent-exec: note: the full output is kept in {} (remove it when done)",
                kept.display()
            ));
            text.replace(&shown, &kept.display().to_string())
        }
        Err(error) => {
            crate::report(&format!(
                "agent-exec: warning: the full output could not be kept: {error}"
            ));
            text.replace(
                &format!("full output in {shown}"),
                "the full output was not kept",
            )
            .replace(&shown, "(not kept)")
        }
    }
}

/// Links (or, across filesystems, copies) `file` to a new
/// `agent-exec-run-<pid>-<n>.txt` in `dir`, never over an existing file.
fn keep(file: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    restrict(file)?;
    let pid = std::process::id();
    for n in 0..1000u32 {
        let kept = dir.join(format!("{KEPT_PREFIX}{pid}-{n}.txt"));
        match std::fs::hard_link(file, &kept) {
            Ok(()) => return Ok(kept),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return copy_new(file, &kept).map(|()| kept),
        }
    }
    Err(std::io::Error::other(format!(
        "no free name `{KEPT_PREFIX}{pid}-N.txt` in `{}`",
        dir.display()
    )))
}

/// The output may hold what only the user should read; the server's temp
/// dir (0700) protected it until now.
#[cfg(unix)]
fn restrict(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn restrict(_file: &Path) -> std::io::Result<()> {
    Ok(())
}

fn copy_new(file: &Path, to: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut target = options.open(to)?;
    let copied =
        std::fs::File::open(file).and_then(|mut source| std::io::copy(&mut source, &mut target));
    if let Err(error) = copied {
        let _ = std::fs::remove_file(to);
        return Err(error);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_gets_a_fresh_name_and_the_same_content() {
        let server = tempfile::tempdir().expect("temp dir");
        let keep_in = tempfile::tempdir().expect("temp dir");
        let file = server.path().join("bash-0.txt");
        std::fs::write(&file, "all of it").expect("write");
        let first = keep(&file, keep_in.path()).expect("kept");
        let second = keep(&file, keep_in.path()).expect("kept again");
        assert_ne!(first, second);
        drop(server);
        assert_eq!(std::fs::read_to_string(&first).expect("read"), "all of it");
        let name = first.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(
            name.starts_with(KEPT_PREFIX) && name.ends_with(".txt"),
            "{name}"
        );
    }

    #[test]
    fn a_file_that_cannot_be_kept_is_not_named() {
        let text = "head\n[Output truncated: 5 characters omitted; full output in /nonexistent/x/bash-0.txt]\ntail";
        let kept = keep_output_file(text, Path::new("/nonexistent/x/bash-0.txt"));
        assert!(!kept.contains("/nonexistent"), "{kept}");
        assert!(
            kept.contains("5 characters omitted; the full output was not kept]"),
            "{kept}"
        );
    }
}
