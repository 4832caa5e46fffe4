//! The answer about a tracked shell that `BashOutput` and `WriteStdin`
//! both give (status line, output new since the last read, notes, the
//! metadata), and the failure for an unknown id that `KillShell` gives
//! too: shared here so no tool imports another's internals.

use regex::Regex;
use shell_runtime::{ShellProcess, ShellStatus, SpillReport, Stream};
use tool_core::{Answer, Principal};

use crate::environment::ExecEnvironment;
use crate::metadata::{ShellMetadata, capped_command};
use crate::render::{Body, SavedOutput, clean, layout};

/// A `BashOutput` (or `WriteStdin`) answer.
pub(crate) type ShellAnswer = Answer<ShellMetadata>;

/// `Status: S[, Exit code: N[ (SIG)]][, killed: out of memory (limit
/// L)][, Duration: Nms]`, or `Status: running (waiting for input),
/// Duration: Nms` for a tty shell at a prompt.
pub(crate) fn status_line(shell: &ShellProcess, waiting: bool) -> String {
    let status = shell.status();
    let mut line = format!("Status: {status}");
    if waiting && !status.is_finished() {
        line.push_str(&format!(
            " (waiting for input), Duration: {}ms",
            shell.duration().as_millis()
        ));
    } else if status.is_finished() {
        if status != ShellStatus::Timeout
            && let Some(exit) = shell.exit()
        {
            line.push_str(&format!(", Exit code: {}", exit.code));
            if let Some(name) = exit.signal_name() {
                line.push_str(&format!(" ({name})"));
            }
            if let Some(oom) = shell.out_of_memory() {
                line.push_str(&format!(", {oom}"));
            }
        }
        line.push_str(&format!(", Duration: {}ms", shell.duration().as_millis()));
    }
    line
}

/// The failure for an id the caller does not know, listing the caller's
/// shells (`KillShell` answers it too). Another principal's shell answers
/// this too, so its id lists none of that principal's.
pub(crate) fn not_found<M: Default>(
    env: &ExecEnvironment,
    id: &str,
    principal: &Principal,
) -> Answer<M> {
    let known = env.owners.shells_of(&env.manager, principal);
    let mut message = format!("Shell {id} not found.");
    if known.is_empty() {
        message.push_str(" No background shells are known.");
    } else {
        message.push_str(" Known shells:");
        for (known_id, shell) in known {
            message.push_str(&format!(
                "\n  {known_id} ({}): {}",
                shell.status(),
                env.redact(shell.command())
            ));
        }
    }
    Answer::fail(message)
}

