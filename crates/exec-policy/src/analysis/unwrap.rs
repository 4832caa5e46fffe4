//! Wrappers (`sudo`, `env`, `xargs`, `find -exec`, ...) and nested-script
//! launchers (`bash -c`, `eval`, `su -c`): what runs inside them.

use super::words::Word;

/// What to do with a command whose program is `program`.
pub(crate) enum Step {
    /// Not a wrapper: analyse as is.
    Done,
    /// Drop this many leading words (wrapper and its options).
    Strip(usize),
    /// Analyse this script instead (`bash -c`, `eval`).
    Script(String),
    /// Analyse this script with these arguments (`bash -c SCRIPT $0 $1...`).
    ShellScript(String, Vec<Word>),
    /// Analyse this inner command (find -exec, xargs); the outer stays too.
    Exec(Vec<Word>),
}

/// Options of wrappers that take a separate value.
fn option_takes_value(program: &str, option: &str) -> bool {
    let list: &[&str] = match program {
        "sudo" => &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--close-from",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "--unset", "--chdir", "-S", "--split-string"],
        "nice" => &["-n", "--adjustment"],
        // The dynamic loader run as a program: `ld.so [OPTIONS] PROGRAM ARGS`.
        LOADER => &[
            "--argv0",
            "--library-path",
            "--preload",
            "--audit",
            "--inhibit-rpath",
            "--glibc-hwcaps-prefix",
            "--glibc-hwcaps-mask",
        ],
        "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
        "time" => &["-f", "-o", "--format", "--output"],
        "exec" => &["-a"],
        "xargs" => &[
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--delimiter",
            "--arg-file",
            "--replace",
        ],
        "chroot" => &["--userspec", "--groups"],
        "flock" => &["-w", "-E", "--timeout", "--conflict-exit-code"],
        "watch" => &["-n", "-d", "--interval"],
        "prlimit" => &["-p", "--pid", "-o", "--output"],
        "ssh-agent" => &["-a", "-E", "-t", "-P", "-O"],
        "runuser" => &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-G",
            "--supp-group",
            "-s",
            "--shell",
            "-w",
            "--whitelist-environment",
        ],
        "setpriv" => &[
            "--reuid",
            "--regid",
            "--ruid",
            "--rgid",
            "--euid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--pdeathsig",
            "--selinux-label",
            "--apparmor-profile",
            "--landlock-access",
            "--landlock-rule",
        ],
        "unshare" => &[
            "-S",
            "-G",
            "-R",
            "-w",
            "--setuid",
            "--setgid",
            "--root",
            "--wd",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "--propagation",
        ],
        "nsenter" => &[
            "-t",
            "--target",
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "-N",
            "--net-socket",
        ],
        "chrt" => &[
            "-T",
            "-P",
            "-D",
            "--sched-runtime",
            "--sched-period",
            "--sched-deadline",
        ],
        "pkexec" => &["--user", "-u"],
        "systemd-run" => &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "--description",
            "--slice",
            "-E",
            "--setenv",
            "--uid",
            "--gid",
            "--nice",
            "-M",
            "--machine",
            "-H",
            "--host",
            "--working-directory",
            "--service-type",
            "--timer-property",
            "--path-property",
            "--socket-property",
            "--on-active",
            "--on-boot",
            "--on-startup",
            "--on-unit-active",
            "--on-unit-inactive",
            "--on-calendar",
            "--expand-environment",
        ],
        "strace" => &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-I", "-O", "-S", "-P", "-X", "-b",
            "--output", "--attach", "--user", "--env",
        ],
        "ltrace" => &[
            "-o",
            "-e",
            "-p",
            "-s",
            "-u",
            "-a",
            "-n",
            "-l",
            "-A",
            "-D",
            "-F",
            "-x",
            "-L",
            "--output",
            "--library",
        ],
        // Everything else (nohup, command, setsid, ...) takes no option values.
        _ => &[],
    };
    list.contains(&option)
}

/// The name the dynamic loader's options are listed under.
const LOADER: &str = "ld.so";

/// Whether `program` is a dynamic loader's file name (`ld-linux-x86-64.so.2`,
/// `ld-linux-aarch64.so.1`, `ld.so`, `ld64.so.2`, `ld-musl-x86_64.so.1`):
/// run as a program it runs the program named by its first operand.
fn is_dynamic_loader(program: &str) -> bool {
    program == LOADER
        || ((program.starts_with("ld-") || program.starts_with("ld64.")) && program.contains(".so"))
}

