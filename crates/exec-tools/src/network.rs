//! Explaining a network failure under `--network deny`: the kernel refuses
//! the socket, and every tool reports it in words of its own (a failed
//! name lookup, a refused connection, a bare `Permission denied`), none of
//! which says the network is off. No counter of refused calls exists (the
//! seccomp filter answers EACCES without a trace), so the failure is
//! recognised by what the command printed.

use shell_runtime::ShellProcess;

use crate::environment::ExecEnvironment;

/// The line an answer adds.
pub(crate) const NETWORK_OFF_NOTE: &str = "[network is off for commands (--network deny)]";

/// What tools print when a lookup or a connection fails. Matched without
/// regard to case; each names the network, so a match is never a file's
/// permission error.
const NETWORK_ERRORS: &[&str] = &[
    "could not resolve host",
    "could not resolve proxy",
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "failed to resolve",
    "getaddrinfo",
    "couldn't connect to server",
    "failed to connect",
    "immediate connect fail",
    "network is unreachable",
    "failed to establish a new connection",
    "unable to resolve host",
    "connection refused",
    "socket: permission denied",
    "connect: permission denied",
    "unable to look up",
];

/// Programs whose only job is the network: one of them failing without a
/// word (`getent hosts`, `curl -s`, `wget -q`) is a network failure.
const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "getent", "nc", "ncat", "netcat", "ping", "dig", "nslookup", "host", "ssh",
    "scp", "sftp", "telnet", "ftp",
];

/// The note for `shell`, which ran `command`, once it ended by itself:
/// when the sandbox refuses sockets and it failed on a lookup or a
/// connection (`output`: what it printed, asked for only then).
pub(crate) fn network_note(
    exec: &ExecEnvironment,
    command: &str,
    shell: &ShellProcess,
    output: impl FnOnce() -> String,
) -> Option<String> {
    let denied = exec
        .config
        .confinement
        .as_ref()
        .is_some_and(|confinement| confinement.denies_network());
    if !denied || !shell.status().is_finished() || shell.end_request().is_some() {
        return None;
    }
    failed_on_network(command, shell.exit().map(|exit| exit.code), &output())
        .then(|| NETWORK_OFF_NOTE.to_owned())
}

/// Whether a command that ended with `exit_code` and printed `output`
/// failed on the network. Only failures count: a command that printed a
/// lookup error and went on to succeed needs no explanation.
pub(crate) fn failed_on_network(command: &str, exit_code: Option<i32>, output: &str) -> bool {
    if exit_code.is_none_or(|code| code == 0) {
        return false;
    }
    let lower = output.to_lowercase();
    if NETWORK_ERRORS.iter().any(|error| lower.contains(error)) {
        return true;
    }
    // Python and others: `PermissionError: [Errno 13] Permission denied`
    // from a `socket(...)` call named a few lines above.
    if lower.contains("permission denied")
        && (lower.contains("socket") || lower.contains("connect"))
    {
        return true;
    }
    output.trim().is_empty() && names_a_network_program(command)
}

/// Whether a program `command` runs (the first word of a simple command,
/// after any assignments, as a name or a path) is a network-only one.
fn names_a_network_program(command: &str) -> bool {
    command
        .split(|c: char| "\n;|&()`".contains(c))
        .filter_map(|simple| simple.split_whitespace().find(|word| !word.contains('=')))
        .filter_map(|word| word.rsplit('/').next())
        .any(|program| NETWORK_PROGRAMS.contains(&program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_lookups_and_connections_are_recognised() {
        for output in [
            "curl: (6) Could not resolve host: example.com",
            "curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server",
            "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com",
            "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
            "Failed to establish a new connection: [Errno -2] Name or service not known",
            "Error: getaddrinfo EAI_AGAIN registry.npmjs.org",
            "  sock = socket(af, socktype, proto)\nPermissionError: [Errno 13] Permission denied",
            "bash: connect: Permission denied\nbash: /dev/tcp/127.0.0.1/9: Permission denied",
        ] {
            assert!(failed_on_network("x", Some(1), output), "{output}");
        }
    }

    #[test]
    fn a_silent_failure_counts_only_for_a_network_program() {
        assert!(failed_on_network("getent hosts example.com", Some(2), ""));
        assert!(failed_on_network(
            "x=1; /usr/bin/curl -s http://h/",
            Some(6),
            "\n"
        ));
        assert!(!failed_on_network("false", Some(1), ""));
        assert!(!failed_on_network("grep -q host f", Some(1), ""));
    }

    #[test]
    fn successes_and_other_errors_are_left_alone() {
        let error = "curl: (6) Could not resolve host: example.com";
        assert!(!failed_on_network("curl h || true", Some(0), error));
        assert!(!failed_on_network("curl h", None, error));
        for output in [
            "touch: cannot touch 'f': Permission denied",
            "error[E0308]: mismatched types",
        ] {
            assert!(!failed_on_network("make", Some(1), output), "{output}");
        }
    }
}
