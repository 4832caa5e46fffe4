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

/// The next unwrapping step for `words`, whose program's name is `program`.
pub(crate) fn unwrap_step(program: &str, words: &[Word]) -> Step {
    match program {
        "sudo" | "doas" | "env" | "nice" | "ionice" | "nohup" | "stdbuf" | "time" | "command"
        | "builtin" | "exec" | "timeout" | "setsid" | "chroot" | "flock" | "taskset"
        | "unbuffer" | "watch" | "setpriv" | "unshare" | "nsenter" | "chrt" | "pkexec"
        | "systemd-run" | "strace" | "ltrace" | "prlimit" | "ssh-agent" | "dbus-run-session"
        | "eatmydata" => wrapper_step(program, words),
        // `trap 'CMD' SIGNAL...`: the handler runs later in this shell.
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

/// `bash [-opts] -c SCRIPT`, `bash -lc SCRIPT`, `bash script.sh` (left alone).
fn shell_step(words: &[Word]) -> Step {
    let mut has_c = false;
    for (i, word) in words.iter().enumerate().skip(1) {
        let Some(value) = word.value() else { break };
        if value.starts_with('-') && !value.starts_with("--") && value.len() > 1 {
            if value[1..].contains('c') {
                has_c = true;
            }
            continue;
        }
        if value.starts_with("--") {
            continue;
        }
        if has_c {
            return Step::Script(words[i].display().to_owned());
        }
        break;
    }
    Step::Done
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