/// The next unwrapping step for `words`, whose program's name is `program`.
pub(crate) fn unwrap_step(program: &str, words: &[Word]) -> Step {
    if is_dynamic_loader(program) {
        return wrapper_step(LOADER, words);
    }
    match program {
        "sudo" | "doas" | "env" | "nice" | "ionice" | "nohup" | "stdbuf" | "time" | "command"
        | "builtin" | "exec" | "timeout" | "setsid" | "chroot" | "flock" | "taskset"
        | "unbuffer" | "watch" | "setpriv" | "unshare" | "nsenter" | "chrt" | "pkexec"
        | "systemd-run" | "strace" | "ltrace" | "prlimit" | "ssh-agent" | "dbus-run-session"
        | "eatmydata" => wrapper_step(program, words),
        // `trap 'CMD' SIGNAL...`: the handler runs later in this shell.
        "trap" if words.len() >= 3 && words[1].value() == Some("--") => words
            .get(2)
            .and_then(Word::value)
            .filter(|v| *v != "-")
            .map_or(Step::Done, |v| Step::Script(v.to_owned())),
        "trap" if words.len() >= 3 => words[1]
            .value()
            .filter(|v| *v != "-")
            .map_or(Step::Done, |v| Step::Script(v.to_owned())),
        // `runuser -u USER cmd` wraps; `runuser [-l] USER -c CMD` runs a script.
        "runuser" => cluster_value(words, 'c', &["--command"]).map_or_else(
            || {
                if words
                    .iter()
                    .any(|w| matches!(w.value(), Some("-u" | "--user")))
                {
                    wrapper_step(program, words)
                } else {
                    Step::Done
                }
            },
            Step::Script,
        ),
        // `sg GROUP [-c] CMD`: the command is a shell string.
        "sg" => sg_step(words),
        "busybox" | "toybox" => Step::Strip(1),
        // `coreutils --coreutils-prog=rm ...`: the multi-call binary.
        "coreutils" => match words.get(1).and_then(Word::value) {
            Some(v) if v.starts_with("--coreutils-prog=") => {
                let mut inner = vec![Word::literal(&v["--coreutils-prog=".len()..])];
                inner.extend(words[2..].iter().cloned());
                Step::Exec(inner)
            }
            _ => Step::Done,
        },
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "mksh" | "fish" | "tcsh" | "csh"
        | "rbash" | "yash" | "posh" => shell_step(words),
        "su" | "script" => {
            cluster_value(words, 'c', &["--command"]).map_or(Step::Done, Step::Script)
        }
        "eval" => Step::Script(
            words[1..]
                .iter()
                .map(Word::display)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "alias" => {
            let bodies: Vec<String> = words[1..]
                .iter()
                .filter_map(|w| {
                    w.value()
                        .and_then(|v| v.split_once('='))
                        .map(|(_, body)| body.to_owned())
                })
                .collect();
            if bodies.is_empty() {
                Step::Done
            } else {
                Step::Script(bodies.join("\n"))
            }
        }
        "xargs" => {
            let rest = skip_options(program, &words[1..]);
            let inner = words[1 + rest..].to_vec();
            if inner.is_empty() {
                Step::Done
            } else {
                Step::Exec(inner)
            }
        }
        "find" => find_exec(words).map_or(Step::Done, Step::Exec),
        _ => Step::Done,
    }
}

/// Counts the option words after a wrapper's name (and its fixed operands),
/// at most `rest.len()`.
fn skip_options(program: &str, rest: &[Word]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        let Some(word) = rest[i].value() else { break };
        if word == "--" {
            i += 1;
            break;
        }
        if program == "env" && word.contains('=') && !word.starts_with('-') {
            i += 1;
            continue;
        }
        if !word.starts_with('-') || word == "-" {
            break;
        }
        if program == "command" && (word == "-v" || word == "-V") {
            // `command -v rm` only looks the name up.
            return rest.len();
        }
        let (name, inline_value) = match word.split_once('=') {
            Some((name, _)) => (name, true),
            None => (word, false),
        };
        i += 1;
        if !inline_value && option_takes_value(program, name) {
            i += 1;
        } else if !inline_value && !name.starts_with("--") {
            // A cluster (`-iu USER`): getopt reads flags until one takes a
            // value, which is the rest of the word or, at its end, the next.
            let letters: Vec<char> = name.chars().skip(1).collect();
            if let Some(at) = letters
                .iter()
                .position(|c| option_takes_value(program, &format!("-{c}")))
                && at + 1 == letters.len()
            {
                i += 1;
            }
        }
    }
    // Fixed operands before the wrapped command. Never past the end: an
    // option missing its value (`xargs -I`) must not make callers slice out
    // of range (fuzzing: `analyzer_grammar` panicked on it).
    let skipped = match program {
        "timeout" | "chroot" | "flock" | "taskset" | "chrt" => i + 1,
        _ => i,
    };
    skipped.min(rest.len())
}

fn wrapper_step(program: &str, words: &[Word]) -> Step {
    if program == "flock"
        && let Some(script) = cluster_value(words, 'c', &["--command"])
    {
        return Step::Script(script);
    }
    if program == "env"
        && let Some(script) = flag_value(words, &["-S", "--split-string"])
    {
        return Step::Script(script);
    }
    if program == "watch" {
        let rest = skip_options(program, &words[1..]);
        let script = words[1 + rest..]
            .iter()
            .map(Word::display)
            .collect::<Vec<_>>()
            .join(" ");
        return Step::Script(script);
    }
    Step::Strip(1 + skip_options(program, &words[1..]))
}

/// Shell options that take a value (`-o pipefail`, `-O extglob`, `+o`).
fn shell_option_takes_value(option: &str) -> bool {
    matches!(
        option,
        "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file"
    )
}

