//! Turning captured streams into the answer text a model reads.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use shell_runtime::{OutputSlice, ShellProcess, Stream, collapse_carriage_returns};

use crate::environment::{ExecEnvironment, OUTPUT_FILE_CAP};
use crate::text::{head_and_tail, strip_ansi};

/// An answer text and what became of its output.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) text: String,
    pub(crate) truncated: bool,
    pub(crate) output_file: Option<PathBuf>,
}

/// Applies the configured clean-ups (progress redraws, ANSI codes).
pub(crate) fn clean(env: &ExecEnvironment, text: &str) -> String {
    let text = if env.config.collapse_progress {
        collapse_carriage_returns(text)
    } else {
        text.to_owned()
    };
    if env.config.strip_ansi {
        strip_ansi(&text)
    } else {
        text
    }
}

/// stdout, then `\n[stderr]\n` and stderr when there is any.
pub(crate) fn join_streams(stdout: &str, stderr: &str) -> String {
    if stderr.is_empty() {
        return stdout.to_owned();
    }
    let mut body = String::with_capacity(stdout.len() + stderr.len() + 10);
    body.push_str(stdout);
    body.push_str("\n[stderr]\n");
    body.push_str(stderr);
    body
}

/// Lays out `prefix`, the output and `notes`, keeping the whole within
/// `budget` characters (plus one truncation line). A foreground shell's
/// spill files (`spill`) become the one output file when the output is cut,
/// and are removed otherwise.
pub(crate) fn render_streams(
    env: &ExecEnvironment,
    stdout: &OutputSlice,
    stderr: &OutputSlice,
    prefix: Option<&str>,
    notes: &[String],
    budget: usize,
    spill: Option<(&ShellProcess, &Path)>,
) -> Rendered {
    let body = join_streams(&clean(env, &stdout.render()), &clean(env, &stderr.render()));
    let rendered = layout(prefix, &body, notes, budget, || {
        spill.and_then(|(shell, stem)| combine_spills(env, shell, stem))
    });
    if let Some((shell, _)) = spill {
        remove_spills(shell);
    }
    rendered
}

/// The layout shared by `Bash` and `BashOutput`. `output_file` is asked for
/// only when the text must be cut.
pub(crate) fn layout(
    prefix: Option<&str>,
    body: &str,
    notes: &[String],
    budget: usize,
    output_file: impl FnOnce() -> Option<PathBuf>,
) -> Rendered {
    let fixed: usize = prefix.map_or(0, |p| p.chars().count() + 1)
        + notes
            .iter()
            .map(|note| note.chars().count() + 1)
            .sum::<usize>();
    let room = budget.saturating_sub(fixed + 1);
    let mut file = None;
    let (body, truncated) = if body.chars().count() > room {
        file = output_file();
        let place = file
            .as_ref()
            .map(|path| format!("; full output in {}", path.display()))
            .unwrap_or_default();
        head_and_tail(body, room, |omitted| {
            format!("[Output truncated: {omitted} characters omitted{place}]")
        })
    } else {
        (body.to_owned(), false)
    };
    let mut text = String::new();
    if let Some(prefix) = prefix {
        text.push_str(prefix);
        if !body.is_empty() {
            text.push('\n');
        }
    }
    text.push_str(&body);
    for note in notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(note);
    }
    Rendered {
        text,
        truncated,
        output_file: file,
    }
}

/// Writes stdout's spill, `\n[stderr]\n` and stderr's spill into one file.
fn combine_spills(env: &ExecEnvironment, shell: &ShellProcess, stem: &Path) -> Option<PathBuf> {
    let out = shell.spill_to_disk(Stream::Stdout)?;
    let err = shell.spill_to_disk(Stream::Stderr)?;
    let path = stem.with_extension("txt");
    let mut file = std::fs::File::create(&path).ok()?;
    let mut budget = OUTPUT_FILE_CAP;
    copy_capped(&out.file.path, &mut file, &mut budget);
    if err.written > 0 {
        let separator = b"\n[stderr]\n";
        if budget >= separator.len() as u64 {
            let _ = file.write_all(separator);
            budget -= separator.len() as u64;
        }
        copy_capped(&err.file.path, &mut file, &mut budget);
    }
    drop(file);
    env.keep_files(&[&path]);
    Some(path)
}

fn copy_capped(from: &Path, to: &mut std::fs::File, budget: &mut u64) {
    if let Ok(source) = std::fs::File::open(from) {
        let mut limited = source.take(*budget);
        if let Ok(copied) = std::io::copy(&mut limited, to) {
            *budget -= copied;
        }
    }
}

fn remove_spills(shell: &ShellProcess) {
    for stream in [Stream::Stdout, Stream::Stderr] {
        if let Some(spill) = shell.spill(stream).filter(|spill| spill.on_disk) {
            let _ = std::fs::remove_file(&spill.file.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_answer_fits_the_budget() {
        let body = "x".repeat(50_000);
        let notes = vec!["[ended 1 background job(s) left by the command]".to_owned()];
        let rendered = layout(
            Some("Command failed with exit code 1"),
            &body,
            &notes,
            30_000,
            || Some(PathBuf::from("/tmp/out.txt")),
        );
        assert!(rendered.truncated);
        let without_marker: String = rendered
            .text
            .lines()
            .filter(|line| !line.starts_with("[Output truncated"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            without_marker.chars().count() <= 30_000,
            "{}",
            without_marker.chars().count()
        );
        assert!(
            rendered
                .text
                .starts_with("Command failed with exit code 1\n")
        );
        assert!(rendered.text.ends_with(&notes[0]));
        assert!(rendered.text.contains("full output in /tmp/out.txt]"));
    }

    #[test]
    fn stderr_follows_a_marker() {
        assert_eq!(join_streams("out\n", "err\n"), "out\n\n[stderr]\nerr\n");
        assert_eq!(join_streams("out\n", ""), "out\n");
    }
}
