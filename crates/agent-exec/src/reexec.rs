//! Keeping the server's own secrets out of its commands' reach.
//!
//! A command can read its parent's initial environment from
//! `/proc/PPID/environ`, and the server's parent process is the MCP client,
//! whose environment holds the user's keys. So at start-up the server
//! re-executes itself with the scrubbed environment and hands the scrubbed
//! values over in a memfd, whose descriptor it closes as soon as it has read
//! it: the values then live only in memory, for redaction.
//!
//! That memory is out of reach too: both images make themselves not
//! dumpable before anything else ([`forbid_memory_access`]), and commands
//! run without `CAP_SYS_PTRACE` (shell-runtime drops it in the child), so no
//! command can attach to the server or read its `/proc/PID/mem` or
//! `/proc/PID/environ`, as root too.

use exec_policy::EnvRules;

/// Names the descriptor of the memfd in the re-executed process.
pub(crate) const SECRETS_FD_VAR: &str = "AGENT_EXEC_SECRETS_FD";

/// Makes this process not dumpable, so that a process without
/// `CAP_SYS_PTRACE` (every command) can neither attach to it nor read its
/// memory, whatever its uid. The first thing `main` does, in the image that
/// starts and again in the re-executed one (`execve` makes a process
/// dumpable again), before any secret arrives over the memfd. Returns why
/// it failed, for `main` to report once logging is set up.
pub(crate) fn forbid_memory_access() -> Option<String> {
    #[cfg(target_os = "linux")]
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        return Some(format!(
            "cannot make the server undumpable ({error}): commands may read its memory"
        ));
    }
    None
}

/// Returns the scrubbed `(name, value)` pairs: read back from the memfd in
/// a re-executed server, or, when there are any to hide, after re-executing
/// (which does not return). Where re-execution is impossible the server goes
/// on in-process and says so on stderr. `before_reading` runs in the image
/// that serves, before it reads any secret back (the spawner process is
/// forked there: it must hold none).
pub(crate) fn hide_secrets(rules: &EnvRules, before_reading: fn()) -> Vec<(String, String)> {
    if let Ok(fd) = std::env::var(SECRETS_FD_VAR) {
        before_reading();
        return read_handover(&fd);
    }
    let secrets: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, value)| rules.is_scrubbed_var(name, value))
        .collect();
    if !secrets.is_empty() {
        #[cfg(target_os = "linux")]
        if let Err(error) = linux::reexec(&secrets, rules) {
            tracing::warn!(%error, "cannot re-execute with a scrubbed environment; secrets stay readable in /proc/PID/environ");
        }
    }
    // Nothing hidden (or it could not be): the environment shows whatever
    // there is anyway.
    before_reading();
    secrets
}

fn read_handover(fd: &str) -> Vec<(String, String)> {
    let Ok(number) = fd.parse::<i32>() else {
        return Vec::new();
    };
    let bytes = std::fs::read(format!("/proc/self/fd/{number}")).unwrap_or_default();
    // Closed at once, so no command started later can inherit it.
    let _ = nix::unistd::close(number);
    let mut fields = bytes.split(|byte| *byte == 0);
    let mut pairs = Vec::new();
    while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
        if name.is_empty() {
            break;
        }
        pairs.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
    pairs
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;

    use anyhow::Context as _;
    use exec_policy::EnvRules;
    use nix::sys::memfd::{MFdFlags, memfd_create};

    use super::SECRETS_FD_VAR;

    pub(super) fn reexec(secrets: &[(String, String)], rules: &EnvRules) -> anyhow::Result<()> {
        // Not close-on-exec: the descriptor must survive into the new image.
        let memfd =
            memfd_create("agent-exec-secrets", MFdFlags::empty()).context("memfd_create")?;
        let mut file = std::fs::File::from(memfd);
        for (name, value) in secrets {
            file.write_all(name.as_bytes())?;
            file.write_all(&[0])?;
            file.write_all(value.as_bytes())?;
            file.write_all(&[0])?;
        }
        let fd = file.as_raw_fd();
        // By name (whatever the value, even one that is not UTF-8), and
        // every variable whose value is a secret.
        let hidden = |name: &str| {
            rules.is_scrubbed(name) || secrets.iter().any(|(secret, _)| secret == name)
        };
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(name, _)| !name.to_str().is_some_and(hidden))
            .filter_map(|(name, value)| {
                let mut entry = name.as_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                CString::new(entry).ok()
            })
            .collect();
        env.push(CString::new(format!("{SECRETS_FD_VAR}={fd}"))?);
        let args: Vec<CString> = std::env::args_os()
            .map(|arg| CString::new(arg.as_bytes().to_vec()))
            .collect::<Result<_, _>>()?;
        let exe = CString::new("/proc/self/exe")?;
        // Only returns when execve failed; the memfd closes with `file`.
        let Err(error) = nix::unistd::execve(&exe, &args, &env);
        Err(error).context("re-executing `/proc/self/exe` without the secrets")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::IntoRawFd as _;

    use nix::sys::memfd::{MFdFlags, memfd_create};

    use super::read_handover;

    /// The re-executed server reads the pairs back from the memfd.
    #[test]
    fn the_handover_is_read_back_and_closed() {
        let memfd = memfd_create("handover-test", MFdFlags::empty()).expect("memfd");
        let mut file = std::fs::File::from(memfd);
        file.write_all(b"API_KEY\0s3cret value\0GH_TOKEN\0ghp_x\0")
            .expect("write");
        let fd = file.into_raw_fd();
        let pairs = read_handover(&fd.to_string());
        assert_eq!(
            pairs,
            [
                ("API_KEY".to_owned(), "s3cret value".to_owned()),
                ("GH_TOKEN".to_owned(), "ghp_x".to_owned())
            ]
        );
        // That the descriptor is closed is checked by the black-box secrets
        // test: here another test thread may reuse its number at once.
        assert!(read_handover("not a number").is_empty());
    }
}