/// What a shell is given to run: `-c SCRIPT [ARG0 ARGS...]`, a script
/// file and its arguments, or (neither) its standard input.
pub(crate) enum ShellInput {
    /// `-c`: the script and its `$0`, `$1`... words.
    Command(String, Vec<Word>),
    /// A script file operand.
    File(Word),
    /// No operand, or `-s`: the script is read from standard input.
    Stdin,
}

/// How a shell command line gives the shell its script.
pub(crate) fn shell_input(words: &[Word]) -> Option<ShellInput> {
    let mut has_c = false;
    let mut from_stdin = false;
    let mut i = 1;
    while i < words.len() {
        let value = words[i].value()?;
        if value == "--" || value == "-" {
            i += 1;
            break;
        }
        if shell_option_takes_value(value) {
            i += 2;
            continue;
        }
        if (value.starts_with('-') || value.starts_with('+')) && value.len() > 1 {
            if !value.starts_with("--") {
                let letters = &value[1..];
                has_c |= letters.contains('c');
                from_stdin |= letters.contains('s');
                // `-co pipefail`: a value-taking letter last takes the next word.
                if letters.ends_with(['o', 'O']) {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        break;
    }
    let rest = words.get(i..).unwrap_or_default();
    if has_c {
        let (script, args) = rest.split_first()?;
        return Some(ShellInput::Command(
            script.display().to_owned(),
            args.to_vec(),
        ));
    }
    match rest.first() {
        Some(file) if !from_stdin => Some(ShellInput::File(file.clone())),
        _ => Some(ShellInput::Stdin),
    }
}

/// `bash [-opts] -c SCRIPT [ARGS]`; a script file or stdin is the walk's.
fn shell_step(words: &[Word]) -> Step {
    match shell_input(words) {
        Some(ShellInput::Command(script, args)) => Step::ShellScript(script, args),
        _ => Step::Done,
    }
}

/// What `words` print, when that is known without running anything:
/// `echo`, `printf`, `cat` of its input, `pwd`, `which`/`command -v`,
/// `dirname`/`basename`/`realpath`, `rev` and `base64 -d` of their input.
pub(crate) fn literal_output(
    words: &[Word],
    stdin: Option<&str>,
    cwd: Option<&str>,
) -> Option<String> {
    let program = super::paths::basename(words.first()?.value()?);
    let args: Vec<&str> = words[1..]
        .iter()
        .map(Word::value)
        .collect::<Option<Vec<_>>>()?;
    match program {
        "echo" => {
            let mut newline = true;
            let mut escapes = false;
            let mut rest = args.as_slice();
            while let Some((first, tail)) = rest.split_first() {
                let flags = first
                    .strip_prefix('-')
                    .filter(|f| !f.is_empty() && f.chars().all(|c| matches!(c, 'n' | 'e' | 'E')));
                let Some(flags) = flags else { break };
                newline &= !flags.contains('n');
                escapes |= flags.contains('e');
                rest = tail;
            }
            let mut text = rest.join(" ");
            if escapes {
                text = super::words::ansi_c(&text);
            }
            if newline {
                text.push('\n');
            }
            Some(text)
        }
        "printf" => {
            let args = match args.first() {
                Some(&"--") => &args[1..],
                Some(first) if first.starts_with('-') => return None,
                _ => &args[..],
            };
            let (format, values) = args.split_first()?;
            Some(printf(format, values))
        }
        "cat" if args.is_empty() || args == ["-"] => stdin.map(str::to_owned),
        ":" | "true" | "false" => Some(String::new()),
        // `ls -d PATH...` prints the paths as given.
        "ls" if args
            .iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('d')) =>
        {
            let paths: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !a.starts_with('-'))
                .collect();
            (!paths.is_empty() && !paths.iter().any(|p| crate::glob::has_glob(p)))
                .then(|| paths.iter().map(|p| format!("{p}\n")).collect())
        }
        "pwd" => cwd.map(|cwd| format!("{cwd}\n")),
        "which" | "command" | "type" => {
            let name = args.iter().rfind(|a| !a.starts_with('-'))?;
            let looks_up =
                program == "which" || args.iter().any(|a| matches!(*a, "-v" | "-P" | "-p"));
            (looks_up && !name.contains('/')).then(|| format!("/usr/bin/{name}\n"))
        }
        "dirname" | "basename" | "realpath" | "readlink" => {
            let path = args.iter().rfind(|a| !a.starts_with('-'))?;
            let absolute = super::paths::join_path(cwd.unwrap_or(""), path);
            let parts = super::paths::components(&absolute);
            let text = match program {
                "dirname" => match path.trim_end_matches('/').rsplit_once('/') {
                    Some(("", _)) => "/".to_owned(),
                    Some((dir, _)) => dir.to_owned(),
                    None => ".".to_owned(),
                },
                "basename" => path.trim_end_matches('/').rsplit('/').next()?.to_owned(),
                _ if path.starts_with('/') || cwd.is_some() => format!("/{}", parts.join("/")),
                _ => return None,
            };
            Some(format!("{text}\n"))
        }
        // `tr A-Z a-z` and the class spelling: case conversion.
        "tr" if args.len() == 2 => {
            let lower = matches!(args[1], "a-z" | "[:lower:]" | "[a-z]");
            let upper = matches!(args[1], "A-Z" | "[:upper:]" | "[A-Z]");
            let text = stdin?;
            if lower && matches!(args[0], "A-Z" | "[:upper:]" | "[A-Z]") {
                Some(text.to_ascii_lowercase())
            } else if upper && matches!(args[0], "a-z" | "[:lower:]" | "[a-z]") {
                Some(text.to_ascii_uppercase())
            } else {
                None
            }
        }
        "rev" if args.is_empty() => Some(
            stdin?
                .lines()
                .map(|line| format!("{}\n", line.chars().rev().collect::<String>()))
                .collect(),
        ),
        "base64" if args.iter().any(|a| matches!(*a, "-d" | "--decode" | "-di")) => {
            base64_decode(stdin?)
        }
        _ => None,
    }
}

/// `printf FORMAT ARGS...` for `%s`, `%b`, `%d`, `%c`, `%%` and the usual
/// escapes, the format reused while arguments remain.
fn printf(format: &str, values: &[&str]) -> String {
    let format = super::words::ansi_c(format);
    let mut out = String::new();
    let mut next = 0;
    loop {
        let mut chars = format.chars().peekable();
        let mut used = false;
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            // Flags and width are skipped.
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '.' | '#' | ' ' | '+'))
            {
                chars.next();
            }
            match chars.next() {
                Some(kind @ ('s' | 'b' | 'd' | 'i' | 'c' | 'q' | 'x' | 'o' | 'u' | 'f')) => {
                    let value = values.get(next).copied().unwrap_or("");
                    next += 1;
                    used = true;
                    match kind {
                        'b' => out.push_str(&super::words::ansi_c(value)),
                        'c' => out.extend(value.chars().next()),
                        _ => out.push_str(value),
                    }
                }
                Some('%') | None => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
            }
        }
        if !used || next >= values.len() {
            break;
        }
    }
    out
}

