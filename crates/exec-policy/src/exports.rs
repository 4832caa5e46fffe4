//! Which exported variables carry over from one call of a session to the
//! next (docs/decisions/0019). A variable carried over is in the
//! environment of every later command, whose text the analysis checks
//! without seeing what the variable will make programs do. So variables
//! that some program turns into code, or that choose which program runs,
//! do not carry: `GIT_CONFIG_PARAMETERS` with `core.fsmonitor`,
//! `TAR_OPTIONS=--to-command=...`, `LESSOPEN`, `LD_PRELOAD`, `PATH` with a
//! directory put first...
//!
//! The design is an allow-list where a namespace is known to hold code
//! (`GIT_*`: only the names listed in [`GIT_CARRIED`] carry) and a
//! deny-list of whole families elsewhere (`LD_*`, `DYLD_*`, `BASH_*`...),
//! plus the names one by one. Everything else, `FOO`, `RUST_LOG`,
//! `NODE_ENV`, carries: that is what `export` is for.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Why an exported variable does not carry over to later calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCarried {
    /// A program turns the value into code, or it names a program to run
    /// or a library to load (`GIT_CONFIG_PARAMETERS`, `PAGER`, `LD_PRELOAD`).
    RunsCode,
    /// A shell reads it when it starts (`BASH_ENV`, `PROMPT_COMMAND`).
    StartsShells,
    /// A `PATH` that puts a directory before the ones it had, or holds a
    /// relative or empty entry (the working directory): a program of that
    /// name would run instead of the one the text names.
    PathShadows,
}

impl NotCarried {
    /// A few words for the answer's note.
    pub fn reason(self) -> &'static str {
        match self {
            Self::RunsCode => "turns into code or a program to run",
            Self::StartsShells => "read by every shell that starts",
            Self::PathShadows => {
                "puts directories before the existing PATH (append instead: PATH=\"$PATH:DIR\")"
            }
        }
    }
}

/// Read by bash (or any POSIX shell) as it starts, or when it prompts.
const SHELL_STARTUP: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "INPUTRC",
];

/// Names whose value some common program runs, loads or obeys as options
/// that run code.
const RUNS_CODE: &[&str] = &[
    "TAR_OPTIONS",
    "LESSOPEN",
    "LESSCLOSE",
    "LESS",
    "LESSKEY",
    "LESSKEYIN",
    "PAGER",
    "MANPAGER",
    "MANOPT",
    "SYSTEMD_PAGER",
    "EDITOR",
    "VISUAL",
    "SUDO_EDITOR",
    "SUDO_ASKPASS",
    "SSH_ASKPASS",
    "BROWSER",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5DB",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "MAKEFLAGS",
    "MFLAGS",
    "GNUMAKEFLAGS",
    "CURL_HOME",
    "WGETRC",
    "XDG_CONFIG_HOME",
    "ZDOTDIR",
    "HOME",
];

/// Prefixes of families that load libraries or change the loader.
const RUNS_CODE_PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_"];

/// The `GIT_*` names that carry; every other `GIT_*` does not (git has
/// dozens that run programs or inject configuration: `GIT_CONFIG_*`,
/// `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`, `GIT_EXTERNAL_DIFF`, `GIT_SSH*`,
/// `GIT_ASKPASS`, `GIT_PAGER`, `GIT_EXEC_PATH`, `GIT_TEMPLATE_DIR`,
/// `GIT_PROXY_COMMAND`...).
const GIT_CARRIED: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_TERMINAL_PROMPT",
    "GIT_OPTIONAL_LOCKS",
    "GIT_LFS_SKIP_SMUDGE",
    "GIT_MERGE_AUTOEDIT",
    "GIT_CEILING_DIRECTORIES",
    "GIT_FLUSH",
];

