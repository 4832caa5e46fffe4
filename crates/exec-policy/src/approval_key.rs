//! What a remembered approval is bound to: the effect of a command, not its
//! words. One [`ApprovalKey`] per program a command runs: the resolved
//! executable, the argument vector, the working directory, the values of
//! the environment variables that change what the program does, and the
//! content digests of the executable and of the script it runs. The pure
//! part lives here (which variables matter, which argument is a script);
//! resolving paths and hashing files is the caller's I/O, so the same key
//! can be built from a command's text before it runs or from an exec
//! request (path, argv, cwd, environment) when it happens.

use std::collections::HashMap;

/// One program run, as an approval binds to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApprovalKey {
    /// The executable's canonical path (symlinks resolved), or
    /// `builtin:NAME` for a shell builtin, or `unresolved:NAME` when no
    /// file was found.
    pub exe: String,
    /// The argument vector, the program word first (words whose value is
    /// known only at run time as written).
    pub argv: Vec<String>,
    /// The directory it runs in.
    pub cwd: String,
    /// The values of the variables that matter ([`bound_env`]).
    pub env: Vec<(String, Option<String>)>,
    /// The digest of the executable's content, when it is a file.
    pub exe_digest: Option<String>,
    /// The digest of the script it runs ([`script_operand`]), `missing`
    /// when that file does not exist.
    pub script_digest: Option<String>,
}

/// One simple command as the analysis sees it: what an approval key is
/// built from before the command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCommand {
    /// The argument vector after unwrapping (`sudo`, `env`, `nice`...).
    pub argv: Vec<String>,
    /// The directory it runs in, when a literal `cd` earlier in the same
    /// command made it known (else the command's own directory).
    pub cwd: Option<String>,
}

/// Variables whose values change what a program does or which program a
/// name finds, whatever the command's text says.
pub const BOUND_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "BASH_ENV",
    "ENV",
    "CDPATH",
    "IFS",
    "SHELLOPTS",
    "BASHOPTS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
];

/// The values of the variables an approval binds to, sorted by name: the
/// [`BOUND_VARIABLES`], every exported function (`BASH_FUNC_*`, which
/// shadows a program of the same name), and `extra` (the variables the
/// command uses or sets). Unset variables count, as `None`.
pub fn bound_env(env: &HashMap<String, String>, extra: &[&str]) -> Vec<(String, Option<String>)> {
    let mut names: Vec<&str> = BOUND_VARIABLES.to_vec();
    names.extend(extra.iter().copied());
    names.extend(
        env.keys()
            .map(String::as_str)
            .filter(|name| name.starts_with("BASH_FUNC_")),
    );
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| (name.to_owned(), env.get(name).cloned()))
        .collect()
}

/// Bash builtins: they run in the shell, no file of their own.
const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// Bash's reserved words.
const KEYWORDS: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// Whether `name` is a bash builtin (it runs in the shell, no exec).
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name)
}

/// Whether `name` is a bash reserved word (`if`, `for`, `time`...).
pub fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name)
}

/// Whether `program` (a basename) reads its program from a file operand.
fn is_interpreter(program: &str) -> bool {
    matches!(
        program,
        "bash"
            | "sh"
            | "dash"
            | "zsh"
            | "ksh"
            | "mksh"
            | "fish"
            | "perl"
            | "ruby"
            | "node"
            | "nodejs"
            | "php"
            | "lua"
            | "Rscript"
            | "tclsh"
            | "deno"
            | "bun"
    ) || program
        .strip_prefix("python")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The file whose content decides what `argv` runs besides its executable:
/// the operand of `source`/`.`, or the first operand of an interpreter
/// (`bash x.sh`, `python3 x.py`). `None` when the program runs inline code
/// (`-c`, `-e`, `-m`) or reads standard input.
pub fn script_operand(argv: &[String]) -> Option<&str> {
    let program = argv.first()?.rsplit('/').next()?;
    if matches!(program, "source" | ".") {
        return argv.get(1).map(String::as_str);
    }
    if !is_interpreter(program) {
        return None;
    }
    // `-e` is a shell's errexit but other interpreters' inline code.
    let shell = matches!(program, "bash" | "sh" | "dash" | "zsh" | "ksh" | "mksh");
    let mut rest = argv.iter().skip(1);
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--" => return rest.next().map(String::as_str),
            "-e" if shell => {}
            "-c" | "-e" | "-m" | "-E" | "--eval" | "--command" | "-" => return None,
            // Options that take a value: the value is no script.
            "-W" | "-X" | "-o" | "-O" | "-I" | "-r" | "--require" => {
                rest.next();
            }
            option if option.starts_with('-') || option.starts_with('+') => {}
            script => return Some(script),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn scripts_are_found_behind_interpreters_and_source() {
        for (words, script) in [
            (&["bash", "x.sh"][..], Some("x.sh")),
            (&["/bin/sh", "-e", "x.sh"][..], Some("x.sh")),
            (&["perl", "-e", "print 1"][..], None),
            (&["sh", "-x", "x.sh", "a"][..], Some("x.sh")),
            (&["source", "lib.sh"][..], Some("lib.sh")),
            (&[".", "./lib.sh"][..], Some("./lib.sh")),
            (&["python3", "-u", "x.py"][..], Some("x.py")),
            (&["python3.12", "-W", "ignore", "x.py"][..], Some("x.py")),
            (&["python3", "-c", "print(1)"][..], None),
            (&["python3", "-m", "http.server"][..], None),
            (&["bash", "--", "x.sh"][..], Some("x.sh")),
            (&["bash"][..], None),
            (&["ls", "x.sh"][..], None),
            (&["pythonista", "x.py"][..], None),
        ] {
            assert_eq!(script_operand(&argv(words)), script, "{words:?}");
        }
    }

    #[test]
    fn the_bound_environment_names_what_matters_and_nothing_else() {
        let env = HashMap::from([
            ("PATH".to_owned(), "/bin".to_owned()),
            ("BASH_FUNC_deploy%%".to_owned(), "() { :; }".to_owned()),
            ("UNRELATED".to_owned(), "x".to_owned()),
            ("FOO".to_owned(), "1".to_owned()),
        ]);
        let bound = bound_env(&env, &["FOO"]);
        let get = |name: &str| {
            bound
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("PATH"), Some(Some("/bin".to_owned())));
        assert_eq!(get("HOME"), Some(None));
        assert_eq!(get("FOO"), Some(Some("1".to_owned())));
        assert!(get("BASH_FUNC_deploy%%").is_some());
        assert_eq!(get("UNRELATED"), None);
        let mut changed = env.clone();
        changed.insert("HOME".to_owned(), "/elsewhere".to_owned());
        assert_ne!(bound, bound_env(&changed, &["FOO"]));
        changed = env.clone();
        changed.insert("UNRELATED".to_owned(), "y".to_owned());
        assert_eq!(bound, bound_env(&changed, &["FOO"]));
    }
}