/// Standard base64 (padding optional, whitespace ignored).
fn base64_decode(text: &str) -> Option<String> {
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.chars().filter(|c| !c.is_whitespace() && *c != '=') {
        let value = match c {
            'A'..='Z' => u32::from(c) - u32::from('A'),
            'a'..='z' => u32::from(c) - u32::from('a') + 26,
            '0'..='9' => u32::from(c) - u32::from('0') + 52,
            '+' | '-' => 62,
            '/' | '_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from((bits >> count) & 0xff).ok()?);
        }
    }
    String::from_utf8(out).ok()
}

/// The file an `xargs` reads its items from (`-a FILE`, `--arg-file`),
/// among its own options.
pub(crate) fn xargs_arg_file(words: &[Word]) -> Option<String> {
    let mut i = 1;
    while i < words.len() {
        let value = words[i].value()?;
        if value == "--" || !value.starts_with('-') || value == "-" {
            return None;
        }
        if value == "-a" || value == "--arg-file" {
            return words.get(i + 1)?.value().map(str::to_owned);
        }
        if let Some(path) = value
            .strip_prefix("--arg-file=")
            .or_else(|| value.strip_prefix("-a"))
        {
            return Some(path.to_owned());
        }
        if option_takes_value("xargs", value) {
            i += 1;
        }
        i += 1;
    }
    None
}

/// The commands an `xargs` runs when its input is `input`: the command
/// with the input's items appended, or with each line put in place of the
/// `-I` string. `None` when the command line is not understood.
pub(crate) fn xargs_feed(words: &[Word], input: &str) -> Option<Vec<Vec<Word>>> {
    let mut replace: Option<String> = None;
    let mut nul = false;
    let mut i = 1;
    while i < words.len() {
        let value = words[i].value()?;
        if value == "--" {
            i += 1;
            break;
        }
        if !value.starts_with('-') || value == "-" {
            break;
        }
        if value == "-0" || value == "--null" {
            nul = true;
        } else if value == "-I" {
            replace = Some(words.get(i + 1)?.value()?.to_owned());
            i += 1;
        } else if let Some(r) = value.strip_prefix("-I") {
            replace = Some(r.to_owned());
        } else if value == "-i" || value == "--replace" {
            replace = Some("{}".to_owned());
        } else if let Some(r) = value.strip_prefix("--replace=") {
            replace = Some(r.to_owned());
        } else if option_takes_value("xargs", value) {
            i += 1;
        }
        i += 1;
    }
    let inner = words.get(i..).unwrap_or_default();
    let inner: Vec<Word> = if inner.is_empty() {
        vec![Word::literal("echo")]
    } else {
        inner.to_vec()
    };
    let items: Vec<&str> = if nul {
        input
            .split(['\0', '\n'])
            .filter(|s| !s.is_empty())
            .collect()
    } else if replace.is_some() {
        input.lines().filter(|s| !s.trim().is_empty()).collect()
    } else {
        input.split_whitespace().collect()
    };
    Some(match replace {
        Some(placeholder) => items
            .iter()
            .take(16)
            .map(|item| substitute(&inner, &placeholder, item))
            .collect(),
        None => {
            let mut command = inner;
            command.extend(items.iter().map(|item| Word::literal(item)));
            vec![command]
        }
    })
}

