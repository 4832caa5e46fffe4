//! Which simple commands read standard input that nothing feeds. Without a
//! terminal that input is `/dev/null`, so such a command reads nothing and
//! often ends silently (`read x`, `python3` with no script, `cat` alone);
//! the tools say why in one line.
//!
//! The programs are data: how their operands relate to their input, and
//! which options take a value or give the input another way.

use super::command::Cmd;
use super::paths::basename;
use super::words::Word;

/// How a program's operands relate to what it reads.
#[derive(Debug, Clone, Copy)]
enum Operands {
    /// The first operand is the script to run, the rest its arguments;
    /// with none (or `-`) the script is read from standard input.
    Script,
    /// After `leading` operands that are not input (grep's pattern,
    /// sqlite3's database), the rest name input files; with none, or with
    /// `-` among them, standard input is read.
    Files { leading: usize },
    /// No operand names the input (`psql DB`, `read NAME`): standard input
    /// is read unless an option gives the input another way.
    Never,
}

/// One row of the table.
#[derive(Debug)]
struct Reader {
    programs: &'static [&'static str],
    operands: Operands,
    /// Options whose value is the next word (or the rest of a short-option
    /// cluster, `-k2`).
    value_options: &'static [&'static str],
    /// Options that give the input another way (`python3 -c`, `psql -f`,
    /// `read -u`) or make the program read nothing (`--version`).
    input_options: &'static [&'static str],
    /// Options that give the program text, so no operand is program text
    /// (`grep -e PATTERN`); they take a value.
    program_options: &'static [&'static str],
}

const HELP: &[&str] = &["--help", "--version"];

