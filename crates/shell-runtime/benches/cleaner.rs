//! The terminal-text cleaner (`TerminalText`, on `vte`) against a bare
//! cleaning on `vte` without its bounds (the line held up to 64 KiB, the
//! restart of a string never ended): what the bounds cost, and that the
//! two agree (the escape-family table, broken sequences, random
//! escape-heavy text). Before the cleaner moved onto `vte`, this bench
//! compared the hand-written grammar with it: the figures are in
//! docs/decisions/0021-one-terminal-text-cleaner.md.
//!
//! `cargo bench -p shell-runtime --bench cleaner` (`-- --quick` for fewer
//! rounds).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark may stop on a broken setup"
)]
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::time::{Duration, Instant};

use shell_runtime::TerminalText;
use test_support::escapes::ESCAPE_FAMILIES;

/// The reads a tty shell's output arrives in.
const READ: usize = 64 << 10;

/// The line being drawn, as `TerminalText` draws it: `\r` starts it over
/// at the next character, backspace takes one back, `\n` ends it.
#[derive(Default)]
struct Drawer {
    line: String,
    carriage_return: bool,
    out: String,
}

impl Drawer {
    fn show(&mut self, c: char) {
        if self.carriage_return {
            self.line.clear();
            self.carriage_return = false;
        }
        self.line.push(c);
    }
}

impl vte::Perform for Drawer {
    fn print(&mut self, c: char) {
        // vte prints DEL; a terminal shows nothing for it.
        if c != '\u{7f}' {
            self.show(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => {
                self.out.push_str(&self.line);
                self.out.push('\n');
                self.line.clear();
                self.carriage_return = false;
            }
            b'\r' => self.carriage_return = true,
            0x08 if !self.carriage_return => {
                self.line.pop();
            }
            b'\t' => self.show('\t'),
            // Every other control, C0 or C1, shows nothing.
            _ => {}
        }
    }
    // Sequences (CSI, OSC, DCS, ESC): the default no-ops drop them.
}

/// `TerminalText`'s cleaning on `vte`. vte executes a C1 control written
/// as a character (UTF-8 `C2 9B`) instead of starting a sequence, so the
/// C1 forms of CSI, OSC, DCS, SOS, PM, APC and ST are fed as their 7-bit
/// forms.
struct VteText {
    parser: vte::Parser,
    drawer: Drawer,
}

impl VteText {
    fn new() -> Self {
        Self {
            parser: vte::Parser::new(),
            drawer: Drawer::default(),
        }
    }

    fn push(&mut self, chunk: &str, out: &mut String) {
        let bytes = chunk.as_bytes();
        let mut start = 0;
        let mut at = 0;
        while let Some(found) = memchr::memchr(0xc2, &bytes[at..]) {
            let lead = at + found;
            match bytes.get(lead + 1) {
                Some(&c1 @ (0x90 | 0x98 | 0x9b..=0x9f)) => {
                    self.parser.advance(&mut self.drawer, &bytes[start..lead]);
                    self.parser.advance(&mut self.drawer, &[0x1b, c1 - 0x40]);
                    start = lead + 2;
                    at = start;
                }
                _ => at = lead + 1,
            }
        }
        self.parser.advance(&mut self.drawer, &bytes[start..]);
        out.push_str(&self.drawer.out);
        self.drawer.out.clear();
    }

    fn finish(&mut self, out: &mut String) {
        out.push_str(&self.drawer.out);
        out.push_str(&self.drawer.line);
        *self = Self::new();
    }
}

fn ours(text: &str) -> String {
    let mut cleaner = TerminalText::new();
    let mut out = String::with_capacity(text.len());
    for chunk in reads(text) {
        cleaner.push(chunk, &mut out);
    }
    cleaner.finish(&mut out);
    out
}

fn on_vte(text: &str) -> String {
    let mut cleaner = VteText::new();
    let mut out = String::with_capacity(text.len());
    for chunk in reads(text) {
        cleaner.push(chunk, &mut out);
    }
    cleaner.finish(&mut out);
    out
}

/// `text` in reads of about [`READ`] bytes, cut at character boundaries.
fn reads(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = READ.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        Some(chunk)
    })
}