/// `words` with `placeholder` replaced by `item` in every word.
fn substitute(words: &[Word], placeholder: &str, item: &str) -> Vec<Word> {
    words
        .iter()
        .map(|w| match w.value() {
            Some(v) if v.contains(placeholder) => Word::literal(&v.replace(placeholder, item)),
            _ => w.clone(),
        })
        .collect()
}

/// GNU parallel's options that take a value.
const PARALLEL_VALUED: &[&str] = &[
    "-j",
    "--jobs",
    "-P",
    "-S",
    "--sshlogin",
    "-N",
    "-n",
    "--max-args",
    "-I",
    "-d",
    "--delimiter",
    "-a",
    "--arg-file",
    "--joblog",
    "--results",
    "--tmpdir",
    "--timeout",
    "--delay",
    "-L",
    "--retries",
    "--colsep",
    "--tagstring",
    "--workdir",
    "--env",
];

/// The commands GNU `parallel` runs: its command with each argument after
/// `:::` (or each line of `input`) appended or put in place of `{}`; with
/// no command, each argument is a command line.
pub(crate) fn parallel_feed(words: &[Word], input: Option<&str>) -> Option<Vec<String>> {
    let mut i = 1;
    while i < words.len() {
        let value = words[i].value()?;
        if value == "--" {
            i += 1;
            break;
        }
        if !value.starts_with('-') || value == ":::" || value == "::::" {
            break;
        }
        if PARALLEL_VALUED.contains(&value) {
            i += 1;
        }
        i += 1;
    }
    let rest = words.get(i..).unwrap_or_default();
    let split = rest
        .iter()
        .position(|w| matches!(w.value(), Some(":::" | ":::+")));
    let (command, args): (Vec<&str>, Vec<&str>) = match split {
        Some(at) => (
            rest[..at].iter().filter_map(Word::value).collect(),
            rest[at + 1..]
                .iter()
                .filter_map(Word::value)
                .filter(|v| !v.starts_with(":::"))
                .collect(),
        ),
        None => (
            rest.iter().filter_map(Word::value).collect(),
            input?.lines().filter(|l| !l.trim().is_empty()).collect(),
        ),
    };
    Some(
        args.iter()
            .take(16)
            .map(|arg| {
                if command.is_empty() {
                    (*arg).to_owned()
                } else if command.iter().any(|w| w.contains("{}")) {
                    command.join(" ").replace("{}", arg)
                } else {
                    format!("{} {arg}", command.join(" "))
                }
            })
            .collect(),
    )
}

/// `sg [-] GROUP [-c] COMMAND`: the command string, if any.
fn sg_step(words: &[Word]) -> Step {
    let mut rest = words.iter().skip(1).skip_while(|w| w.value() == Some("-"));
    if rest.next().is_none() {
        return Step::Done;
    }
    let mut next = rest.next();
    if next.and_then(Word::value) == Some("-c") {
        next = rest.next();
    }
    next.map_or(Step::Done, |w| Step::Script(w.display().to_owned()))
}

/// The value of a short flag `-X`, also when clustered (`-lc CMD`), or of
/// one of the `long` flags (separate or `--flag=value`).
fn cluster_value(words: &[Word], short: char, long: &[&str]) -> Option<String> {
    for (i, word) in words.iter().enumerate().skip(1) {
        let Some(value) = word.value() else { continue };
        if value.len() > 1
            && value.starts_with('-')
            && !value.starts_with("--")
            && value.ends_with(short)
            && value[1..].chars().all(|c| c.is_ascii_alphabetic())
        {
            return words.get(i + 1).map(|w| w.display().to_owned());
        }
    }
    flag_value(words, long)
}

/// The value after the first of `flags` (separate or `--flag=value`).
fn flag_value(words: &[Word], flags: &[&str]) -> Option<String> {
    for (i, word) in words.iter().enumerate() {
        let value = word.value()?;
        for flag in flags {
            if value == *flag {
                return words.get(i + 1).map(|w| w.display().to_owned());
            }
            if let Some(inline) = value
                .strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
            {
                return Some(inline.to_owned());
            }
        }
    }
    None
}

/// The first `-exec`/`-execdir`/`-ok` command of a `find`, `{}` included.
fn find_exec(words: &[Word]) -> Option<Vec<Word>> {
    let start = words
        .iter()
        .position(|w| matches!(w.value(), Some("-exec" | "-execdir" | "-ok" | "-okdir")))?;
    let inner: Vec<Word> = words[start + 1..]
        .iter()
        .take_while(|w| !matches!(w.value(), Some(";" | "+")))
        .cloned()
        .collect();
    (!inner.is_empty()).then_some(inner)
}

