//! Commands built from a grammar of words, quotes, operators and wrappers.
//! Beyond never panicking: whatever the command, the same text quoted as
//! one argument of `echo` is harmless and must be allowed; and analysis is
//! deterministic where the parser answered (a parse out of time falls back
//! depending on load).
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use exec_policy::{Analyzer, AnalyzerConfig};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Piece {
    Program(u8),
    Flag(u8),
    Path(u8),
    Word(String),
    Operator(u8),
    Wrapper(u8),
    SingleQuoted(Vec<Piece>),
    DoubleQuoted(Vec<Piece>),
    Substitution(Vec<Piece>),
    Subshell(Vec<Piece>),
    ShellC(Vec<Piece>),
    /// `{a,b}`: brace expansion, each alternative a list of pieces.
    Brace(Vec<Vec<Piece>>),
    /// A shell fed on stdin: `echo '...' | bash`, a here-string, a here-doc.
    ShellFed(u8, Vec<Piece>),
    /// A parameter expansion with an operator: `${V:-...}`, `${V%x}`...
    Parameter(u8, Vec<Piece>),
}

const PROGRAMS: &[&str] = &[
    "rm",
    "chmod",
    "chown",
    "mv",
    "cp",
    "dd",
    "mkfs.ext4",
    "find",
    "tee",
    "shred",
    "echo",
    "git",
    "cat",
    "cd",
    "export",
    "eval",
    ":",
];
const FLAGS: &[&str] = &[
    "-rf",
    "-r",
    "-f",
    "-R",
    "--recursive",
    "-delete",
    "-exec",
    "of=/dev/sda",
    "--no-preserve-root",
    "-m",
    "777",
    "--rec",
    "--recur",
    "--targ=/",
    "-t/",
    "-vt",
    "-O3",
    "-C",
    "-P0",
    "-a",
    "--remove-files",
    "-i",
    "--",
    "--help",
];
const PATHS: &[&str] = &[
    "/", "/*", "/etc", "/etc/", "~", "$HOME", "/tmp/x", "./build", "/dev/sda", "*", "..",
    "$1", "\"$@\"", "$D", "${D}", "/etc{,.bak}", "$'\\057'", "../..", "/usr/lib", "disk.img",
];
const OPERATORS: &[&str] = &[
    ";", "&&", "||", "|", "&", "\n", ">", ">>", "<<", "2>&1", "(){", "}", "{",
];
const WRAPPERS: &[&str] = &[
    "sudo",
    "env A=1",
    "nice -n 5",
    "timeout 10",
    "nohup",
    "xargs",
    "command",
    "exec",
    "bash -c",
    "sh -c",
    "runuser -u root --",
    "setpriv --reuid=0",
    "unshare -r",
    "script -qc",
    "env -C /",
    "bash -o pipefail -c",
    "find / -exec",
    "parallel",
    "f(){",
    "for D in /etc /tmp; do",
    "D=/etc;",
    "set --",
    "alias x=rm;",
];

fn render(pieces: &[Piece], depth: usize, out: &mut String) {
    for piece in pieces.iter().take(24) {
        if !out.is_empty() && !out.ends_with(['(', '\'', '"']) {
            out.push(' ');
        }
        let pick = |list: &[&str], index: u8| list[usize::from(index) % list.len()].to_owned();
        match piece {
            Piece::Program(i) => out.push_str(&pick(PROGRAMS, *i)),
            Piece::Flag(i) => out.push_str(&pick(FLAGS, *i)),
            Piece::Path(i) => out.push_str(&pick(PATHS, *i)),
            Piece::Word(word) => out.extend(word.chars().take(12)),
            Piece::Operator(i) => out.push_str(&pick(OPERATORS, *i)),
            Piece::Wrapper(i) => out.push_str(&pick(WRAPPERS, *i)),
            Piece::SingleQuoted(inner) if depth < 4 => {
                out.push('\'');
                render(inner, depth + 1, out);
                out.push('\'');
            }
            Piece::DoubleQuoted(inner) if depth < 4 => {
                out.push('"');
                render(inner, depth + 1, out);
                out.push('"');
            }
            Piece::Substitution(inner) if depth < 4 => {
                out.push_str("$(");
                render(inner, depth + 1, out);
                out.push(')');
            }
            Piece::Subshell(inner) if depth < 4 => {
                out.push('(');
                render(inner, depth + 1, out);
                out.push(')');
            }
            Piece::ShellC(inner) if depth < 4 => {
                let mut script = String::new();
                render(inner, depth + 1, &mut script);
                out.push_str("bash -c ");
                out.push_str(&exec_tools::quote(&script));
            }
            Piece::Brace(alternatives) if depth < 4 => {
                out.push('{');
                for (i, alternative) in alternatives.iter().take(4).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let mut inner = String::new();
                    render(alternative, depth + 1, &mut inner);
                    out.push_str(&inner);
                }
                out.push('}');
            }
            Piece::ShellFed(how, inner) if depth < 4 => {
                let mut script = String::new();
                render(inner, depth + 1, &mut script);
                let quoted = exec_tools::quote(&script);
                match how % 4 {
                    0 => out.push_str(&format!("echo {quoted} | bash")),
                    1 => out.push_str(&format!("bash <<< {quoted}")),
                    2 => out.push_str(&format!("sh -s <<'EOF'\n{script}\nEOF\n")),
                    _ => out.push_str(&format!("source /dev/stdin <<< {quoted}")),
                }
            }
            Piece::Parameter(operator, inner) if depth < 4 => {
                let mut word = String::new();
                render(inner, depth + 1, &mut word);
                let operator = [":-", "-", ":=", "%", "%%", "#", "##", "/", ":?"]
                    [usize::from(*operator) % 9];
                out.push_str(&format!("${{V{operator}{word}}}"));
            }
            _ => {}
        }
    }
}

fn analyzer() -> &'static Analyzer {
    static ANALYZER: OnceLock<Analyzer> = OnceLock::new();
    ANALYZER.get_or_init(|| Analyzer::new(AnalyzerConfig::default()))
}

fuzz_target!(
    // brush-parser panics on some inputs; the analyser catches those
    // (`catch_unwind`) and falls back, so the fuzzer's abort-on-any-panic
    // hook is replaced. Our own assertions still end the run: libfuzzer-sys
    // aborts on a panic that reaches the target.
    init: { std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}"))); },
    |pieces: Vec<Piece>| {
    let mut command = String::new();
    render(&pieces, 0, &mut command);
    let decision = analyzer().check(&command);
    let again = analyzer().check(&command);
    // Deterministic wherever the parser answered. Where a parse ran out of
    // its time budget the fallback takes over, and whether it does depends
    // on the machine's load, so two checks may differ there.
    if !decision.used_fallback() && !again.used_fallback() {
        assert_eq!(decision, again, "{command:?}");
    }
    let echoed = format!("echo {}", exec_tools::quote(&command));
    assert!(
        analyzer().check(&echoed).is_allowed(),
        "text inside one echo argument was refused: {echoed:?}"
    );
});
