//! Unit tests of the analysis: decisions on commands, by rule and by construct.

use super::*;

fn check(command: &str) -> Decision {
    Analyzer::new(AnalyzerConfig {
        home: Some("/home/agent".into()),
        ..AnalyzerConfig::default()
    })
    .check(command)
}

fn denied_by(command: &str) -> Option<String> {
    match check(command) {
        Decision::Ask(denial) | Decision::Deny(denial) => Some(denial.rule_id),
        Decision::Allow { .. } => None,
    }
}

#[test]
fn every_rule_blocks_its_examples_and_allows_its_look_alikes() {
    for rule in RULES.iter().chain(std::iter::once(&FORK_BOMB)) {
        for command in rule.blocks {
            assert_eq!(denied_by(command).as_deref(), Some(rule.id), "{command}");
            assert!(matches!(check(command), Decision::Deny(_)), "{command}");
        }
        for command in rule.allows {
            assert_eq!(denied_by(command), None, "{command}");
        }
    }
}

#[test]
fn every_ask_rule_asks_for_its_examples_and_allows_its_look_alikes() {
    for rule in ASK_RULES {
        for command in rule.blocks {
            let decision = check(command);
            assert!(
                matches!(decision, Decision::Ask(_)),
                "{command}: {decision:?}"
            );
            assert_eq!(denied_by(command).as_deref(), Some(rule.id), "{command}");
        }
        for command in rule.allows {
            assert_eq!(denied_by(command), None, "{command}");
        }
    }
}

#[test]
fn rule_ids_are_unique_and_reasons_present() {
    let mut ids: Vec<&str> = RULES
        .iter()
        .chain(ASK_RULES)
        .map(|r| r.id)
        .chain([FORK_BOMB.id])
        .collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before);
    assert!(
        RULES
            .iter()
            .chain(ASK_RULES)
            .all(|r| !r.reason.is_empty() && !r.blocks.is_empty() && !r.allows.is_empty())
    );
}

#[test]
fn denial_message_names_rule_and_subcommand() {
    let Decision::Deny(denial) = check("ls && sudo rm -rf /") else {
        panic!("allowed")
    };
    let message = denial.message();
    assert!(
        message.contains("blocked") && message.contains("dangerous"),
        "{message}"
    );
    assert!(message.contains("recursive-delete-protected"), "{message}");
    assert!(message.contains("`rm -rf /`"), "{message}");
}

#[test]
fn git_commit_is_located_after_the_commit_word() {
    let analyzer = Analyzer::default();
    let command = r#"git add -A && git commit -m "x" && git push"#;
    let commits = analyzer.analyze(command).git_commits;
    assert_eq!(commits.len(), 1);
    assert_eq!(&command[..commits[0].insert_at], "git add -A && git commit");
    let command = "git -C repo commit -am 'é' ; echo git commit";
    let commits = analyzer.analyze(command).git_commits;
    assert_eq!(commits.len(), 1);
    assert_eq!(&command[..commits[0].insert_at], "git -C repo commit");
    assert!(analyzer.analyze("echo 'git commit'").git_commits.is_empty());
}

/// A broken built-in pattern must not drop its rule unseen.
#[test]
fn every_built_in_pattern_compiles() {
    for (id, pattern) in BUILT_IN_PATTERNS {
        assert!(Regex::new(pattern).is_ok(), "{id}: `{pattern}`");
    }
    assert_eq!(BUILT_IN.len(), BUILT_IN_PATTERNS.len());
    for (id, _) in BUILT_IN_PATTERNS {
        assert!(
            BUILT_IN.iter().any(|(built_in_id, _)| built_in_id == id),
            "{id} is checked"
        );
    }
}

/// The built-in patterns' ids say what they catch, in the built-in rules'
/// style (lower-case words joined by `-`, no prefix), and name no other
/// rule: a refusal's `rule` is one rule.
#[test]
fn built_in_pattern_ids_say_what_they_catch() {
    let ids: Vec<&str> = BUILT_IN_PATTERNS.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        [
            "rm-rf-root",
            "mkfs-on-device",
            "dd-to-disk",
            "redirect-to-disk",
            "chmod-777-root"
        ]
    );
    let rule_ids: Vec<&str> = RULES
        .iter()
        .chain(ASK_RULES)
        .map(|rule| rule.id)
        .chain([FORK_BOMB.id])
        .collect();
    for id in ids {
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{id}"
        );
        assert!(!rule_ids.contains(&id), "{id} is also a rule's id");
    }
    // The rules leave `/dev/null` to the pattern, which refuses any `/dev/`.
    let Decision::Deny(denial) = Analyzer::default().check("mkfs.foo x /dev/null") else {
        panic!("allowed")
    };
    assert_eq!(denial.rule_id, "mkfs-on-device");
    assert!(
        denial.reason.starts_with("matches the built-in pattern"),
        "{}",
        denial.reason
    );
}

#[test]
fn policy_patterns_apply_per_simple_command_and_allow_exempts() {
    let analyzer = Analyzer::new(AnalyzerConfig {
        deny_regex: vec![Regex::new(r"git\s+push\s+--force").unwrap()],
        allow_regex: vec![Regex::new("^mkfs.ext4 /dev/sdb$").unwrap()],
        protected_paths: vec!["~/photos".into(), "/data".into()],
        home: Some("/home/me".into()),
        rules: Vec::new(),
    });
    let Decision::Deny(denial) = analyzer.check("cd x && git push --force origin main") else {
        panic!()
    };
    assert_eq!(denial.rule_id, "policy.deny[0]");
    assert!(analyzer.check("echo 'git push --force'").is_allowed());
    // Allow never exempts from built-in rules.
    assert!(!analyzer.check("mkfs.ext4 /dev/sdb").is_allowed());
    assert!(!analyzer.check("rm -rf ~/photos").is_allowed());
    assert!(!analyzer.check("rm -rf /data/").is_allowed());
    assert!(analyzer.check("rm -rf /data/cache").is_allowed());
}

/// A user rule sees the program as the built-in rules do: unwrapped, with
/// quotes removed and its path reduced, in every spelling.
#[test]
fn policy_patterns_see_the_unwrapped_program_with_its_path_reduced() {
    let analyzer = Analyzer::new(AnalyzerConfig {
        deny_regex: vec![Regex::new("curl").unwrap()],
        home: Some("/home/me".into()),
        ..AnalyzerConfig::default()
    });
    for command in [
        "curl x",
        "/usr/bin/curl x",
        "command /usr/bin/curl x",
        "env curl",
        "env -i A=1 /usr/bin/curl x",
        "sudo -u u /usr/bin/curl",
        "sudo /usr/local/bin/curl x",
        "nohup ./curl x &",
        r"\curl x",
        r#""curl" x"#,
        "c''url x",
        "'/usr/bin/curl' x",
        "bash -c 'curl x'",
        "sh -c '/usr/bin/curl x'",
        "eval /usr/bin/curl x",
        "echo $(/usr/bin/curl x)",
        "xargs /usr/bin/curl < urls",
        "find . -exec /usr/bin/curl {} ;",
        "ls | timeout 5 /usr/bin/curl -d @- x",
    ] {
        let decision = analyzer.check(command);
        let Decision::Deny(denial) = decision else {
            panic!("{command}: {decision:?}")
        };
        assert_eq!(denial.rule_id, "policy.deny[0]", "{command}");
        assert_eq!(denial.source, RuleSource::PolicyFile, "{command}");
    }
    for command in [
        "echo curl",
        "grep curl file",
        r#"git commit -m "use curl""#,
        "man curl",
        "echo /usr/bin/curl",
        "ls /usr/bin/curl",
    ] {
        assert!(analyzer.check(command).is_allowed(), "{command}");
    }
    // The allow list sees the same text.
    let analyzer = Analyzer::new(AnalyzerConfig {
        deny_regex: vec![Regex::new("curl").unwrap()],
        allow_regex: vec![Regex::new("^curl https://example.com$").unwrap()],
        ..AnalyzerConfig::default()
    });
    assert!(
        analyzer
            .check("/usr/bin/curl https://example.com")
            .is_allowed()
    );
    assert!(
        !analyzer
            .check("/usr/bin/curl https://evil.com")
            .is_allowed()
    );
    // And so do the built-in patterns.
    let analyzer = Analyzer::default();
    let Decision::Deny(denial) = analyzer.check("/sbin/mkfs.ext4 /dev/sdb") else {
        panic!("allowed")
    };
    assert_eq!(denial.source, RuleSource::BuiltIn);
}

/// A user rule's refusal says why in the rule's words, not `dangerous`;
/// a built-in one keeps both words.
#[test]
fn a_policy_refusal_names_the_rule_and_pattern_not_danger() {
    let analyzer = Analyzer::new(AnalyzerConfig {
        deny_regex: vec![Regex::new("wget").unwrap(), Regex::new("curl").unwrap()],
        ..AnalyzerConfig::default()
    });
    let Decision::Deny(denial) = analyzer.check("ls && /usr/bin/curl x") else {
        panic!("allowed")
    };
    assert_eq!(
        denial.message(),
        "Command blocked by the policy file (rule `policy.deny[1]`: matches `curl`) in `/usr/bin/curl x`"
    );
    assert!(!denial.message().contains("dangerous"));
    let Decision::Deny(denial) = analyzer.check("sudo rm -rf /") else {
        panic!("allowed")
    };
    assert!(denial.message().contains("blocked") && denial.message().contains("dangerous"));
}