/// The start paths of a `find` (words after its leading options `-H`,
/// `-L`, `-P`, `-O3`, `-D OPTS`, before the first expression), `.` if none.
pub(crate) fn find_start_paths(words: &[Word]) -> Vec<Word> {
    let mut rest = words.iter().skip(1).peekable();
    while let Some(word) = rest.peek() {
        match word.value() {
            Some("-H" | "-L" | "-P") => {
                rest.next();
            }
            Some("-D") => {
                rest.next();
                rest.next();
            }
            Some(v) if v.starts_with("-O") && v[2..].chars().all(|c| c.is_ascii_digit()) => {
                rest.next();
            }
            Some(v) if v.starts_with("-D") && v.len() > 2 => {
                rest.next();
            }
            _ => break,
        }
    }
    let paths: Vec<Word> = rest
        .take_while(|w| {
            w.value()
                .is_none_or(|v| !v.starts_with('-') && v != "(" && v != "!")
        })
        .cloned()
        .collect();
    if paths.is_empty() {
        vec![Word::literal(".")]
    } else {
        paths
    }
}

/// Whether a `find` selects entries by name, path, age or size in the
/// user's own files, so what it lists is not the whole tree (`find ~ -name
/// '*.swp' -delete`). A test whose pattern is a lone `*` selects
/// everything; in system paths every selection counts (`find /etc -name
/// '*.conf' -delete` breaks the system).
pub(crate) fn find_filters(words: &[Word], cwd: Option<&str>, home: &str) -> bool {
    let in_home = find_start_paths(words).iter().all(|w| {
        w.value().is_some_and(|v| {
            let path = match cwd {
                Some(cwd) => super::paths::join_path(cwd, v),
                None => v.to_owned(),
            };
            let parts = super::paths::components(&path);
            let home = super::paths::components(home);
            parts.len() >= home.len() && parts[..home.len()] == home[..]
        })
    });
    in_home && selects(words)
}

/// What a narrowed `find` lists for sure: `START/NAME` for a literal
/// `-name NAME` (`find ~ -maxdepth 1 -name .ssh` lists `~/.ssh`).
pub(crate) fn find_named_paths(words: &[Word]) -> Vec<Word> {
    let names: Vec<&str> = words
        .windows(2)
        .filter(|pair| matches!(pair[0].value(), Some("-name" | "-iname")))
        .filter_map(|pair| pair[1].value())
        .filter(|name| !crate::glob::has_glob(name) && !name.contains('/'))
        .collect();
    let [name] = names.as_slice() else {
        return Vec::new();
    };
    find_start_paths(words)
        .iter()
        .filter_map(Word::value)
        .map(|start| Word::literal(&super::paths::join_path(start, name)))
        .collect()
}

fn selects(words: &[Word]) -> bool {
    words.windows(2).any(|pair| {
        let test = pair[0].value().unwrap_or("");
        let value = pair[1].value();
        let named = matches!(
            test,
            "-name"
                | "-iname"
                | "-path"
                | "-ipath"
                | "-wholename"
                | "-iwholename"
                | "-regex"
                | "-iregex"
                | "-lname"
                | "-ilname"
        ) && !matches!(value, Some("*" | ".*" | "*/*"));
        let dated = matches!(
            test,
            "-mtime"
                | "-mmin"
                | "-atime"
                | "-amin"
                | "-ctime"
                | "-cmin"
                | "-newer"
                | "-size"
                | "-inum"
                | "-samefile"
                | "-links"
        );
        named || dated || test == "-empty"
    }) || words.last().and_then(Word::value) == Some("-empty")
}