/// A background shell's spill files, as the truncation line names them:
/// `full output in A and B`, or what each lacks and why.
fn saved_output(shell: &ShellProcess) -> Option<SavedOutput> {
    let spills: Vec<_> = [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .filter_map(|stream| shell.ensure_spill_file(stream))
        .filter(|spill| spill.written > 0 || !spill.is_whole())
        .collect();
    if spills.is_empty() {
        return None;
    }
    let path = spills
        .iter()
        .map(|spill| spill.file.path.display().to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    if spills.iter().all(SpillReport::is_whole) {
        return Some(SavedOutput {
            place: format!("full output in {path}"),
            path: Some(path.into()),
        });
    }
    let place = spills
        .iter()
        .map(|spill| {
            SavedOutput::new(spill.file.path.clone(), spill.written, spill.shortfall).place
        })
        .collect::<Vec<_>>()
        .join("; ");
    // `output_file` names only files that hold something.
    let written: Vec<String> = spills
        .iter()
        .filter(|spill| spill.written > 0)
        .map(|spill| spill.file.path.display().to_string())
        .collect();
    Some(SavedOutput {
        path: (!written.is_empty()).then(|| written.join(" and ").into()),
        place,
    })
}

/// Whether a tty shell waits for input now.
pub(crate) fn waiting_for_input(shell: &ShellProcess) -> bool {
    shell.is_running() && shell.waits_for_input(crate::input_wait::INPUT_QUIET)
}

fn keep_matching(text: &str, filter: Option<&Regex>) -> String {
    match filter {
        None => text.to_owned(),
        Some(regex) => {
            let mut kept = String::new();
            for line in text.lines().filter(|line| regex.is_match(line)) {
                kept.push_str(line);
                kept.push('\n');
            }
            kept
        }
    }
}

/// Once the shell finished: the processes it left running (`setsid -f`,
/// `nohup ... &`), which were ended with it, counted as the foreground's
/// `[ended N background job(s) ...]` line counts them.
fn left_running_note(shell: &ShellProcess, status: ShellStatus) -> Vec<String> {
    let ended = shell.ended_jobs();
    if !status.is_finished() || ended == 0 {
        return Vec::new();
    }
    vec![format!(
        "[ended {ended} process(es) the shell left running; see [processes] keep]"
    )]
}

/// The answer `BashOutput` (and `WriteStdin`) gives: the status line, a blank
/// line, the output new since the last read; the metadata.
pub(crate) fn read_answer(
    env: &ExecEnvironment,
    id: &str,
    shell: &ShellProcess,
    filter: Option<&Regex>,
    known_waiting: bool,
) -> ShellAnswer {
    read_answer_with(env, id, shell, filter, known_waiting, None)
}

/// [`read_answer`] with `lead_note` as the first line after the output
/// (`BashOutput`'s `[until: ...]` line).
pub(crate) fn read_answer_with(
    env: &ExecEnvironment,
    id: &str,
    shell: &ShellProcess,
    filter: Option<&Regex>,
    known_waiting: bool,
    lead_note: Option<String>,
) -> ShellAnswer {
    {
        let waiting = shell.is_running() && (known_waiting || waiting_for_input(shell));
        let new = shell.read_unseen();
        let missed = new.stdout.dropped + new.stderr.dropped;
        let shape = |text: &str| keep_matching(&clean(env, text), filter);
        let header = status_line(shell, waiting);
        let body = Body::from_streams(&new.stdout, &new.stderr, shape);
        let prefix = format!("{header}\n");
        let status = shell.status();
        let mut notes: Vec<String> = lead_note.into_iter().collect();
        notes.extend(left_running_note(shell, status));
        // Execs the policy refused at run time since the last answer.
        let (refused_lines, refused) = env.new_refusal_lines(shell.pid());
        notes.extend(refused_lines);
        // From the output this read shows: what earlier reads took is gone.
        let new_output = || {
            let mut output = new.stdout.render();
            output.push_str(&new.stderr.render());
            output
        };
        notes.extend(crate::network::network_note(
            env,
            shell.command(),
            shell,
            new_output,
        ));
        // The shell's directory is not kept: paths it names relatively are
        // left out.
        notes.extend(crate::write_walls::write_wall_notes(env, None, new_output));
        let rendered = layout(
            Some(&prefix),
            &body,
            &notes,
            env.config.max_output_chars,
            || saved_output(shell),
        );
        ShellAnswer::ok(rendered.text).meta(|m| {
            m.status = Some(status.as_str());
            m.exit_code = shell
                .exit()
                .filter(|_| status.is_finished() && status != ShellStatus::Timeout)
                .map(|exit| exit.code);
            m.truncated = Some(rendered.truncated);
            m.output_file = rendered
                .output_file
                .map(|path| path.to_string_lossy().into_owned());
            m.omitted_chars = rendered.omitted_chars;
            m.missed_bytes = (missed > 0).then_some(missed);
            m.bash_id = Some(id.to_owned());
            m.is_running = Some(!status.is_finished());
            m.waiting_for_input = Some(waiting);
            m.duration_ms = Some(u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX));
            m.command = Some(capped_command(&env.redact(shell.command())));
            m.runtime_refusals = (refused > 0).then_some(refused);
        })
    }
}