#[test]
fn unparseable_input_falls_back_and_says_so() {
    let decision = check("rm -rf / 'unterminated");
    assert!(decision.used_fallback());
    let Decision::Deny(denial) = decision else {
        panic!("allowed")
    };
    assert!(denial.fallback);
    assert!(denial.message().contains("token by token"));
    assert_eq!(
        check("echo 'unterminated"),
        Decision::Allow { fallback: true }
    );
    assert!(check("echo 'unterminated").used_fallback());
    assert_eq!(check("echo fine"), Decision::Allow { fallback: false });
    assert!(!check("echo fine").used_fallback());
    assert!(!check("rm -rf /").used_fallback());
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Dangerous commands to embed in property tests.
    const DANGEROUS: &[&str] = &[
        "rm -rf /",
        "sudo rm -rf /etc",
        "mkfs.ext4 /dev/sda",
        "dd if=/dev/zero of=/dev/sda",
        "chmod -R 777 /",
        ":(){ :|:& };:",
        "bash -c 'rm -rf /'",
        "find / -delete",
        "shred /dev/sda",
    ];

    /// Quotes `text` for bash with single quotes.
    fn single_quote(text: &str) -> String {
        format!("'{}'", text.replace('\'', r"'\''"))
    }

    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("rm".to_owned()),
            Just("-rf".to_owned()),
            Just("/".to_owned()),
            Just("sudo".to_owned()),
            Just("bash -c".to_owned()),
            Just("eval".to_owned()),
            Just("|".to_owned()),
            Just("&".to_owned()),
            Just(";".to_owned()),
            Just("&&".to_owned()),
            Just("$(".to_owned()),
            Just(")".to_owned()),
            Just("`".to_owned()),
            Just("'".to_owned()),
            Just("\"".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("(){".to_owned()),
            Just("<<".to_owned()),
            Just(">".to_owned()),
            Just("/dev/sda".to_owned()),
            Just("~".to_owned()),
            Just("$HOME".to_owned()),
            Just("*".to_owned()),
            "[a-z]{1,6}",
            "\\PC{0,4}",
        ]
    }

    /// Found by fuzzing: brush-parser backtracks exponentially on deep `(`.
    #[test]
    fn deeply_nested_parentheses_fall_back_quickly() {
        let text = format!("*\n\n{}*", "(".repeat(30));
        assert!(super::super::fallback::has_deep_nesting(&text));
        let started = std::time::Instant::now();
        let _ = check(&text);
        // Generous: the parser alone would take seconds; the fallback takes microseconds.
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(!super::super::fallback::has_deep_nesting(
            "(cd a && (cd b && (make)))"
        ));
        assert!(!super::super::fallback::has_deep_nesting(&format!(
            "echo '{}'",
            "(".repeat(40)
        )));
        assert!(!check(&format!("rm -rf / {}", "(".repeat(30))).is_allowed());
    }

    /// Found by fuzzing: brush-parser unwraps number parses in words.
    #[test]
    fn huge_numbers_in_words_do_not_panic_the_analysis() {
        for text in [
            "\t~3333333333333333333333333333333333333333",
            "echo ~+99999999999999999999 ~-99999999999999999999",
            "echo {1..99999999999999999999}",
            "cat 99999999999999999999>x",
            "rm -rf ~99999999999999999999 /",
        ] {
            let _ = check(text);
        }
        assert!(!check("rm -rf ~99999999999999999999 /").is_allowed());
    }

    /// Found by fuzzing: text in single quotes is never a command.
    #[test]
    fn single_quoted_substitution_text_is_inert() {
        for text in [
            "echo '$(>> /dev/sda)'",
            "echo '$(rm -rf /)'",
            "echo '`mkfs.ext4 /dev/sda`'",
        ] {
            let decision = check(text);
            assert!(decision.is_allowed(), "{text}: {decision:?}");
        }
    }

    /// Text that takes the token-level fallback (here: a here-document
    /// with no delimiter on a later line) still has every substitution
    /// checked, also inside double quotes; single-quoted text is not code.
    #[test]
    fn the_fallback_checks_substitutions_inside_double_quotes() {
        for text in [
            "echo \"$(rm -rf /)\"\ncat <<",
            "echo \"`rm -rf /`\" <<",
            "echo \"x $(echo \"$(shred /dev/sda)\")\" <<",
        ] {
            let decision = check(text);
            assert!(!decision.is_allowed(), "{text}: {decision:?}");
        }
        let decision = check("echo '$(rm -rf /)' <<");
        assert!(decision.is_allowed(), "{decision:?}");
    }

    /// A wrapper whose last option lacks its value (`xargs -I`) sliced past
    /// the end of the words (found by `analyzer_grammar` in CI's fuzz run).
    #[test]
    fn wrapper_options_missing_their_value_do_not_panic() {
        for wrapper in [
            "xargs -I",
            "xargs -n",
            "xargs -P",
            "watch -n",
            "timeout",
            "timeout -s",
            "timeout -k 5",
            "env -u",
            "nice -n",
            "sudo -u",
            "chroot",
            "flock -w",
            "taskset -c",
            "stdbuf -o",
            "ionice -c",
            "doas -u",
        ] {
            assert!(check(wrapper).is_allowed(), "{wrapper}");
        }
        // Given the value, the wrapped command is still found.
        for blocked in [
            "xargs -I x rm -rf /",
            "timeout 5 rm -rf /",
            "env -u X rm -rf /",
        ] {
            assert!(!check(blocked).is_allowed(), "{blocked}");
        }
    }

    /// brush-parser 0.4.0 loops forever, allocating, on these: they must
    /// reach the fallback, not the parser (regression: a proptest run was
    /// OOM-killed at 24 GB).
    #[test]
    fn here_documents_that_hang_the_parser_fall_back() {
        for text in [
            "<< $( << $(",
            "cat << $( << $(",
            "<<",
            "x <<- `y",
            "a << ) b",
            r#"esac 2>&1&&[[EOFesac;do<<"">~$HOMEx"indonesudo$("#,
            "cat <<''",
            r"x <<\",
            "<<z$( <<------------------------------------------- $(",
            "cat <<EOF",
            "cat <<EOF\nno end line",
            "echo a<<b",
            "x \"$( << $( \"",
            // A `'` inside double quotes, a comment or a here-document body
            // opens nothing: what follows is not quoted.
            "x \"['_$( << $( <`\"",
            "# don't\ncat << $(",
            "cat <<EOF\ndon't\nEOF\ncat << $(",
            "echo $'\\'' << $( '",
            "echo `'` << $( '",
        ] {
            assert!(super::super::fallback::has_runaway_here_doc(text), "{text}");
            let _ = check(text);
        }
        for text in [
            "cat <<EOF\nx\nEOF",
            "cat <<- 'END'\n\tEND",
            "cat > f <<\"EOF\"\nline\nEOF\necho done",
            "cat <<< \"$(date)\"",
            "python3 -c 'print(1 << 3)'",
            "echo 'cat << $(' && echo \\<< x",
        ] {
            assert!(
                !super::super::fallback::has_runaway_here_doc(text),
                "{text}"
            );
        }
        // The fuzzing find itself (bytes read lossily, as the target does).
        let found = String::from_utf8_lossy(include_bytes!(
            "../../../../fuzz/seeds/analyzer_bytes/regression-single-quote-inside-double-quotes"
        ));
        assert!(super::super::fallback::has_runaway_here_doc(&found));
        let _ = check(&found);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary text never panics the analysis.
        #[test]
        fn arbitrary_strings_never_panic(text in "\\PC{0,200}") {
            let _ = check(&text);
        }

        /// Shell-ish token soup never panics it either, and is deterministic.
        #[test]
        fn token_soup_is_deterministic(parts in prop::collection::vec(fragment(), 0..24)) {
            let command = parts.join(" ");
            prop_assert_eq!(check(&command), check(&command));
        }

        /// A dangerous command quoted as an argument of echo is allowed.
        #[test]
        fn dangerous_text_as_echo_argument_is_allowed(index in 0..DANGEROUS.len(), prefix in "[a-z ]{0,10}") {
            let text = format!("{prefix}{}", DANGEROUS[index]);
            let command = format!("echo {}", single_quote(&text));
            prop_assert!(check(&command).is_allowed(), "{}", command);
        }

        /// And the same command run through any wrapper chain is blocked.
        #[test]
        fn dangerous_command_behind_wrappers_is_blocked(
            index in 0..DANGEROUS.len(),
            wrappers in prop::collection::vec(prop_oneof![
                Just("sudo"), Just("env A=1"), Just("nice -n 5"), Just("timeout 10"), Just("nohup"),
                Just("command"), Just("stdbuf -oL"), Just("time"),
            ], 0..4),
            before in prop_oneof![Just(""), Just("true && "), Just("ls; "), Just("cd /tmp || ")],
        ) {
            let dangerous = DANGEROUS[index];
            // Wrappers only apply to simple commands, not to function definitions.
            let wrapped = if dangerous.contains("(){") {
                dangerous.to_owned()
            } else {
                format!("{} {dangerous}", wrappers.join(" "))
            };
            let command = format!("{before}{wrapped}");
            prop_assert!(!check(&command).is_allowed(), "{}", command);
        }
    }
}

fn reads_stdin(command: &str) -> bool {
    Analyzer::default()
        .analyze(command)
        .facts
        .reads_inherited_stdin
}

/// Commands that read the standard input they are given, with nothing
/// feeding it, are found; fed ones and look-alikes are not.
#[test]
fn commands_reading_an_unfed_stdin_are_found() {
    for command in [
        "read x",
        "read -r line",
        "read -p 'name? ' -r name",
        "read -t 5 x; echo \"$x\"",
        "mapfile lines",
        "python3",
        "python",
        "python3.12",
        "/usr/bin/python3 -u",
        "python3 -W ignore",
        "python3 - arg",
        "node",
        "node -r ts-node/register",
        "ruby",
        "perl -w",
        "bash",
        "sh -x",
        "cat",
        "cat -",
        "cat -n",
        "cat a.txt - b.txt",
        "cat -- -",
        "cat > notes.txt",
        "sort",
        "sort -k2 -t,",
        "sort -n -k 2",
        "head -n 5",
        "tail -c 10",
        "wc -l",
        "psql",
        "psql -h localhost -U me mydb",
        "mysql -u root db",
        "sqlite3 app.db",
        "sqlite3 -cmd '.mode csv' app.db",
        "grep foo",
        "grep -e foo",
        "grep -i -e foo -e bar",
        "jq .",
        "jq -r .name",
        "tr a-z A-Z",
        "tee out.log",
        "echo start; read x",
        "ls && cat",
        "sudo -u me python3",
        "env A=1 node",
        "timeout 5 cat",
        "bash -c 'read x'",
        "x=$(cat)",
        "echo \"$(read -r y; echo \"$y\")\"",
        "if true; then read x; fi",
        "cat &",
        "read x | cat",
    ] {
        assert!(reads_stdin(command), "{command}");
        // Fed by a pipe, a file or a here-string, the same command is not.
        if !command.contains([';', '&', '|', '$', '>']) && !command.starts_with("if") {
            for fed in [
                format!("echo in | {command}"),
                format!("{command} < in.txt"),
                format!("{command} <<< in"),
                format!("{{ {command}; }} < in.txt"),
            ] {
                assert!(!reads_stdin(&fed), "{fed}");
            }
        }
    }
    for command in [
        "echo hi | read x",
        "python3 <<EOF\nprint(1)\nEOF",
        "python3 script.py",
        "python3 script.py -",
        "python3 -c 'print(1)'",
        "python3 -Wignore -c 'print(1)'",
        "python3 -m http.server",
        "python3 --version",
        "node -e 1",
        "node --eval=1",
        "node app.js",
        "ruby -e 'p 1'",
        "perl -ne 'print' file",
        "perl -pe 's/a/b/'",
        "bash script.sh",
        "bash -o pipefail -c 'echo x'",
        "cat file",
        "cat < f",
        "cat 0< f",
        "cat <> f",
        "cat <&3",
        "cat -- file",
        "read x <<< \"v\"",
        "read -u 3 x",
        "read -ru3 x",
        "while read l; do echo \"$l\"; done < file",
        "while read l; do echo \"$l\"; done <<< \"$(ls)\"",
        "{ read a; read b; } < pair.txt",
        "cat file | python3",
        "ls | sort | head -n 3",
        "find . | grep foo",
        "echo x | bash -c 'read y'",
        "echo x | (read y; echo \"$y\")",
        "exec < input.txt; read x",
        "sort -o out.txt in.txt",
        "sort -k 2 data",
        "head -n 5 file",
        "head -5 file",
        "tail -f log",
        "wc -l *.rs",
        "grep foo file",
        "grep -r foo",
        "grep -rn foo .",
        "grep -e foo src/",
        "grep --regexp=foo file",
        "jq . data.json",
        "jq -n 1",
        "psql -c 'select 1'",
        "psql -tAc 'select 1' db",
        "psql -f q.sql",
        "psql --file=q.sql",
        "mysql -e 'select 1'",
        "mysql -psecret -e 'show tables'",
        "sqlite3 app.db 'select 1'",
        "echo hi",
        "ls",
        "git status",
        "echo cat",
        "grep cat file",
        "git commit -m 'read x'",
        "f() { read x; }",
        "coproc cat",
        "echo 'read x'",
        "cat 'unterminated",
    ] {
        assert!(!reads_stdin(command), "{command}");
    }
}