/// Shell commands another program's own language runs, when they are
/// literal: `system("...")` and friends in an interpreter's one-liner or
/// an awk program, `rmtree`/`rm_rf`/`rmSync` of a literal path (as `rm
/// -rf PATH`), GNU sed's `e` command, a git `!` alias, tar's checkpoint
/// action, vim's `-c '!...'`, gdb's `--args`, and the recipes of a
/// Makefile read from standard input. Interpreter code stays out of reach
/// otherwise (docs/policy.md).
pub(crate) fn embedded_commands(words: &[Word], stdin: Option<&str>) -> Vec<String> {
    let Some(program) = words
        .first()
        .and_then(Word::value)
        .map(super::paths::basename)
    else {
        return Vec::new();
    };
    let interpreter = program.starts_with("python")
        || program.starts_with("perl")
        || program.starts_with("ruby")
        || program.starts_with("tclsh")
        || matches!(program, "node" | "nodejs" | "php" | "deno" | "bun" | "wish");
    let known = matches!(
        program,
        "awk"
            | "gawk"
            | "mawk"
            | "nawk"
            | "sed"
            | "git"
            | "tar"
            | "gtar"
            | "vim"
            | "vi"
            | "nvim"
            | "ex"
            | "view"
            | "gdb"
            | "make"
            | "gmake"
    );
    if !interpreter && !known {
        return Vec::new();
    }
    let values: Vec<&str> = words.iter().skip(1).filter_map(Word::value).collect();
    let after = |flags: &[&str]| -> Vec<&str> {
        values
            .windows(2)
            .filter(|pair| flags.contains(&pair[0]))
            .map(|pair| pair[1])
            .collect()
    };
    let mut out = Vec::new();
    if interpreter {
        let inline = after(&["-c", "-e", "-E", "-r", "--eval"]);
        for code in &inline {
            code_commands(code, &mut out);
        }
        // No code on the line: the program reads it from standard input
        // (`python3 - <<< CODE`, `python3 /dev/stdin`, `tclsh <<< CODE`).
        let operand = values
            .iter()
            .find(|value| !value.starts_with('-') || **value == "-");
        if inline.is_empty()
            && operand.is_none_or(|operand| matches!(*operand, "-" | "/dev/stdin"))
            && let Some(text) = stdin
        {
            code_commands(text, &mut out);
        }
    }
    match program {
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => {
            if let Some(code) = values.iter().find(|v| !v.starts_with('-')) {
                code_commands(code, &mut out);
            }
        }
        "sed" => {
            for script in values
                .iter()
                .filter(|v| !v.starts_with('-'))
                .take(1)
                .chain(after(&["-e", "--expression"]).iter())
            {
                for line in script.split([';', '\n']) {
                    let line = line.trim_start_matches(|c: char| {
                        c.is_ascii_digit() || c == '$' || c == ',' || c.is_whitespace()
                    });
                    if let Some(command) = line.strip_prefix("e ") {
                        out.push(command.to_owned());
                    }
                }
            }
        }
        "git" => {
            for config in after(&["-c"]) {
                if let Some((key, value)) = config.split_once('=')
                    && key.starts_with("alias.")
                    && let Some(command) = value.strip_prefix('!')
                {
                    out.push(command.to_owned());
                }
            }
        }
        "tar" | "gtar" => {
            for value in &values {
                for prefix in [
                    "--checkpoint-action=exec=",
                    "--to-command=",
                    "--info-script=",
                    "--new-volume-script=",
                ] {
                    if let Some(command) = value.strip_prefix(prefix) {
                        out.push(command.to_owned());
                    }
                }
            }
        }
        "vim" | "vi" | "nvim" | "ex" | "view" => {
            for command in after(&["-c", "--cmd"]) {
                if let Some(shell) = command.strip_prefix('!') {
                    out.push(shell.to_owned());
                }
            }
        }
        "gdb" => {
            if let Some(at) = values.iter().position(|v| *v == "--args") {
                out.push(values[at + 1..].join(" "));
            }
        }
        "make" | "gmake" => {
            let from_stdin = after(&["-f", "--file", "--makefile"])
                .iter()
                .any(|f| matches!(*f, "-" | "/dev/stdin"));
            if from_stdin && let Some(text) = stdin {
                for line in text.lines() {
                    if let Some(recipe) = line.strip_prefix('\t') {
                        out.push(recipe.trim_start_matches(['@', '-', '+']).to_owned());
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// The shell commands and deletions a one-liner's code spells with
/// literal strings (or the home, however the language names it), its
/// writes to a block device, and its endless fork loops.
fn code_commands(code: &str, out: &mut Vec<String>) {
    const SHELL_CALLS: &[&str] = &[
        "system",
        "popen",
        "exec",
        "execSync",
        "spawnSync",
        "check_call",
        "check_output",
        "call",
        "run",
        "Popen",
        "getoutput",
        "getstatusoutput",
        "shell_exec",
        "passthru",
    ];
    const TREE_DELETES: &[&str] = &[
        "rmtree",
        "rm_rf",
        "rm_r",
        "rmSync",
        "remove_dir_all",
        "file delete -force",
    ];
    const FILE_DELETES: &[&str] = &[
        "os.remove",
        "os.unlink",
        "unlinkSync",
        "unlink",
        "File.delete",
        "FileUtils.rm",
        "file delete",
    ];
    enum Kind {
        Shell,
        Tree,
        File,
    }
    let calls = SHELL_CALLS
        .iter()
        .map(|n| (*n, Kind::Shell))
        .chain(TREE_DELETES.iter().map(|n| (*n, Kind::Tree)))
        .chain(FILE_DELETES.iter().map(|n| (*n, Kind::File)));
    for (name, kind) in calls {
        let mut rest = code;
        while let Some(at) = rest.find(name) {
            let after = &rest[at + name.len()..];
            rest = after;
            if matches!(kind, Kind::Shell) {
                // The call's first argument, when it is a string literal.
                if let Some((literal, _)) = string_literal(after.trim_start_matches([' ', '('])) {
                    out.push(literal.to_owned());
                }
                continue;
            }
            let Some(target) = code_path(after, name.starts_with("file ")) else {
                continue;
            };
            out.push(match kind {
                Kind::Tree => format!("rm -rf {target}"),
                _ => format!("rm -f {target}"),
            });
        }
    }
    if writes(code) {
        for literal in string_literals(code) {
            if is_block_device(literal) {
                out.push(format!(": > '{literal}'"));
            }
        }
    }
    // Perl and Ruby backticks and `system "..."` without parentheses are
    // covered above; `qx{...}` too.
    if let Some(at) = code.find("qx{")
        && let Some(end) = code[at + 3..].find('}')
    {
        out.push(code[at + 3..at + 3 + end].to_owned());
    }
}

/// Ways the languages name the home directory.
const HOME_EXPRESSIONS: &[&str] = &[
    "expanduser('~')",
    "expanduser(\"~\")",
    "Path.home()",
    "homedir()",
    "os.environ['HOME']",
    "os.environ[\"HOME\"]",
    "os.environ.get('HOME')",
    "os.environ.get(\"HOME\")",
    "os.getenv('HOME')",
    "os.getenv(\"HOME\")",
    "$ENV{HOME}",
    "$ENV{'HOME'}",
    "$ENV{\"HOME\"}",
    "ENV['HOME']",
    "ENV[\"HOME\"]",
    "Dir.home",
    "process.env.HOME",
    "$::env(HOME)",
    "$env(HOME)",
];

/// The path a deleting call's first argument names, as a shell word:
/// a string literal (quoted; spelled out as written when it is taken
/// through `expanduser`/`glob`/`expand_path`, which read `~` and
/// wildcards), or the home however the language names it, with a
/// literal joined to it (`Path.home() / ".ssh"`); a bare word too when
/// `bare` (Tcl's `file delete`).
fn code_path(after: &str, bare: bool) -> Option<String> {
    let argument = after.trim_start_matches([' ', '(']);
    // The argument's span: up to the call's closing parenthesis or the
    // statement's end.
    let mut depth = 0usize;
    let end = argument
        .char_indices()
        .find(|&(_, c)| match c {
            '(' | '[' | '{' => {
                depth += 1;
                false
            }
            ')' | ']' | '}' if depth == 0 => true,
            ')' | ']' | '}' => {
                depth -= 1;
                false
            }
            ';' | '\n' => depth == 0,
            _ => false,
        })
        .map_or(argument.len(), |(at, _)| at);
    let span = &argument[..end];
    if let Some((expression, at)) = HOME_EXPRESSIONS
        .iter()
        .filter_map(|expression| span.find(expression).map(|at| (*expression, at)))
        .min_by_key(|&(_, at)| at)
    {
        let joined = span[at + expression.len()..]
            .trim_start()
            .strip_prefix(['/', '+', ','])
            .and_then(|rest| string_literal(rest.trim_start()))
            .map(|(literal, _)| literal.trim_start_matches('/'));
        return Some(match joined {
            Some(name) if plain_word(name) => format!("~/{name}"),
            Some(name) => format!("~/'{}'", name.replace('\'', "")),
            None => "~".to_owned(),
        });
    }
    let expands = ["expanduser", "glob", "expand_path"]
        .iter()
        .any(|call| span.contains(call));
    let Some(literal_at) = span.find(['"', '\'', '`']) else {
        // Tcl names paths bare: `file delete -force /home/agent`.
        if !bare {
            return None;
        }
        return span
            .split_whitespace()
            .find(|word| !word.starts_with('-'))
            .filter(|word| word.starts_with(['/', '~']) && plain_word(word))
            .map(str::to_owned);
    };
    let (literal, _) = string_literal(&span[literal_at..])?;
    Some(if expands && plain_word(literal) {
        literal.to_owned()
    } else {
        format!("'{}'", literal.replace('\'', ""))
    })
}

/// A word of characters the shell reads as they are, but for `~` and
/// wildcards.
fn plain_word(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./~?*[]".contains(&b))
}

/// The string literal `text` starts with (its quote `"`, `'` or a
/// backquote) and what follows it.
fn string_literal(text: &str) -> Option<(&str, &str)> {
    let quote = text
        .chars()
        .next()
        .filter(|c| matches!(c, '"' | '\'' | '`'))?;
    let end = text[1..].find(quote)?;
    Some((&text[1..=end], &text[end + 2..]))
}

/// Every string literal in `code`, roughly (quotes are not nested).
fn string_literals(code: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(['"', '\'']) {
        match string_literal(&rest[at..]) {
            Some((literal, after)) => {
                found.push(literal);
                rest = after;
            }
            None => break,
        }
    }
    found
}

/// Whether `code` opens something for writing or writes (a mode `"w"`,
/// `">"`, `"r+"`, `O_WRONLY`, a `write` call).
fn writes(code: &str) -> bool {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    [
        "\"w",
        "'w",
        "\">",
        "'>",
        "+<",
        "r+",
        "O_WRONLY",
        "O_RDWR",
        "writeFile",
        "write(",
        "syswrite",
    ]
    .iter()
    .any(|mark| compact.contains(mark))
}

/// A block device's path (`/dev/sda`, `/dev/nvme0n1`, `/dev/vdb1`, ...).
fn is_block_device(path: &str) -> bool {
    let Some(name) = path.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "dm-", "md", "loop", "disk/",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// A loop that never ends and starts a process each time round: `fork
/// while fork`, `while(1) system("... &")`, `for(;;) spawn(...)`.
pub(crate) fn endless_fork_loop(code: &str) -> bool {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let starts = ["fork", "spawn(", "system(", "exec(", "popen("]
        .iter()
        .any(|call| compact.contains(call));
    let endless = [
        "while1",
        "while(1)",
        "while(true)",
        "whileTrue",
        "for(;;)",
        "loop{",
        "loopdo",
        "iter(int,1)",
        "untilfalse",
        "until0",
        "whilefork",
    ]
    .iter()
    .any(|header| compact.contains(header));
    starts && endless
}