/// The programs known to read standard input.
static READERS: &[Reader] = &[
    Reader {
        programs: &["read"],
        operands: Operands::Never,
        value_options: &["-a", "-d", "-i", "-n", "-N", "-p", "-t"],
        input_options: &["-u"],
        program_options: &[],
    },
    Reader {
        programs: &["mapfile", "readarray"],
        operands: Operands::Never,
        value_options: &["-d", "-n", "-O", "-s", "-c", "-C"],
        input_options: &["-u"],
        program_options: &[],
    },
    Reader {
        programs: &["python", "python2", "python3", "pypy", "pypy3"],
        operands: Operands::Script,
        value_options: &["-W", "-X", "--check-hash-based-pycs"],
        input_options: &["-c", "-m", "-V", "-h", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &["node", "nodejs"],
        operands: Operands::Script,
        value_options: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "--input-type",
            "--env-file",
            "-C",
            "--conditions",
            "--title",
        ],
        input_options: &[
            "-e",
            "--eval",
            "-p",
            "--print",
            "-v",
            "-h",
            "--help",
            "--version",
            "--test",
        ],
        program_options: &[],
    },
    Reader {
        programs: &["ruby"],
        operands: Operands::Script,
        value_options: &["-r", "-I", "-C", "-E", "--encoding"],
        input_options: &["-e", "-v", "-h", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &["perl"],
        operands: Operands::Script,
        value_options: &["-I", "-M", "-m"],
        input_options: &["-e", "-E", "-v", "-V", "-h"],
        program_options: &[],
    },
    Reader {
        programs: &["php"],
        operands: Operands::Script,
        value_options: &["-c", "-d", "-z"],
        input_options: &[
            "-r",
            "-f",
            "-S",
            "-a",
            "-i",
            "-m",
            "-v",
            "-h",
            "--help",
            "--version",
        ],
        program_options: &[],
    },
    Reader {
        programs: &["bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"],
        operands: Operands::Script,
        value_options: &["-o", "-O", "--rcfile", "--init-file"],
        input_options: &["-c", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &["psql"],
        operands: Operands::Never,
        value_options: &[
            "-h",
            "-p",
            "-U",
            "-d",
            "-v",
            "-P",
            "-o",
            "-L",
            "-T",
            "-F",
            "-R",
            "--host",
            "--port",
            "--username",
            "--dbname",
            "--set",
            "--variable",
            "--pset",
            "--output",
            "--log-file",
        ],
        input_options: &[
            "-c",
            "--command",
            "-f",
            "--file",
            "-l",
            "--list",
            "-V",
            "--help",
            "--version",
        ],
        program_options: &[],
    },
    Reader {
        programs: &["mysql", "mariadb"],
        operands: Operands::Never,
        value_options: &[
            "-h",
            "-u",
            "-p",
            "-P",
            "-D",
            "-S",
            "--host",
            "--user",
            "--port",
            "--database",
            "--socket",
        ],
        input_options: &["-e", "--execute", "-V", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &["sqlite3"],
        operands: Operands::Files { leading: 1 },
        // sqlite3 spells its options with one dash, whole.
        value_options: &["-cmd", "-init", "-separator", "-newline", "-nullvalue"],
        input_options: &["-version", "-help", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &[
            "cat",
            "wc",
            "rev",
            "md5sum",
            "sha1sum",
            "sha256sum",
            "sha512sum",
        ],
        operands: Operands::Files { leading: 0 },
        value_options: &[],
        input_options: HELP,
        program_options: &[],
    },
    Reader {
        programs: &["tac"],
        operands: Operands::Files { leading: 0 },
        value_options: &["-s", "--separator"],
        input_options: HELP,
        program_options: &[],
    },
    Reader {
        programs: &["base64"],
        operands: Operands::Files { leading: 0 },
        value_options: &["-w", "--wrap"],
        input_options: HELP,
        program_options: &[],
    },
    Reader {
        programs: &["sort"],
        operands: Operands::Files { leading: 0 },
        value_options: &[
            "-k",
            "-t",
            "-o",
            "-S",
            "-T",
            "--key",
            "--field-separator",
            "--output",
            "--buffer-size",
            "--temporary-directory",
            "--parallel",
            "--batch-size",
        ],
        input_options: &["--files0-from", "--help", "--version"],
        program_options: &[],
    },
    Reader {
        programs: &["head", "tail"],
        operands: Operands::Files { leading: 0 },
        value_options: &[
            "-n",
            "-c",
            "-s",
            "--lines",
            "--bytes",
            "--sleep-interval",
            "--pid",
        ],
        input_options: HELP,
        program_options: &[],
    },
    Reader {
        programs: &["uniq", "cut"],
        operands: Operands::Files { leading: 0 },
        value_options: &[
            "-f",
            "-s",
            "-w",
            "-d",
            "-b",
            "-c",
            "--skip-fields",
            "--skip-chars",
            "--check-chars",
            "--delimiter",
            "--fields",
            "--bytes",
            "--characters",
            "--output-delimiter",
        ],
        input_options: HELP,
        program_options: &[],
    },
    Reader {
        programs: &["grep", "egrep", "fgrep"],
        operands: Operands::Files { leading: 1 },
        value_options: &[
            "-A",
            "-B",
            "-C",
            "-m",
            "-d",
            "-D",
            "--after-context",
            "--before-context",
            "--context",
            "--max-count",
            "--label",
            "--include",
            "--exclude",
            "--exclude-dir",
        ],
        input_options: &[
            "-r",
            "-R",
            "--recursive",
            "--dereference-recursive",
            "-V",
            "--help",
            "--version",
        ],
        program_options: &["-e", "-f", "--regexp", "--file"],
    },
    Reader {
        programs: &["jq"],
        operands: Operands::Files { leading: 1 },
        value_options: &["-L", "--indent"],
        input_options: &["-n", "--null-input", "-h", "--help", "--version"],
        program_options: &["-f", "--from-file"],
    },
    Reader {
        programs: &["tr", "tee"],
        operands: Operands::Never,
        value_options: &[],
        input_options: HELP,
        program_options: &[],
    },
];

/// What an option word does.
enum Effect {
    /// A flag, or an option this table does not know.
    Flag,
    /// It takes a value; `next` when the value is the next word.
    Value { next: bool },
    /// It gives the program text (and takes a value).
    Program { next: bool },
    /// The input comes another way: standard input is not read.
    Input,
}

impl Reader {
    fn find(program: &str) -> Option<&'static Self> {
        // `python3.12` is `python3`.
        let name = match program.split_once('.') {
            Some((name, version)) if version.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
                name
            }
            _ => program,
        };
        READERS
            .iter()
            .find(|reader| reader.programs.contains(&name))
    }

    fn effect(&self, word: &str) -> Effect {
        // Whole words first: long options (`--file=x`), and the one-dash
        // long options some programs use (sqlite3's `-cmd`).
        let (name, inline) = match word.split_once('=') {
            Some((name, _)) if word.starts_with("--") => (name, true),
            _ => (word, false),
        };
        if self.input_options.contains(&name) {
            return Effect::Input;
        }
        if self.program_options.contains(&name) {
            return Effect::Program { next: !inline };
        }
        if self.value_options.contains(&name) {
            return Effect::Value { next: !inline };
        }
        if word.starts_with("--") {
            return Effect::Flag;
        }
        // A cluster of short options as getopt reads it: `-lc`, `-k2`, `-tAc`.
        let letters = &word[1..];
        for (at, letter) in letters.char_indices() {
            let last = at + letter.len_utf8() == letters.len();
            if is_short(self.input_options, letter) {
                return Effect::Input;
            }
            if is_short(self.program_options, letter) {
                return Effect::Program { next: last };
            }
            if is_short(self.value_options, letter) {
                return Effect::Value { next: last };
            }
        }
        Effect::Flag
    }

    /// Whether a command with these arguments reads standard input.
    fn reads_stdin(&self, args: &[Word]) -> bool {
        let mut leading = match self.operands {
            Operands::Files { leading } => leading,
            Operands::Script | Operands::Never => 0,
        };
        let mut operands: Vec<Option<&str>> = Vec::new();
        let mut only_operands = false;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let value = arg.value();
            match value {
                Some("--") if !only_operands => only_operands = true,
                Some(option) if !only_operands && option.starts_with('-') && option != "-" => {
                    match self.effect(option) {
                        Effect::Input => return false,
                        Effect::Program { next } => {
                            leading = 0;
                            if next {
                                args.next();
                            }
                        }
                        Effect::Value { next } => {
                            if next {
                                args.next();
                            }
                        }
                        Effect::Flag => {}
                    }
                }
                // The script's own options and arguments follow it.
                _ if matches!(self.operands, Operands::Script) => return value == Some("-"),
                _ => operands.push(value),
            }
        }
        match self.operands {
            Operands::Script | Operands::Never => true,
            Operands::Files { .. } => {
                let mut files = operands.into_iter().skip(leading).peekable();
                files.peek().is_none() || files.any(|file| file == Some("-"))
            }
        }
    }
}

/// Whether `list` holds the one-letter option `-letter`.
fn is_short(list: &[&str], letter: char) -> bool {
    list.iter().any(|option| {
        let mut chars = option.chars();
        chars.next() == Some('-') && chars.next() == Some(letter) && chars.next().is_none()
    })
}

/// Whether `cmd` reads standard input that nothing feeds. Commands inside
/// function bodies are left out: where the function is called, and with
/// what input, is not known here.
pub(crate) fn reads_inherited_stdin(cmd: &Cmd) -> bool {
    if cmd.stdin_fed || cmd.function.is_some() {
        return false;
    }
    let Some(program) = cmd.words.first().and_then(Word::value).map(basename) else {
        return false;
    };
    Reader::find(program).is_some_and(|reader| reader.reads_stdin(&cmd.words[1..]))
}