/// The facts come from the same walk as the decision.
#[test]
fn analyze_returns_the_decision_check_returns() {
    let analyzer = Analyzer::default();
    for command in ["rm -rf /", "read x", "echo hi", "cat 'x"] {
        assert_eq!(analyzer.analyze(command).decision, analyzer.check(command));
    }
    let analysis = analyzer.analyze("rm -rf /; cat");
    assert!(!analysis.decision.is_allowed());
    assert!(analysis.facts.reads_inherited_stdin);
    let analysis = analyzer.analyze("read m; git commit -m \"$m\"");
    assert!(analysis.decision.is_allowed());
    assert!(analysis.facts.reads_inherited_stdin);
    assert_eq!(analysis.git_commits.len(), 1);
}

/// The analysis modules in the order of the line in the module docs: each
/// may import only modules before it.
const LINE: &[&str] = &[
    "lexical", "paths", "watchdog", "words", "command", "unwrap", "fallback", "scope", "collect",
    "stdin", "rules",
];

/// The sibling modules `text` names through `super::` (grouped imports
/// included) or `analysis::`, in order of appearance.
fn sibling_modules(text: &str) -> Vec<&str> {
    let ident_end = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut found = Vec::new();
    let paths = text
        .split("super::")
        .skip(1)
        .chain(text.split("analysis::").skip(1));
    for path in paths {
        if let Some(group) = path.strip_prefix('{') {
            // Up to the brace that closes the group; every name in it counts.
            let mut depth = 1;
            let end = group
                .find(|c| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .unwrap_or(group.len());
            found.extend(
                group[..end]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|name| LINE.contains(name)),
            );
        } else {
            let name = &path[..ident_end(path)];
            if LINE.contains(&name) {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn sibling_modules_are_found_in_every_form_of_path() {
    assert_eq!(
        sibling_modules("use super::collect::quoted_bytes;"),
        ["collect"]
    );
    assert_eq!(
        sibling_modules("use super::{command::{Cmd, Redirect}, words::Word};"),
        ["command", "words"]
    );
    assert_eq!(
        sibling_modules("super::super::fallback::has_deep_nesting(x); a.collect::<Vec<_>>()"),
        ["fallback"]
    );
    assert_eq!(sibling_modules("crate::analysis::rules::RULES"), ["rules"]);
}

/// The modules form a line, so no cycle can come back: a module that needs
/// something from a later one must move it earlier instead.
#[test]
fn analysis_modules_import_only_modules_before_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/analysis");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("the analysis directory is readable")
        .map(|entry| entry.expect("a directory entry").file_name())
        .filter_map(|name| name.to_str()?.strip_suffix(".rs").map(str::to_owned))
        .filter(|name| name != "mod" && name != "tests")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = LINE.iter().map(|&name| name.to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "every analysis module has a place in LINE");
    for (position, module) in LINE.iter().enumerate() {
        let text = std::fs::read_to_string(dir.join(format!("{module}.rs")))
            .expect("an analysis module is readable");
        for name in sibling_modules(&text) {
            let before = LINE[..position].contains(&name);
            assert!(
                before,
                "analysis/{module}.rs uses `{name}`, which is not before it in the line"
            );
        }
    }
}

/// Wrappers that run their arguments as a command (or a shell string) are
/// unwrapped like sudo: what they run is what is judged.
#[test]
fn command_running_wrappers_are_unwrapped() {
    for command in [
        "runuser -u root -- rm -rf /",
        "runuser -u root rm -rf /etc",
        "runuser -l root -c 'rm -rf /'",
        "runuser root -c 'rm -rf /'",
        "setpriv --reuid=0 --regid=0 --init-groups rm -rf /",
        "setpriv --reuid 0 --regid 0 --groups 0 --inh-caps=-all rm -rf /",
        "unshare -m rm -rf /",
        "unshare --mount --user -r rm -rf /",
        "nsenter -t 1 -m -u -i -n -p rm -rf /",
        "nsenter --target 1 --mount rm -rf /",
        "chrt -f 99 rm -rf /",
        "chrt 10 rm -rf /",
        "taskset 0x1 rm -rf /",
        "taskset -c 0,1 rm -rf /",
        "ionice -c 3 -n 7 rm -rf /",
        "stdbuf -oL rm -rf /",
        "time rm -rf /",
        "doas -u root rm -rf /",
        "pkexec rm -rf /",
        "pkexec --user root rm -rf /",
        "systemd-run --user rm -rf /",
        "systemd-run -p User=root --unit=x rm -rf /",
        "systemd-run --unit x --scope rm -rf /",
        "strace -f -o /tmp/trace rm -rf /",
        "ltrace -o /tmp/t rm -rf /",
        "script -c 'rm -rf /' /dev/null",
        "script -qc 'rm -rf /' /dev/null",
        "sg root -c 'rm -rf /'",
        "sg root 'rm -rf /'",
        "su -c 'rm -rf /'",
        "su - root -c 'rm -rf /'",
        "su -lc 'rm -rf /'",
        "tcsh -c 'rm -rf /'",
        "csh -c 'rm -rf /'",
        "ksh -c 'rm -rf /'",
        "mksh -c 'rm -rf /'",
        "rbash -c 'rm -rf /'",
        "sudo -iu root rm -rf /etc",
        "flock -x /tmp/lk -c 'rm -rf /usr'",
        "prlimit --nofile=1024 rm -rf /etc",
        "ssh-agent rm -rf /etc",
        "dbus-run-session -- rm -rf /etc",
        "eatmydata rm -rf /usr",
        "trap 'kill -9 -1' EXIT",
    ] {
        assert!(denied_by(command).is_some(), "allowed: {command}");
    }
    for command in [
        "runuser -u app -- ls /",
        "runuser -l app -c 'ls /'",
        "setpriv --reuid=1000 ls",
        "unshare -m ls",
        "nsenter -t 1 -m ls",
        "chrt -f 99 ls",
        "taskset -c 0 make -j1",
        "ionice -c 3 cargo build",
        "stdbuf -oL tail -f log.txt",
        "time cargo test",
        "doas -u app ls",
        "pkexec ls",
        "systemd-run --user --scope make",
        "strace -f -o /tmp/trace ls",
        "ltrace ls",
        "script -c 'ls -la' /dev/null",
        "sg staff -c 'ls'",
        "su -c 'ls'",
        "tcsh -c 'echo rm -rf /'",
        "csh -c 'ls'",
        "sudo -uroot ls",
        "sudo -iu root ls",
        "flock /tmp/lk -c 'make'",
        "prlimit --nofile=1024 make",
        "eatmydata apt-get install -y curl",
        "trap 'rm -f /tmp/lock' EXIT",
        "trap - EXIT",
    ] {
        assert_eq!(denied_by(command), None, "{command}");
    }
}

/// System subdirectories, every direct child of /var/lib and /boot, and the
/// home's key directories are protected from recursive delete, chmod/chown -R
/// and mv; patterns inside a /var/lib child, other /etc subdirectories and
/// /usr/local are not.
#[test]
fn system_subdirectories_and_home_key_dirs_are_protected() {
    for command in [
        "rm -rf /usr/lib",
        "rm -rf /usr/lib64/",
        "rm -rf /usr/bin",
        "sudo rm -rf /usr/sbin",
        "rm -rf /usr/share",
        "rm -fr /usr/include",
        "rm -rf /var/lib",
        "rm -rf /var/lib/*",
        "rm -rf /var/lib/dpkg",
        "rm -rf /var/lib/docker/",
        "rm -rf /var/lib/d*",
        "rm -rf /etc/ssh",
        "rm -rf /boot/grub",
        "rm -rf /boot/efi",
        "rm -rf /lib/modules",
        "chmod -R 777 /usr/lib",
        "chown -R nobody /var/lib/postgresql",
        "mv /usr/bin /tmp/x",
        "mv /etc/ssh /tmp/ssh.bak",
        "rm -rf ~/.ssh",
        "rm -rf $HOME/.gnupg",
        "rm -rf /home/agent/.config",
        "rm -rf ~/.local",
        "chmod -R 777 ~/.ssh",
        "mv ~/.gnupg /tmp/g",
    ] {
        assert!(denied_by(command).is_some(), "allowed: {command}");
    }
    for command in [
        "rm -rf /etc/nginx",
        "rm -rf /etc/nginx/sites-enabled/*",
        "sudo rm -rf /var/lib/apt/lists/*",
        "rm -rf /var/lib/apt/*",
        "rm -rf /var/lib/docker/tmp",
        "rm -rf /usr/local/*",
        "rm -rf /usr/local/lib/python3",
        "rm -rf /usr/share/doc/foo",
        "rm -rf ~/.config/nvim",
        "rm -rf ~/.local/share/Trash/files/*",
        "rm -rf ~/.cache",
        "rm -rf .ssh",
        "chmod 700 ~/.ssh",
        "mv ~/.ssh/known_hosts ~/.ssh/known_hosts.old",
        "ls -R /usr/lib",
    ] {
        assert_eq!(denied_by(command), None, "{command}");
    }
}

/// Stopping the machine and signalling every process are refused in every
/// spelling; cancelling, asking for help, and signalling one process run.
#[test]
fn stopping_the_machine_and_killing_everything_are_refused() {
    for (command, rule) in [
        ("shutdown now", "stop-machine"),
        ("shutdown --reboot now", "stop-machine"),
        ("/usr/sbin/shutdown -h 23:59", "stop-machine"),
        ("sudo reboot", "stop-machine"),
        ("reboot --force --force", "stop-machine"),
        ("poweroff --no-wall", "stop-machine"),
        ("halt -f", "stop-machine"),
        ("init 6", "stop-machine"),
        ("sudo telinit 0", "stop-machine"),
        ("systemctl reboot -i", "stop-machine"),
        ("/usr/bin/systemctl --force reboot", "stop-machine"),
        ("systemctl isolate runlevel0.target", "stop-machine"),
        (
            "systemctl start reboot.target --job-mode=replace-irreversibly",
            "stop-machine",
        ),
        ("sleep 60 && reboot", "stop-machine"),
        ("kill -SIGRTMIN+5 1", "stop-machine"),
        ("kill -9 -1", "kill-all"),
        ("kill -SIGKILL -1", "kill-all"),
        ("kill -s 9 -1", "kill-all"),
        ("/bin/kill -s 9 -- -1", "kill-all"),
        ("env kill -9 -1", "kill-all"),
        ("sudo killall5 -15", "kill-all"),
        ("pkill -KILL -f '.*'", "kill-all"),
        ("pkill -v -f zzz", "kill-all"),
        ("killall --regexp '.*'", "kill-all"),
    ] {
        assert_eq!(denied_by(command).as_deref(), Some(rule), "{command}");
    }
    for command in [
        "shutdown -c",
        "shutdown --help",
        "reboot --help",
        "systemctl --version",
        "systemctl restart nginx",
        "systemctl start reboot-notifier.service",
        "telinit q",
        "kill 12345",
        "kill -TERM %1",
        "kill -0 $$",
        "kill -s HUP 4242",
        "kill -- -12345",
        "kill -l",
        "/bin/kill --version",
        "pkill -f myserver",
        "pkill -V",
        "killall -V",
        "echo reboot > /tmp/next-action",
        "rg -n 'reboot|poweroff|halt' .",
    ] {
        assert_eq!(denied_by(command), None, "{command}");
    }
}

/// Spellings found by the outside corpus: abbreviated long options, the
/// multiarch library directories, `taskset --cpu-list`, stopping the machine
/// over D-Bus.
#[test]
fn abbreviations_multiarch_dirs_and_dbus_stops_are_refused() {
    for command in [
        "rm --recursi ~/.ssh",
        "rm --r -f /etc",
        "rm --rec -f /etc",
        "chown --rec nobody /etc",
        "chmod -R -x /usr/bin",
        "chmod -R -wx /etc",
        "setfacl -R -m u:nobody:rwx /etc",
        "setfacl --recursive -b /usr/lib",
        "rm --recursive --force /usr/lib/x86_64-linux-gnu",
        "rm -rf /lib/x86_64-linux-gnu",
        "chmod --recur 0 /usr/bin",
        "mv --target=/tmp /usr/lib",
        "mv --t /tmp /usr/lib",
        "taskset --cpu-list 0-1 rm -rf /etc",
        "busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager PowerOff b false",
        "dbus-send --system --dest=org.freedesktop.login1 --type=method_call /org/freedesktop/login1 org.freedesktop.login1.Manager.Reboot boolean:false",
        "gdbus call -y -d org.freedesktop.login1 -o /org/freedesktop/login1 -m org.freedesktop.login1.Manager.Reboot false",
    ] {
        assert!(denied_by(command).is_some(), "allowed: {command}");
    }
    for command in [
        "rm --recursive ./build",
        "chmod --reference=a.txt b.txt",
        "chmod -R -x ./scripts",
        "chmod -R -v 755 ./dist",
        "setfacl -R -m u:me:rwx ./data",
        "setfacl -m u:me:r /etc/hosts",
        "chown --re=a.txt /etc/hosts",
        "rm -rf /usr/lib/x86_64-linux-gnu/libfoo.so.1.old",
        "mv --target=/tmp ./a ./b",
        "taskset --cpu-list 0-1 make",
        "busctl introspect org.freedesktop.login1 /org/freedesktop/login1",
        "busctl list",
    ] {
        assert_eq!(denied_by(command), None, "{command}");
    }
}

/// `--help`/`--version` (before `--`), and a lone `-V`/`-h`, of the
/// filesystem, wiping and delete tools only print and exit (`mkfs.TYPE`
/// stays refused by the built-in `^mkfs\.` pattern).
#[test]
fn help_and_version_of_destructive_tools_run() {
    for command in [
        "mkfs --help",
        "mkfs -V",
        "mke2fs -V",
        "mkswap -h",
        "wipefs --help",
        "wipefs -V",
        "shred --version",
        "rm -rf /etc --help",
    ] {
        assert_eq!(denied_by(command), None, "{command}");
    }
    for command in [
        "mkfs -V -t ext4 /dev/sda",
        "mkfs.ext4 -V /dev/sda1",
        "shred -u /dev/sda -- --help",
        "rm -rf -- --help /",
        "wipefs -a /dev/sda",
    ] {
        assert!(denied_by(command).is_some(), "allowed: {command}");
    }
}

fn check_in(command: &str, cwd: Option<&str>, vars: &[(&str, &str)]) -> Option<String> {
    let context = AnalysisContext {
        cwd: cwd.map(str::to_owned),
        vars: vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
    };
    let analyzer = Analyzer::new(AnalyzerConfig {
        home: Some("/home/agent".into()),
        ..AnalyzerConfig::default()
    });
    analyzer
        .analyze_in(command, &context)
        .decision
        .denial()
        .map(|denial| denial.rule_id.clone())
}

#[test]
fn variables_exported_in_an_earlier_call_are_seen() {
    for command in [
        "rm -rf $D",
        "rm -rf \"$D\"",
        "rm -rf ${D}",
        "rm -rf \"${D}/\"",
        "chmod -R 777 $D",
    ] {
        assert!(
            check_in(command, None, &[("D", "/etc")]).is_some(),
            "{command}"
        );
        assert_eq!(
            check_in(command, None, &[("D", "/tmp/build")]),
            None,
            "{command}"
        );
    }
}

#[test]
fn relative_targets_resolve_against_the_session_working_directory() {
    for (command, cwd) in [
        ("rm -rf *", "/"),
        ("rm -rf ./*", "/etc"),
        ("rm -rf ../..", "/home/agent/project"),
        ("rm -rf ..", "/home/agent/project"),
        ("rm -rf .", "/home/agent"),
        ("chown -R nobody .", "/usr"),
    ] {
        assert!(
            check_in(command, Some(cwd), &[]).is_some(),
            "{command} in {cwd}"
        );
    }
    for (command, cwd) in [
        ("rm -rf *", "/home/agent/project/build"),
        ("rm -rf ..", "/home/agent/project/target/debug"),
        ("rm -rf ./node_modules", "/home/agent/project"),
    ] {
        assert_eq!(
            check_in(command, Some(cwd), &[]),
            None,
            "{command} in {cwd}"
        );
    }
}

fn refused_in_project(command: &str) -> bool {
    check_in(command, Some("/home/agent/project"), &[]).is_some()
}

fn assert_refused(commands: &[&str]) {
    for command in commands {
        assert!(refused_in_project(command), "allowed: {command}");
    }
}

fn assert_allowed(commands: &[&str]) {
    for command in commands {
        assert_eq!(
            check_in(command, Some("/home/agent/project"), &[]),
            None,
            "{command}"
        );
    }
}

#[test]
fn vital_files_cannot_be_deleted_emptied_replaced_or_moved_away() {
    assert_refused(&[
        "rm /etc/passwd",
        "/bin/rm -f -- /etc/shadow",
        "unlink /etc/sudoers",
        "truncate -s0 /etc/passwd",
        "truncate --size=0 /lib64/ld-linux-x86-64.so.2",
        "ln -fs /dev/null /etc/shadow",
        "ln -f /etc/hostname /etc/sudoers",
        "sed -ni '' /etc/passwd",
        "sed -i.bak 's/.*//' /etc/shadow",
        "awk -i inplace 'NR<0' /etc/passwd",
        ": | sponge /etc/shadow",
        "mv /etc/passwd /etc/passwd.bak",
        "mv -f /tmp/s /etc/sudoers",
        "rm -f /boot/vmlinuz*",
        "cd /lib64 && rm ld-linux-x86-64.so.2",
        "echo x >& /etc/passwd",
        "rm -f /proc/1/root/etc/passwd",
    ]);
    assert_allowed(&[
        "cat /etc/passwd",
        "grep root /etc/passwd",
        "sed -n 1p /etc/shadow",
        "cp /etc/passwd ./passwd.copy",
        "rm ./passwd",
        "truncate -s 0 app.log",
        "mv /etc/nginx/old.conf /tmp/",
    ]);
}

#[test]
fn disk_tools_writing_a_device_are_refused_and_read_only_modes_run() {
    assert_refused(&[
        "mkreiserfs -ff /dev/sdb3",
        "blkdiscard --secure /dev/sdb",
        "sgdisk --clear /dev/sdc",
        "sfdisk /dev/vda <<< 'label: gpt'",
        "parted /dev/sda --script mklabel gpt",
        "echo -e 'g\\nw' | fdisk /dev/sdb",
        "pvcreate -ff -y /dev/sdc",
        "cryptsetup luksErase -q /dev/sdb1",
        "mdadm --create /dev/md0 --level=1 --raid-devices=2 /dev/sda1 /dev/sdb1",
        "badblocks -w -t random /dev/nvme0n1",
        "nvme sanitize /dev/nvme0 -a 2",
        "zpool create -o ashift=12 -f data mirror /dev/sdc /dev/sdd",
        "ddrescue -f image.img /dev/sda",
        "dd if=/dev/zero of=/dev/disk/by-id/ata-X",
        "wipefs -a /dev/mapper/vg-root",
    ]);
    assert_allowed(&[
        "fdisk -l",
        "sfdisk --list /dev/sda",
        "parted /dev/sda print",
        "badblocks -sv /dev/sda",
        "mkfs.ext4 -q /tmp/test.img",
        "mkswap /tmp/swapfile",
        "wipefs /dev/sda",
        "wipefs --no-act --all /dev/nvme0n1",
        "shred -uz ./tmp/credentials.json",
        "mkfs.btrfs --version",
        "mkfs.vfat --help",
        "echo hi > /dev/tcp/127.0.0.1/8080",
    ]);
}

#[test]
fn archivers_that_delete_what_they_take_are_refused_on_protected_paths() {
    assert_refused(&[
        "tar --create --file=/tmp/u.tar --remove-files /usr/lib",
        "tar cf /tmp/h.tar --remove-files /home/agent",
        "cd ~ && zip -rm /tmp/h.zip .ssh",
        "zip -mr /tmp/c.zip ~/.config",
        "7z a -sdel /tmp/e.7z /etc",
        "cd / && git clean -fdx",
        "crontab -r -u agent",
        "crontab - < /dev/null",
        "dpkg --purge --force-all libc6",
    ]);
    assert_allowed(&[
        "tar -czf /tmp/src.tgz --remove-files ./src",
        "zip -r backup.zip ~/.config",
        "git clean -fdx",
        "crontab -l",
        "apt-get purge -y nginx",
    ]);
}

#[test]
fn find_feeding_a_destructive_program_over_a_protected_tree_is_refused() {
    assert_refused(&[
        "find -O3 / -delete",
        "find -D tree / -delete",
        "find /etc -exec rm {} \\;",
        "find /etc -exec chmod 000 {} +",
        "find /usr -exec chown nobody {} +",
        "find /usr/lib | xargs rm -f",
        "find /etc -name '*.conf' -delete",
    ]);
    assert_allowed(&[
        "find ~ -name '*.swp' -delete",
        "find ~ -maxdepth 2 -name '*.log' -mtime +30 -delete",
        "find . -name '*.pyc' -exec rm {} +",
        "find /etc -name '*.conf' -exec cat {} +",
        "find /usr/lib -name 'libc*' | xargs ls -l",
    ]);
}

#[test]
fn magic_links_to_the_root_are_followed() {
    assert_refused(&[
        "rm -rf /proc/self/root/etc",
        "rm -rf /proc/1/root/etc",
        "chmod -R 000 /proc/1/root/etc",
        "rm -rf /proc/thread-self/root/etc",
        "rm -rf /proc/self/cwd/../.ssh",
    ]);
    assert_allowed(&["cat /proc/self/status", "ls /proc/self/root/tmp"]);
}

#[test]
fn literal_scripts_fed_to_a_shell_on_stdin_are_analysed() {
    assert_refused(&[
        "echo 'rm -rf /etc' | bash",
        "printf 'rm -rf /usr\\n' | sudo sh -s",
        "bash <<< 'rm -rf ~/.ssh'",
        "dash -s <<< 'chmod -R 000 /etc'",
        "bash <<'EOF'\nrm -rf /etc\nEOF",
        "cat <<< 'mkfs.ext4 /dev/sda1' | sh",
        "source /dev/stdin <<< 'rm -rf /boot'",
        ". <(echo 'rm -rf /etc')",
        "bash <(printf 'rm -rf /usr')",
        "bash < <(echo 'kill -9 -1')",
        "echo 'rm -rf /etc' | at now",
        "batch <<< 'reboot'",
        "echo 'rm -rf /etc' > /tmp/x.sh && bash /tmp/x.sh",
        "printf 'rm -rf /usr' > run.sh; chmod +x run.sh; ./run.sh",
        "echo 'rm -rf /' | tee /tmp/s >/dev/null; . /tmp/s",
    ]);
    assert_allowed(&[
        "echo 'echo hello' | bash",
        "bash <<< 'ls -la'",
        "echo 'rm -rf ./build' > clean.sh && bash clean.sh",
        "source <(kubectl completion bash)",
        "eval \"$(ssh-agent -s)\"",
        "echo 'rm -rf /' > notes.txt",
        "bash script.sh",
    ]);
}

#[test]
fn shell_options_and_script_arguments_are_followed() {
    assert_refused(&[
        "bash -o pipefail -c 'rm -rf /etc'",
        "bash +x -c 'rm -rf /usr'",
        "bash -O extglob -c 'rm -rf /etc'",
        "bash -c 'rm -rf \"$1\"' _ /etc",
        "sh -c 'rm -rf $0' /usr",
        "sh -c 'rm -rf \"$@\"' sh /tmp/x /etc",
        "bash -c '\"$@\"' _ rm -rf /etc",
        "bash -c 'shift; rm -rf \"$@\"' _ x /boot",
        "bash -c 'for d; do rm -rf \"$d\"; done' _ /etc",
        "D=/etc bash -c 'rm -rf $D'",
        "env D=/usr sh -c 'rm -rf \"$D\"'",
    ]);
    assert_allowed(&[
        "bash -c 'rm -rf \"$1\"' _ ./build",
        "bash -o errexit -c 'make test'",
        "D=./out bash -c 'rm -rf $D'",
    ]);
}

#[test]
fn literal_feeds_into_xargs_and_parallel_are_seen() {
    assert_refused(&[
        "echo /etc | xargs rm -rf",
        "printf '/usr\\n' | xargs -I{} rm -rf {}",
        "printf '%s\\0' /etc | xargs -0 rm -rf",
        "xargs rm -rf <<< /boot",
        "xargs -a <(echo /usr) rm -rf",
        "echo -rf /etc | xargs rm",
        "echo /dev/sda | xargs -I% dd if=/dev/zero of=%",
        "echo -1 | xargs kill -9",
        "ls -d /etc | sudo xargs rm -rf",
        "parallel rm -rf ::: /etc",
        "parallel -j0 rm -rf {} ::: /tmp/a /usr",
        "echo /etc | parallel rm -rf",
        "parallel ::: 'rm -rf /etc'",
    ]);
    assert_allowed(&[
        "echo ./build | xargs rm -rf",
        "printf '%s\\n' a.txt b.txt | xargs -I{} cp {} /tmp/",
        "parallel gzip ::: a.log b.log",
        "echo 1 2 3 | xargs -n1 echo",
    ]);
}

#[test]
fn brace_expansion_is_checked_member_by_member() {
    assert_refused(&[
        "rm -rf /{etc,usr}",
        "rm -rf /{e,}tc",
        "{rm,-rf,/etc}",
        "rm -rf ~/.{ssh,gnupg}",
        "chmod -R 000 /{etc,boot}",
        "{kill,-9,-1}",
        "rm -rf /{,usr/}lib",
        "mv /etc{,.bak}",
        "mv ~/.ssh{,.old}",
        "rm -f /etc/{passwd,shadow}",
    ]);
    assert_allowed(&[
        "rm -rf ./{build,dist}",
        "cp config{,.bak}",
        "mkdir -p src/{a,b}",
        "echo {rm,-rf,/}",
        "rm -rf '/{etc,usr}'",
        "echo ${HOME}",
    ]);
}

#[test]
fn variables_with_known_values_are_expanded_like_bash() {
    assert_refused(&[
        "D=/etcx; rm -rf ${D%x}",
        "D=x/etc; rm -rf ${D#x}",
        "D=/ETC; rm -rf ${D,,}",
        "D=/xtc; rm -rf ${D/x/e}",
        "rm -rf ${D:-/etc}",
        "rm -rf ${UNSET-/usr}",
        "D=/etc/passwd; rm -rf ${D%/*}",
        "s=/usr/lib/x; rm -rf ${s:0:8}",
        "t=/etc; ref=t; rm -rf \"${!ref}\"",
        "D=/etc; declare -n r=D; rm -rf \"$r\"",
        "read D <<< /etc; rm -rf $D",
        "read -r D < <(echo /etc); rm -rf \"$D\"",
        "mapfile -t A <<< /etc; rm -rf \"${A[@]}\"",
        "printf -v D '%s' /usr/bin; chmod -R 000 \"$D\"",
        "set -- /etc; rm -rf \"$@\"",
        "set -- rm -rf /etc; \"$@\"",
        "for d in /tmp/x /etc; do rm -rf \"$d\"; done",
        "for d in etc usr; do rm -rf /$d; done",
        "a=(/tmp /etc); rm -rf \"${a[@]}\"",
        "a=(/tmp /etc); rm -rf ${a[1]}",
        "c='rm -rf'; $c /etc",
        "IFS=,; x='rm,-rf,/etc'; $x",
        "rm${IFS}-rf${IFS}/etc",
        "D=$PWD/../../..; rm -rf $D/etc",
        "rm -rf $'\\057usr'",
        "$'\\162m' -rf /etc",
        "eval D=/etc; rm -rf $D",
    ]);
    assert_allowed(&[
        "rm -rf \"${BUILD_DIR:-./build}\"",
        "D=/tmp/x; rm -rf ${D%/x}/y",
        "for f in a b c; do rm -rf \"$f\"; done",
        "a=(x y); rm -rf \"${a[@]}\"",
        "set -- a b; rm -rf \"$@\"",
        "read D <<< ./out; rm -rf \"$D\"",
    ]);
}

#[test]
fn functions_are_analysed_with_the_arguments_they_are_called_with() {
    assert_refused(&[
        "f(){ rm -rf \"$@\"; }; f /etc",
        "f(){ rm -rf \"$1\"; }; f ~/.ssh",
        "function wipe { rm -rf \"$@\"; }; wipe /usr/lib",
        "f(){ \"$@\"; }; f rm -rf /etc",
        "g(){ rm -rf $1; }; f(){ g /etc; }; f",
        "f(){ rm -rf \"${1:-/etc}\"; }; f",
        "f(){ mkfs.ext4 \"$1\"; }; f /dev/sda1",
    ]);
    assert_allowed(&[
        "f(){ rm -rf \"$1\"; }; f ./build",
        "clean(){ rm -rf ./dist; }; clean",
        "f(){ f2; }; f",
    ]);
}

#[test]
fn substitutions_that_print_literals_are_expanded() {
    assert_refused(&[
        "$(echo rm) -rf /etc",
        "rm -rf $(echo /etc)",
        "rm -rf \"$(printf '%s' /usr/lib)\"",
        "rm -rf `echo /boot`",
        "$(echo rm -rf /etc)",
        "$(which rm) -rf /etc",
        "\"$(type -P rm)\" -rf /boot",
        "rm -rf $(dirname /etc/passwd)",
        "rm -rf $(realpath ../..)",
        "bash -c \"$(echo 'rm -rf /etc')\"",
        "kill -9 $(echo -1)",
    ]);
    assert_allowed(&[
        "rm -rf $(echo ./build)",
        "cd $(dirname ./src/main.rs)",
        "echo $(which rm)",
    ]);
}

#[test]
fn links_made_earlier_in_the_command_lead_where_they_point() {
    assert_refused(&[
        "ln -s / x && rm -rf x/",
        "ln -s / x && rm -rf x/*",
        "ln -sfn /usr/lib l; rm -rf l/",
        "ln -s ~/.ssh k && rm -rf k/*",
        "ln -s /etc e && chmod -R 000 e/",
        "ln -s /etc e; find e/ -delete",
        "ln -s /dev/sda disk.img && dd if=/dev/zero of=disk.img",
        "ln -s /etc/passwd p && : > p",
        "ln -s /dev/sda d && mkfs.ext4 d",
        "mkdir -p m && ln -s /usr m/u && rm -rf m/u/",
        "ln -s /home/agent h && rm -rf h/.gnupg",
        "mount --bind / ./mnt && rm -rf ./mnt/etc",
        "rm -rf /proc/$$/root/boot",
    ]);
    assert_allowed(&[
        "ln -s /etc etclink && rm -rf etclink",
        "ln -s /etc e && ls e/",
        "ln -s ../shared lib && rm -rf lib/cache",
        "ln -sf /usr/bin/python3 ./python && ./python -V",
    ]);
}

#[test]
fn comments_and_later_syntax_errors_do_not_hide_commands() {
    assert_refused(&[
        "eval $'#<<X\\nrm -rf /etc'",
        "bash -c $'#<<EOF\\nrm -rf /etc\\nEOF'",
        "sh -c $'#<<\\'END\\'\\nmkfs.ext4 /dev/sda1\\nEND'",
        "bash -c $'bash -s <<EOF\\nrm -rf /etc\\nEOF'",
        "bash -c $'cat <<X >/dev/null\\n(((\\nX\\nrm -rf /etc'",
        "bash -c $'rm -rf ~/.gnupg\\nfi fi'",
        "bash -c $'rm -rf $HOME/.ssh\\n)'",
        "# ((((((((((((((\nrm -rf /etc",
        "( ( rm -rf /usr ) )",
        "select x in a; do rm -rf /etc; break; done <<< 1",
        "echo $(( $(rm -rf /etc; echo 1) + 1 ))",
    ]);
    assert_allowed(&[
        "# rm -rf / is what we never run\necho ok",
        "echo hi # <<X ((((((((((((((",
        "(( i = i + 1 ))",
        "bash -c $'echo a\\nfi'",
    ]);
}

#[test]
fn working_directory_changes_by_cdpath_and_env_chdir_are_followed() {
    assert_refused(&[
        "CDPATH=/; cd etc && rm -rf *",
        "CDPATH=/usr; cd lib && rm -rf ./*",
        "env -C / rm -rf etc",
        "env --chdir=/usr rm -rf lib",
        "cd -P /proc/self/root && rm -rf etc",
        "cd ~+/../.. && rm -rf agent",
    ]);
    assert_allowed(&[
        "env -C ./sub rm -rf build",
        "CDPATH=/tmp; cd work && rm -rf *",
        "env -C / ls && rm -rf build",
    ]);
}

#[test]
fn aliases_defaults_lets_and_small_pipelines_have_known_values() {
    assert_refused(&[
        "shopt -s expand_aliases; alias del='rm -rf'; eval 'del /usr'",
        "bash -c $'shopt -s expand_aliases\\nalias x=\"rm -rf\"\\nx /etc'",
        ": ${D:=/etc}; rm -rf $D",
        "declare -A m=([k]=/etc); rm -rf ${m[k]}",
        "let n=1; a=(/tmp /usr); rm -rf ${a[n]}",
        "a[3]=/etc; rm -rf ${a[3]}",
        "D=/e; D+=tc; rm -rf $D",
        "typeset D=~/.ssh; rm -rf \"$D\"",
        "rm -rf /e$()tc",
        "rm -rf $(echo /ETC | tr A-Z a-z)",
        "rm -rf $(rev <<< cte/)",
        "rm -rf $(echo L2V0Yw== | base64 -d)",
        "$(echo cm0gLXJmIC9ldGM= | base64 -d)",
        "rm -rf \"$(realpath ~/.ssh)\"",
        "coreutils --coreutils-prog=rm -rf /etc",
        "trap -- 'dd if=/dev/zero of=/dev/sda' EXIT",
        "echo -n | crontab -",
        ": | crontab -",
    ]);
    assert_allowed(&[
        "alias ll='ls -la'; ll",
        ": ${OUT:=./out}; rm -rf $OUT",
        "rm -rf $(echo ./BUILD | tr A-Z a-z)",
        "echo 'a b' | crontab -",
        "crontab -l | grep backup",
    ]);
}

#[test]
fn fork_bombs_of_every_shape_are_refused() {
    for command in [
        "x(){ \"$FUNCNAME\"|\"$FUNCNAME\"& };x",
        "y(){ $FUNCNAME | $FUNCNAME & }; y",
        "z(){ ${FUNCNAME[0]}|${FUNCNAME[0]}& };z",
        "a(){ b & b; }; b(){ a & a; }; a",
        "ping(){ pong|pong& }; pong(){ ping|ping& }; ping",
        "while :; do sleep 1000 & done",
        "while true; do (sleep 999 &); done",
        "until false; do sleep 1000 & done",
        "for ((;;)); do yes > /dev/null & done",
        "while sleep 0; do sleep 600 & done",
        "yes 100 | xargs -P0 -n1 sleep",
        "seq inf | xargs -P 0 -I{} sleep 1000",
        "while :; do echo 600; done | xargs --max-procs=0 -n1 sleep",
        "printf 'bash $0 & bash $0\\n' > /tmp/b.sh && bash /tmp/b.sh",
        "echo '$0 & $0' > /tmp/fb.sh; chmod +x /tmp/fb.sh; /tmp/fb.sh",
        "perl -e 'fork while 1'",
        "python3 -c $'import os\\nwhile True: os.fork()'",
        "ruby -e 'loop { fork }'",
    ] {
        assert_eq!(
            check_in(command, Some("/home/agent/project"), &[]).as_deref(),
            Some("fork-bomb"),
            "{command}"
        );
    }
    assert_allowed(&[
        "seq 100 | xargs -P0 -n1 echo",
        "while read -r f; do gzip \"$f\" & done < files.txt; wait",
        "while :; do sleep 5; date; done &",
        "while true; do git pull --ff-only; sleep 300; done &",
        "until curl -sf http://localhost:3000/health; do sleep 1; done",
        "while :; do make & wait; done",
        "for ((i=0;i<4;i++)); do sleep 1 & done; wait",
        "x(){ [ \"$1\" -gt 0 ] && x $(( $1 - 1 )); }; x 3",
        "a(){ b; }; b(){ echo hi; }; a",
        "perl -e 'print fork'",
        "echo 'bash $0' > run.sh && bash run.sh",
    ]);
}

#[test]
fn when_the_fallback_cannot_tell_a_destructive_target_it_asks() {
    for command in [
        "mkfs.ext4 $DEV; echo 'unterminated",
        "dd if=/dev/zero of=${DISK}; echo \"unterminated",
        "chown -R nobody $D\n(((((((((((((((",
        "shred -u $KEY; echo 'x",
    ] {
        let decision = check(command);
        let Decision::Ask(denial) = &decision else {
            panic!("{command}: {decision:?}");
        };
        assert_eq!(denial.rule_id, "uncertain-target", "{command}");
        assert!(denial.fallback, "{command}");
        let message = denial.ask_message();
        assert!(
            message.contains("blocked") && message.contains("approval"),
            "{message}"
        );
    }
    // What the fallback can tell is decided as usual.
    assert!(matches!(
        check("rm -rf ~; echo 'unterminated"),
        Decision::Deny(_)
    ));
    assert!(check("rm -rf ./build; echo 'unterminated").is_allowed());
}

/// Wrappers × spellings × targets × the ways a target reaches the
/// program (directly, a variable, a positional parameter, stdin, xargs,
/// a function, a loop, braces): protected targets are refused in every
/// combination, project and /tmp targets run in every combination.
mod variants {
    use super::*;
    use proptest::prelude::*;

    const SPELLINGS: &[&str] = &[
        "rm -rf",
        "rm -r -f",
        "rm --recursive --force",
        "rm -fR --",
        "/bin/rm --rec -f",
        "chmod -R 000",
        "chown --recursive nobody",
    ];
    const PROTECTED: &[&str] = &[
        "/etc",
        "/usr/lib",
        "~/.ssh",
        "/boot",
        "/var/lib/dpkg",
        "/home",
    ];
    const HARMLESS: &[&str] = &["./build", "/tmp/cache", "dist", "target/debug"];
    const WRAPPERS: &[&str] = &[
        "",
        "sudo ",
        "sudo -u root ",
        "env A=1 ",
        "nice -n 5 ",
        "timeout 5 ",
        "nohup ",
    ];

    /// The command running `spelling` on `target` in form `form`.
    fn form(form: usize, wrapper: &str, spelling: &str, target: &str) -> String {
        match form {
            0 => format!("{wrapper}{spelling} {target}"),
            1 => format!("T={target}; {wrapper}{spelling} \"$T\""),
            2 => format!("{wrapper}bash -c '{spelling} \"$1\"' _ {target}"),
            3 => format!("echo '{spelling} {target}' | {wrapper}bash"),
            4 => format!("echo {target} | {wrapper}xargs {spelling}"),
            5 => format!("f(){{ {spelling} \"$@\"; }}; f {target}"),
            6 => format!("for t in /tmp/x {target}; do {wrapper}{spelling} \"$t\"; done"),
            7 => format!("{wrapper}{spelling} {{/tmp/y,{target}}}"),
            8 => format!("{wrapper}bash <<< '{spelling} {target}'"),
            _ => format!("set -- {target}; {wrapper}{spelling} \"$@\""),
        }
    }

    fn decision(command: &str) -> Option<String> {
        check_in(command, Some("/home/agent/project"), &[])
    }

    proptest! {
        #[test]
        fn protected_targets_are_refused_in_every_form(
            f in 0usize..10,
            wrapper in prop::sample::select(WRAPPERS),
            spelling in prop::sample::select(SPELLINGS),
            target in prop::sample::select(PROTECTED),
        ) {
            let command = form(f, wrapper, spelling, target);
            prop_assert!(decision(&command).is_some(), "allowed: {}", command);
        }

        #[test]
        fn project_targets_run_in_every_form(
            f in 0usize..10,
            wrapper in prop::sample::select(WRAPPERS),
            spelling in prop::sample::select(SPELLINGS),
            target in prop::sample::select(HARMLESS),
        ) {
            let command = form(f, wrapper, spelling, target);
            prop_assert_eq!(decision(&command), None, "{}", command);
        }
    }
}

#[test]
fn literal_shell_text_inside_other_languages_is_analysed() {
    assert_refused(&[
        "python3 -c 'import shutil; shutil.rmtree(\"/etc\")'",
        "python3 -c 'import os; os.system(\"rm -rf /etc\")'",
        "perl -MFile::Path -e 'rmtree(\"/etc\")'",
        "perl -e 'system \"rm -rf /usr\"'",
        "node -e 'require(\"fs\").rmSync(\"/etc\",{recursive:true,force:true})'",
        "ruby -e 'require \"fileutils\"; FileUtils.rm_rf(\"/etc\")'",
        "awk 'BEGIN{system(\"rm -rf /etc\")}'",
        "sed -n '1e rm -rf /etc' /etc/hostname",
        "find /etc -maxdepth 0 -exec sh -c 'rm -rf \"$1\"' _ {} \\;",
        "git -c alias.x='!rm -rf /etc' x",
        "tar -cf /dev/null /dev/null --checkpoint=1 --checkpoint-action=exec='rm -rf /etc'",
        "make -f /dev/stdin <<< $'x:\\n\\trm -rf /etc'",
        "gdb -q -batch -ex run --args rm -rf /etc",
        "vim -es -c '!rm -rf /etc' -c q",
    ]);
    assert_allowed(&[
        "python3 -c 'import shutil; shutil.rmtree(\"./build\")'",
        "python3 -c 'print(\"rm -rf /\")'",
        "python3 -c 'import os; os.system(\"ls /etc\")'",
        "node -e 'console.log(\"rmSync(/etc)\")'",
        "awk '{print $1}' data.txt",
        "sed -e 's/e rm/x/' notes.txt",
        "git -c alias.st=status st",
        "vim -c 'set number' file.txt",
        "gdb --args ./app --verbose",
    ]);
}

/// Loops and calls are walked per value and per call, within a budget:
/// nesting them cannot make the analysis exponential, and a negative
/// substring offset at the integer's edge does not overflow.
#[test]
fn nested_loops_and_calls_stay_cheap() {
    let values = (0..16)
        .map(|i| format!("v{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut loops = String::new();
    for depth in 0..8 {
        loops.push_str(&format!("for a{depth} in {values}; do "));
    }
    loops.push_str("echo hi; ");
    loops.push_str(&"done; ".repeat(8));
    let mut calls = String::new();
    for level in 0..8 {
        calls.push_str(&format!(
            "f{level}(){{ f{next} a; f{next} b; f{next} c; f{next} d; }}; ",
            next = level + 1
        ));
    }
    calls.push_str("f8(){ echo leaf; }; f0 x");
    let started = std::time::Instant::now();
    assert!(check(&loops).is_allowed());
    assert!(check(&calls).is_allowed());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        check("D=/etc; echo ${D:-9223372036854775808}; echo ${D: -9223372036854775808}")
            .is_allowed()
    );
}

#[test]
fn re_owning_ones_own_home_to_oneself_runs() {
    assert_allowed(&[
        "sudo chown -R agent:agent /home/agent",
        "chown -R agent ~",
        "sudo chown -R $USER:$USER ~",
        "sudo chgrp -R agent ~/.config",
        "chown -R agent: ~/.ssh",
    ]);
    assert_refused(&[
        "chown -R root ~",
        "sudo chown -R nobody:nogroup /home/agent",
        "chown -R agent /etc",
        "chown -R agent:root ~",
        "chmod -R 777 ~",
    ]);
}

#[test]
fn a_find_naming_a_protected_entry_feeds_it() {
    assert_refused(&[
        "find ~ -maxdepth 1 -name .ssh -exec rm -rf {} \\;",
        "find ~ -name .gnupg -exec rm -rf {} +",
        "find /home/agent -maxdepth 1 -name .config | xargs rm -rf",
    ]);
    assert_allowed(&[
        "find ~ -maxdepth 1 -name .cache -exec rm -rf {} +",
        "find . -name node_modules -exec rm -rf {} +",
        "find ~ -name '*.tmp' -exec rm -f {} +",
    ]);
}

#[test]
fn work_trees_startup_files_and_cd_in_substitutions_are_followed() {
    assert_refused(&[
        "GIT_WORK_TREE=/home/agent git clean -ffdx",
        "git init -q /tmp/g; GIT_DIR=/tmp/g/.git GIT_WORK_TREE=/etc git clean -fdx",
        "BASH_ENV=/dev/stdin bash -c true <<< 'rm -rf /etc'",
        "echo 'rm -rf /usr' > /tmp/env.sh; BASH_ENV=/tmp/env.sh bash -c true",
        "rm -rf \"$(cd /etc && pwd)\"",
        "rm -rf $(cd ~ && pwd)",
    ]);
    assert_allowed(&[
        "GIT_WORK_TREE=./site git clean -fdx",
        "BASH_ENV=/dev/stdin bash -c true <<< 'echo hi'",
        "cd \"$(cd ./src && pwd)\"",
    ]);
}

/// Text fed to the command that reads it again (found by fuzzing: the
/// analysis recursed until the stack overflowed, taking the server down).
#[test]
fn commands_that_feed_themselves_are_analysed_to_an_end() {
    let commands = [
        "source /dev/stdin<<<'parallel'",
        "source /dev/stdin <<< 'source /dev/stdin'",
        ". /dev/stdin <<< '. /dev/stdin'",
        "sh /dev/stdin <<< 'sh /dev/stdin'",
        "bash -s <<< 'bash -s'",
        "at now <<< 'at now'",
        "BASH_ENV=/dev/stdin bash -c true <<< 'BASH_ENV=/dev/stdin bash -c true'",
        "xargs <<< xargs",
        "printf 'xargs\\nxargs\\n' | xargs xargs",
        "parallel <<< 'parallel ::: parallel'",
    ];
    let analysis = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || commands.map(check))
        .expect("a thread")
        .join()
        .expect("no panic");
    assert!(analysis.iter().all(Decision::is_allowed), "{analysis:?}");
    // What such a feed carries is still seen.
    assert!(!check("source /dev/stdin <<< 'rm -rf /'").is_allowed());
}

/// Every bash position a command substitution can sit in is visited: the
/// same `$(rm -rf ~)` placed in each is refused.
#[test]
fn a_substitution_is_refused_in_every_bash_position() {
    const S: &str = "$(rm -rf ~)";
    let positions = [
        "[[ S ]]",
        "[[ x == S ]]",
        "[[ S != x ]]",
        "[[ x =~ S ]]",
        "[[ -n S ]]",
        "[[ ! S ]]",
        "[[ -e x && ( S ) ]]",
        "[[ -e x || S ]]",
        "if [[ S ]]; then :; fi",
        "while [[ S ]]; do :; done",
        "case S in x) ;; esac",
        "case x in S) ;; esac",
        "case x in y|S) :;; esac",
        "for ((i=S; i<1; i++)); do :; done",
        "for ((i=0; i<S; i++)); do :; done",
        "for ((i=0; i<1; i+=S)); do :; done",
        "(( S ))",
        "(( x = S ))",
        "echo $(( S ))",
        "echo $[ S ]",
        "a[S]=1",
        "declare a[S]=1",
        "echo ${a[S]}",
        "echo ${#a[S]}",
        "echo ${x:-S}",
        "echo ${x:=S}",
        "echo ${x:+S}",
        "echo ${x:?S}",
        "echo ${x-S}",
        "echo ${x+S}",
        "echo ${x#S}",
        "echo ${x##S}",
        "echo ${x%S}",
        "echo ${x%%S}",
        "echo ${x/S/y}",
        "echo ${x//y/S}",
        "echo ${x:S}",
        "echo ${x:0:S}",
        "echo ${x^^S}",
        "echo ${x,,S}",
        "x='S'; echo ${x@P}",
        "cat <<< S",
        "cat <<< \"S\"",
        "echo > S",
        "echo < S",
        "echo 2>> S",
        "echo &> S",
        "cat <(S)",
        "echo x > >(S)",
        "coproc S",
        "coproc { S; }",
        "f() { S; }",
        "f() { :; } > S",
        "{ :; } > S",
        "( : ) > S",
        "[[ x ]] > S",
        "select x in S; do :; done",
        "select x in a; do S; done",
        "echo \"`rm -rf ~`\"",
        "x=S",
        "export x=S",
        "local x=S",
        "let x=S",
        "echo {a,S}",
        "time S",
        "! S",
        "S",
        "\"S\"",
        "echo \"a S b\"",
        "cat <<EOF\nS\nEOF",
        "until S; do :; done",
        "if :; then :; elif S; then :; fi",
        "x=1 S",
        "env S",
    ];
    assert!(positions.len() >= 30);
    let mut allowed = Vec::new();
    for position in positions {
        let command = position.replace('S', S);
        if check(&command).is_allowed() {
            allowed.push(command);
        }
    }
    assert!(allowed.is_empty(), "allowed: {allowed:#?}");
}

/// Parentheses in quotes and here-document bodies are text: they send
/// nothing to the token fallback; a line that does not parse sends only
/// itself there, and the lines around it are still parsed.
#[test]
fn only_the_line_that_does_not_parse_takes_the_fallback() {
    let analyzer = Analyzer::default();
    let quoted = analyzer.check("ls\necho \"((((((((((((((((((((\"");
    assert_eq!(quoted, Decision::Allow { fallback: false });
    let here_doc = analyzer.check("cat <<EOF\n((((((((((((((((((((\nEOF\nls");
    assert_eq!(here_doc, Decision::Allow { fallback: false });
    assert!(super::fallback::has_deep_nesting(&format!(
        "echo \"$({})\"",
        "(".repeat(20)
    )));
    // `rm -rf "$d"` over literal loop values is bounded (allowed) only
    // when the loop is parsed: the bad line after it must not undo that,
    // and the `rm -rf ~` after it is still refused.
    let script = "for d in a b; do\n  rm -rf \"$d\"\ndone\necho 'unterminated\n";
    assert!(analyzer.check(script).is_allowed(), "{script}");
    let script = "if true; then\n  echo ok\nfi\nfoo ( bar\nrm -rf ~\n";
    let decision = analyzer.check(script);
    assert!(matches!(decision, Decision::Deny(_)), "{decision:?}");
}

/// `cd -`, `pushd` and `popd` are followed where the directory they go
/// back to is known, and asked about where it is not.
#[test]
fn directory_stacks_and_cd_back_are_followed_or_asked_about() {
    for command in [
        "cd /tmp; cd /; cd -; cd -; rm -rf *",
        "pushd /etc; pushd /tmp; popd; rm -rf *",
        "cd /etc; pushd /tmp; pushd; rm -rf *",
    ] {
        assert!(matches!(check(command), Decision::Deny(_)), "{command}");
    }
    for command in [
        "cd -; rm -rf *",
        "popd; rm -rf *",
        "cd \"$(cat dir)\" && rm -rf *",
        "pushd /tmp; popd; popd; rm -rf node_modules",
    ] {
        assert_eq!(
            denied_by(command).as_deref(),
            Some("analysis-limit"),
            "{command}"
        );
    }
    assert!(check("pushd /tmp/work; rm -rf *; popd; ls").is_allowed());
}

/// Past the analysis's limits (loop values, brace members) the command is
/// asked about or refused, never allowed because the rest went unseen.
#[test]
fn analysis_limits_ask_instead_of_allowing() {
    let many: Vec<String> = (0..20).map(|i| format!("d{i}")).collect();
    let loop_over = format!("for d in {} /etc; do rm -rf \"$d\"; done", many.join(" "));
    assert!(!check(&loop_over).is_allowed(), "{loop_over}");
    let few = "for d in build dist; do rm -rf \"$d\"; done";
    assert!(check(few).is_allowed());
    let members: Vec<String> = (0..1100).map(|i| format!("m{i}")).collect();
    let braces = format!("rm -rf {{{},/etc}}", members.join(","));
    assert!(!check(&braces).is_allowed());
    let members: Vec<String> = (0..80).map(|i| format!("m{i}")).collect();
    let braces = format!("rm -rf {{{},/etc}}", members.join(","));
    assert!(matches!(check(&braces), Decision::Deny(_)), "80 members");
    assert!(check("echo {1..200}").is_allowed());
}

/// A program given another name earlier in the command (bash's hash table,
/// a copy, a link) is judged as the program it is.
#[test]
fn a_program_renamed_earlier_is_judged_as_itself() {
    let in_project = |command: &str| {
        Analyzer::new(AnalyzerConfig {
            home: Some("/home/agent".into()),
            ..AnalyzerConfig::default()
        })
        .analyze_in(
            command,
            &AnalysisContext {
                cwd: Some("/home/agent/project".into()),
                ..AnalysisContext::default()
            },
        )
        .decision
    };
    for command in [
        "hash -p /bin/rm x; x -rf /",
        "hash -p /bin/rm ls; ls -rf ~",
        "BASH_CMDS[x]=/bin/rm; x -rf ~",
        "cp /bin/rm ./x; ./x -rf ~",
        "cp /bin/rm x && cp x y && ./y -rf ~",
        "install /usr/bin/rm /tmp/x; /tmp/x -rf ~",
        "ln -s /bin/rm x; ./x -rf ~",
        "ln /bin/rm x; ./x -rf ~",
        "cat /bin/rm > x; chmod +x x; ./x -rf ~",
    ] {
        assert!(matches!(check(command), Decision::Deny(_)), "{command}");
        assert!(
            matches!(in_project(command), Decision::Deny(_)),
            "{command}"
        );
    }
    for command in [
        "cp build/app ./app; ./app --help",
        "ln -sf /usr/bin/python3 py; ./py x.py",
        "hash -p /usr/bin/python3 py; py -c 'print(1)'",
    ] {
        assert!(in_project(command).is_allowed(), "{command}");
    }
}

/// A variable some program turns into code carries the code it holds into
/// the analysis, however it is set (prefix, `export`, `env`).
#[test]
fn code_in_variables_programs_run_is_analysed() {
    for command in [
        "GIT_SSH_COMMAND='rm -rf ~ #' git ls-remote ssh://h/r",
        "export GIT_SSH_COMMAND='rm -rf /etc #'; git fetch ssh://h/r",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=rm -rf ~;false'\" git status",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.lg GIT_CONFIG_VALUE_0='!rm -rf ~' git lg",
        "LESSOPEN='|rm -rf ~ %s' less /etc/hostname",
        "env LESSOPEN='|rm -rf ~ %s' less x",
        "PROMPT_COMMAND='rm -rf ~' bash --norc -i < /dev/null",
        "PS4='$(rm -rf ~)' bash -xc :",
        "GIT_EDITOR='rm -rf ~ #' git config --edit",
    ] {
        assert!(matches!(check(command), Decision::Deny(_)), "{command}");
    }
    for command in [
        "GIT_EDITOR=true git commit --amend --no-edit",
        "GIT_SSH_COMMAND='ssh -i ~/.ssh/deploy_key' git fetch",
        "PAGER=cat git log -1",
        "LESS=-R less README.md",
        "EDITOR=vim crontab -l",
        "NODE_OPTIONS=--max-old-space-size=4096 npm run build",
    ] {
        assert!(check(command).is_allowed(), "{command}");
    }
}

/// A quoted subscript is still evaluated where bash reads the word as a
/// variable name or an arithmetic operand.
#[test]
fn quoted_subscripts_read_as_names_are_analysed() {
    for command in [
        "[[ 0 -eq 'a[$(rm -rf ~)0]' ]]",
        "declare -i n='a[$(rm -rf ~)0]'",
        "unset 'a[$(rm -rf ~)0]'",
        "test -v 'a[$(rm -rf ~)0]'",
        "printf -v 'a[$(rm -rf ~)0]' x",
        "read 'a[$(rm -rf ~)0]' <<< x",
    ] {
        assert!(!check(command).is_allowed(), "{command}");
    }
    assert!(check("echo 'a[$(rm -rf ~)0]'").is_allowed());
    assert!(check("unset 'a[1]'; [[ -v a[0] ]]").is_allowed());
}

/// Options a program reads from its environment count as written.
#[test]
fn options_from_the_environment_count_as_written() {
    for command in [
        "TAR_OPTIONS=--remove-files tar -cf /tmp/h.tar /home/agent",
        "export TAR_OPTIONS=--remove-files; tar -cf /dev/null ~/.ssh",
        "ZIPOPT=-m zip -r /tmp/h.zip /home/agent",
    ] {
        assert!(matches!(check(command), Decision::Deny(_)), "{command}");
    }
    assert!(check("TAR_OPTIONS=--remove-files tar -cf /tmp/b.tar build").is_allowed());
    assert!(check("TAR_OPTIONS=-v tar -cf /tmp/h.tar /home/agent").is_allowed());
}

/// The dynamic loader run as a program runs its first operand: `ld.so
/// /bin/rm -rf ~` is `rm -rf ~`, whatever `--argv0` says, in every spelling
/// of the loader's name; the loader listing a program's libraries is not.
#[test]
fn the_dynamic_loader_is_a_wrapper() {
    for command in [
        "/lib64/ld-linux-x86-64.so.2 /bin/rm -rf ~",
        "/lib64/ld-linux-x86-64.so.2 --argv0 ls /bin/rm -rf ~",
        "/lib/ld-linux-aarch64.so.1 --library-path /tmp /usr/bin/rm -rf /etc",
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --preload x.so rm -rf /",
        "ld.so /usr/sbin/mkfs.ext4 -F /dev/sda",
        "/lib/ld-musl-x86_64.so.1 /bin/rm -rf /home/agent",
        "/lib64/ld64.so.2 /bin/rm -rf ~",
    ] {
        assert!(denied_by(command).is_some(), "allowed: {command}");
    }
    for command in [
        "/lib64/ld-linux-x86-64.so.2 --list /bin/ls",
        "/lib64/ld-linux-x86-64.so.2 /bin/ls -la",
        "/lib64/ld-linux-x86-64.so.2 --argv0 rm /bin/ls ~",
        "ldd /bin/rm",
        "ld -o out main.o",
    ] {
        assert!(denied_by(command).is_none(), "refused: {command}");
    }
}

/// An interpreter's one-liner (or the code it reads from standard input)
/// that deletes the home however the language names it, a vital file,
/// writes a block device or forks without end is refused; the same calls
/// on the project's own files, and loops that start nothing, run.
#[test]
fn interpreter_code_is_read_for_what_it_deletes_writes_and_forks() {
    assert_refused(&[
        "python3 -c \"__import__('shutil').rmtree(__import__('os').path.expanduser('~'))\"",
        "python3 - <<< 'import shutil; shutil.rmtree(\"/etc\")'",
        "python3 /dev/stdin <<< 'import shutil; shutil.rmtree(\"/home/agent\")'",
        "python3 -c 'import pathlib,shutil; shutil.rmtree(pathlib.Path.home() / \".ssh\")'",
        "python3 -c 'import os,shutil;shutil.rmtree(os.environ[\"HOME\"])'",
        "node -e 'require(\"fs\").rmSync(require(\"os\").homedir(),{recursive:true,force:true})'",
        "node --eval 'require(\"fs\").rmSync(\"/usr/lib\",{recursive:true})'",
        "perl -e 'unlink \"/etc/shadow\"'",
        "python3 -c 'import os; os.remove(\"/etc/passwd\")'",
        "perl -e 'use File::Path; rmtree(glob(\"~/.s?h\"))'",
        "ruby -e 'require \"fileutils\"; FileUtils.rm_rf(Dir.home)'",
        "tclsh <<< 'file delete -force /home/agent'",
        "python3 -c 'open(\"/dev/sda\",\"wb\").write(bytes(1<<20))'",
        "perl -e 'open F,\">\",\"/dev/sda\"; print F \"\\0\" x 4096'",
        "perl -e 'fork while fork'",
        "perl -e 'fork until 0'",
        "awk 'BEGIN{while(1) system(\"sleep 9999 &\")}'",
        "node -e 'for(;;)require(\"child_process\").spawn(\"sleep\",[\"9999\"])'",
    ]);
    assert_allowed(&[
        "python3 -c 'import shutil; shutil.rmtree(\"build\")'",
        "python3 -c 'import os; os.remove(\"out.txt\")'",
        "python3 -c 'import os; print(os.path.expanduser(\"~\"))'",
        "python3 -c 'import pathlib; print(pathlib.Path.home() / \".cache\")'",
        "python3 -c 'import shutil,pathlib; shutil.rmtree(pathlib.Path.home() / \".cache\" / \"pip\")'",
        "node -e 'require(\"fs\").rmSync(\"dist\",{recursive:true,force:true})'",
        "perl -e 'unlink \"tmp.log\"'",
        "python3 -c 'print(open(\"/dev/sda\").name)' 2>/dev/null; true",
        "perl -e 'my $pid = fork; wait'",
        "python3 -c 'import os\nwhile True:\n    break'",
        "awk 'BEGIN{for(i=0;i<3;i++) system(\"echo \" i)}'",
        "python3 - <<< 'print(1)'",
        "tclsh <<< 'puts hello'",
        "python3 script.py <<< 'import shutil; shutil.rmtree(\"/etc\")'",
    ]);
}