/// About `size` bytes of `unit` repeated.
fn repeated(unit: &str, size: usize) -> String {
    unit.repeat(size / unit.len() + 1)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn mib_per_second(bytes: usize, time: Duration) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a figure to print")]
    let mib = bytes as f64 / f64::from(1 << 20);
    mib / time.as_secs_f64()
}

/// Both cleaners on `text`, alternating so drift hits both alike.
fn throughput(name: &str, text: &str, rounds: usize) {
    assert_eq!(ours(text), on_vte(text), "{name}: the two agree");
    let mut mine = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        std::hint::black_box(ours(std::hint::black_box(text)));
        mine.push(start.elapsed());
        let start = Instant::now();
        std::hint::black_box(on_vte(std::hint::black_box(text)));
        theirs.push(start.elapsed());
    }
    let (mine, theirs) = (median(mine), median(theirs));
    println!(
        "{name}: TerminalText {:.0} MiB/s, vte {:.0} MiB/s, vte takes {:.2}x the time",
        mib_per_second(text.len(), mine),
        mib_per_second(text.len(), theirs),
        theirs.as_secs_f64() / mine.as_secs_f64()
    );
}

/// Random text from the pieces sequences are made of (a small LCG: the
/// same texts every run).
fn escape_heavy(seed: u64, count: usize) -> Vec<String> {
    const PIECES: &[&str] = &[
        "\u{1b}", "\u{1b}[", "\u{1b}]", "\u{1b}P", "\u{1b}_", "\u{1b}(", "\u{1b}\\", "\u{9b}",
        "\u{9d}", "\u{9c}", "\u{90}", "\u{7}", "\u{18}", "\r", "\n", "\u{8}", " ", "/", "0", "1",
        ";", "m", "?", "A", "z", "é", "✓",
    ];
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(state >> 33).expect("31 bits")
    };
    (0..count)
        .map(|_| {
            let len = next() % 40;
            (0..len).map(|_| PIECES[next() % PIECES.len()]).collect()
        })
        .collect()
}

fn disagreements() {
    let mut table = 0;
    for case in ESCAPE_FAMILIES {
        let got = on_vte(case.text);
        if got != case.cleaned {
            table += 1;
            println!(
                "table: {}: vte gives {got:?}, the table {:?}",
                case.family, case.cleaned
            );
        }
    }
    println!(
        "table: vte differs on {table} of {} families",
        ESCAPE_FAMILIES.len()
    );
    for text in ["\u{1b}[12é\n", "\u{1b}éa\n", "\u{1b}[1\n2m\n", "\u{1b}(é\n"] {
        let (mine, theirs) = (ours(text), on_vte(text));
        if mine != theirs {
            println!("broken sequence {text:?}: TerminalText {mine:?}, vte {theirs:?}");
        }
    }
    let texts = escape_heavy(7, 10_000);
    let differ: Vec<&String> = texts
        .iter()
        .filter(|text| ours(text) != on_vte(text))
        .collect();
    println!(
        "random escape-heavy texts: vte differs on {} of {}",
        differ.len(),
        texts.len()
    );
    for text in differ.iter().take(5) {
        println!(
            "  {text:?}: TerminalText {:?}, vte {:?}",
            ours(text),
            on_vte(text)
        );
    }
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let rounds = if quick { 5 } else { 21 };
    let size = 16 << 20;
    disagreements();
    throughput(
        "plain log lines",
        &repeated("   Compiling serde v1.0.228 (registry+https://x)\n", size),
        rounds,
    );
    throughput(
        "coloured lines",
        &repeated(
            "\u{1b}[1m\u{1b}[32m   Compiling\u{1b}[0m serde v1.0.228\u{1b}(B\u{1b}[m\n",
            size,
        ),
        rounds,
    );
    throughput(
        "progress redraws",
        &repeated("\r\u{1b}[2K[#####     ] 50% é\u{8}\u{8}\r", size),
        rounds,
    );
}