/// Whether a command that ended with `name` exported as `after` (`None`:
/// unset), having started with `before`, may pass that on to the
/// session's later calls. Names bash manages itself are the caller's
/// business; this judges only what a later command would do with the value.
///
/// # Errors
/// [`NotCarried`] with the reason when it may not.
pub fn export_carries(
    name: &str,
    before: Option<&OsStr>,
    after: Option<&OsStr>,
) -> Result<(), NotCarried> {
    if SHELL_STARTUP.contains(&name) || name.starts_with("BASH") {
        return Err(NotCarried::StartsShells);
    }
    let git_code = name.starts_with("GIT_") && !GIT_CARRIED.contains(&name);
    if git_code
        || RUNS_CODE.contains(&name)
        || RUNS_CODE_PREFIXES.iter().any(|p| name.starts_with(p))
    {
        return Err(NotCarried::RunsCode);
    }
    if name == "PATH"
        && let Some(after) = after
        && !path_only_appends(before, after)
    {
        return Err(NotCarried::PathShadows);
    }
    Ok(())
}

/// Whether `after` is `before` with directories added at the end only,
/// none of them relative or empty (which mean the working directory).
fn path_only_appends(before: Option<&OsStr>, after: &OsStr) -> bool {
    let entries = |value: &OsStr| -> Vec<Vec<u8>> {
        value
            .as_bytes()
            .split(|byte| *byte == b':')
            .map(<[u8]>::to_vec)
            .collect()
    };
    let old = before.map(entries).unwrap_or_default();
    let new = entries(after);
    new.len() >= old.len()
        && new[..old.len()] == old[..]
        && new[old.len()..].iter().all(|entry| entry.starts_with(b"/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carries(name: &str, before: Option<&str>, after: Option<&str>) -> Result<(), NotCarried> {
        export_carries(name, before.map(OsStr::new), after.map(OsStr::new))
    }

    #[test]
    fn variables_that_turn_into_code_do_not_carry() {
        for name in [
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "GIT_CONFIG_GLOBAL",
            "GIT_EDITOR",
            "GIT_SEQUENCE_EDITOR",
            "GIT_EXTERNAL_DIFF",
            "GIT_SSH",
            "GIT_SSH_COMMAND",
            "GIT_ASKPASS",
            "GIT_PAGER",
            "GIT_EXEC_PATH",
            "TAR_OPTIONS",
            "LESSOPEN",
            "LESSCLOSE",
            "PAGER",
            "EDITOR",
            "VISUAL",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "DYLD_INSERT_LIBRARIES",
            "PYTHONSTARTUP",
            "NODE_OPTIONS",
            "PERL5OPT",
            "RUBYOPT",
            "JAVA_TOOL_OPTIONS",
        ] {
            assert_eq!(
                carries(name, None, Some("x")),
                Err(NotCarried::RunsCode),
                "{name}"
            );
            assert!(carries(name, Some("x"), None).is_err(), "{name} unset");
        }
        for name in [
            "BASH_ENV",
            "ENV",
            "PROMPT_COMMAND",
            "PS1",
            "PS4",
            "SHELLOPTS",
            "BASH_FUNC_ls%%",
        ] {
            assert_eq!(
                carries(name, None, Some("x")),
                Err(NotCarried::StartsShells),
                "{name}"
            );
        }
    }

    #[test]
    fn ordinary_variables_carry() {
        for name in [
            "FOO",
            "RUST_LOG",
            "NODE_ENV",
            "PYTHONPATH",
            "CARGO_TARGET_DIR",
            "GIT_AUTHOR_NAME",
            "GIT_WORK_TREE",
            "LANG",
        ] {
            assert_eq!(carries(name, None, Some("1")), Ok(()), "{name}");
        }
    }

    #[test]
    fn a_path_carries_only_when_it_appends_absolute_directories() {
        let old = Some("/usr/bin:/bin");
        assert_eq!(carries("PATH", old, Some("/usr/bin:/bin:/x")), Ok(()));
        assert_eq!(carries("PATH", old, Some("/usr/bin:/bin")), Ok(()));
        assert_eq!(carries("PATH", old, None), Ok(()));
        for shadowing in [
            "/x:/usr/bin:/bin",
            "/usr/bin:/bin:.",
            "/usr/bin:/bin:",
            "/usr/bin:/bin:bin",
            "/bin:/usr/bin",
            "/tmp",
        ] {
            assert_eq!(
                carries("PATH", old, Some(shadowing)),
                Err(NotCarried::PathShadows),
                "{shadowing}"
            );
        }
    }
}
