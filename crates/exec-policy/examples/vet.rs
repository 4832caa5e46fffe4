//! exec-policy alone: vet commands and print each decision.
//!
//! `cargo run -p exec-policy --example vet` vets a built-in list;
//! `... --example vet -- 'rm -rf ~' 'git status'` vets the arguments;
//! `... --example vet -- -` reads one command per line from stdin.

#![allow(clippy::print_stdout, reason = "an example reports on stdout")]

use std::io::BufRead as _;

use exec_policy::{Analyzer, AnalyzerConfig, Decision};

const SAMPLES: &[&str] = &[
    "git status",
    "cargo test --workspace 2>&1 | tail -50",
    "rm -rf target/debug",
    "rm -rf /",
    "sudo env FOO=1 bash -c 'rm -rf --no-preserve-root /'",
    "cd / && rm -rf *",
    "echo 'rm -rf /' > notes.txt",
    "find / -name '*.log' -delete",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    ":(){ :|:& };:",
    r#"git commit -m "remove rm -rf / from the docs""#,
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let commands: Vec<String> = match args.as_slice() {
        [] => SAMPLES.iter().map(|s| (*s).to_owned()).collect(),
        [dash] if dash == "-" => std::io::stdin()
            .lock()
            .lines()
            .map_while(Result::ok)
            .collect(),
        _ => args,
    };
    let analyzer = Analyzer::new(AnalyzerConfig {
        home: std::env::var("HOME").ok(),
        ..AnalyzerConfig::default()
    });
    for command in &commands {
        match analyzer.check(command) {
            Decision::Allow { fallback: false } => println!("allow    {command}"),
            Decision::Allow { fallback: true } => {
                println!("allow*   {command}   (parsed token by token)");
            }
            Decision::Ask(denial) => {
                println!("ASK      {command}\n         {}", denial.ask_message());
            }
            Decision::Deny(denial) => println!("BLOCK    {command}\n         {}", denial.message()),
        }
    }
}
