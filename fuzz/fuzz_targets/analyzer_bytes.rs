//! Any bytes as a command: the analysis never panics or hangs, is
//! deterministic where the parser answered (a parse out of time falls back
//! depending on load), and a refusal always names its rule and says `blocked`.
#![no_main]

use std::sync::OnceLock;

use exec_policy::{Analyzer, AnalyzerConfig, Decision};
use libfuzzer_sys::fuzz_target;

fn analyzer() -> &'static Analyzer {
    static ANALYZER: OnceLock<Analyzer> = OnceLock::new();
    ANALYZER.get_or_init(|| {
        Analyzer::new(AnalyzerConfig {
            home: Some("/home/agent".into()),
            ..AnalyzerConfig::default()
        })
    })
}

fuzz_target!(
    // brush-parser panics on some inputs; the analyser catches those
    // (`catch_unwind`) and falls back, so the fuzzer's abort-on-any-panic
    // hook is replaced. Our own assertions still end the run: libfuzzer-sys
    // aborts on a panic that reaches the target.
    init: { std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}"))); },
    |data: &[u8]| {
    let command = String::from_utf8_lossy(data);
    let first = analyzer().check(&command);
    let second = analyzer().check(&command);
    // Deterministic wherever the parser answered; a parse that ran out of
    // its time budget falls back depending on the machine's load.
    if !first.used_fallback() && !second.used_fallback() {
        assert_eq!(first, second, "not deterministic: {command:?}");
    }
    if let Decision::Deny(denial) = first {
        assert!(!denial.rule_id.is_empty());
        let message = denial.message();
        assert!(message.contains("blocked") && message.contains("dangerous"), "{message}");
    }
});
