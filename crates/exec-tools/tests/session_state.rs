//! The session's state (`cd`, `export`) survives any value: newlines, tabs,
//! quotes, invalid UTF-8, with and without a UTF-8 locale. Values are
//! compared inside the shell (`[ "$X" = ... ]`), never by printing, since
//! output redaction may apply to what a command prints.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::{World, meta};
use proptest::prelude::*;
use test_support::single_quoted;

/// The test process's environment without any locale variable (the
/// official TypeScript SDK and the MCP Inspector start servers so).
fn without_locale() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(name, _)| name != "LANG" && name != "LANGUAGE" && !name.starts_with("LC_"))
        .collect()
}

fn with_utf8_locale() -> Vec<(String, String)> {
    let mut vars = without_locale();
    vars.push(("LANG".to_owned(), "C.UTF-8".to_owned()));
    vars
}

/// `$'...'` quoting of any bytes, each as `\xHH`.
fn ansi_c(bytes: &[u8]) -> String {
    let mut quoted = String::from("$'");
    for byte in bytes {
        quoted.push_str(&format!("\\x{byte:02x}"));
    }
    quoted.push('\'');
    quoted
}

/// A command that reads `file` (any bytes but NUL) into variable `name`.
/// Not with `read`: in a UTF-8 locale bash's `read` drops a `\x01` that
/// follows an incomplete character; a command substitution keeps every
/// byte (the `x` keeps trailing newlines).
fn read_into(name: &str, file: &Path) -> String {
    let file = single_quoted(&file.to_string_lossy());
    format!("{name}=$(cat {file}; printf x); {name}=${{{name}%x}}")
}

fn run<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_with_a_newline_does_not_break_later_calls() {
    for vars in [without_locale(), with_utf8_locale()] {
        let world = World::with_env(vars, |config| config);
        let export = world
            .bash("export G=$'a\\nb' T=$'x\\ty' Q='say \"hi\"' E=")
            .await;
        assert!(export.success, "{}", export.text());
        let later = world
            .bash("[ \"$G\" = $'a\\nb' ] && [ \"$T\" = $'x\\ty' ] && [ \"$Q\" = 'say \"hi\"' ] && [ -z \"$E\" ] && [ \"${E+set}\" = set ] && echo same")
            .await;
        assert_eq!(later.text(), "same\n");
        world.bash("unset G").await;
        assert_eq!(world.bash("echo \"${G-unset}\"").await.text(), "unset\n");
    }
}

/// The analysis of a call sees what earlier calls left: exported variables
/// and the working directory. Checked by dry run, so nothing destructive runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_analysis_sees_variables_and_the_directory_earlier_calls_left() {
    let world = World::new();
    assert!(world.bash("export D=/etc").await.success);
    let dry = world.context.clone().with_dry_run(true);
    for command in ["rm -rf $D", "rm -rf \"$D\"/", "chmod -R 777 \"${D}\""] {
        let refused = world
            .call_in(&dry, "Bash", serde_json::json!({ "command": command }))
            .await;
        assert!(!refused.success, "{command}: {}", refused.text());
        assert_eq!(meta(&refused, "status"), "blocked", "{command}");
    }
    assert!(
        world
            .bash("export D=/tmp/agent-exec-not-there")
            .await
            .success
    );
    let allowed = world
        .call_in(&dry, "Bash", serde_json::json!({ "command": "rm -rf $D" }))
        .await;
    assert!(allowed.success, "{}", allowed.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_values_and_directories_survive_without_a_utf8_locale() {
    let world = World::with_env(without_locale(), |config| config);
    std::fs::create_dir(world.root().join("réper toire")).expect("mkdir");
    let first = world
        .bash("export N='café ☕' B=$'\\xff\\xfe' && cd 'réper toire'")
        .await;
    assert!(first.success, "{}", first.text());
    let later = world
        .bash(&format!(
            "[ \"$N\" = 'café ☕' ] && [ \"$B\" = $'\\xff\\xfe' ] && [ \"$PWD\" = {} ] && cd .. && echo same",
            single_quoted(&world.root().join("réper toire").to_string_lossy())
        ))
        .await;
    assert_eq!(
        later.text(),
        format!("same\n[cwd now {}]", world.root().display())
    );
    assert_eq!(
        world.bash("pwd").await.text(),
        format!("{}\n", world.root().display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporting_a_bad_path_does_not_stop_later_calls_from_starting() {
    let world = World::new();
    world.bash("export PATH=/nowhere").await;
    let later = world.bash("echo still here").await;
    assert!(later.success, "{}", later.text());
    assert_eq!(later.text(), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_that_never_saves_its_state_keeps_the_last_good_one() {
    let world = World::new();
    std::fs::create_dir(world.root().join("kept")).expect("mkdir");
    world.bash("cd kept && export LAST=good").await;
    // `exec` replaces the shell: nothing runs after it, not even the trap.
    let replaced = world.bash("export LAST=lost; cd ..; exec true").await;
    assert!(replaced.success, "{}", replaced.text());
    assert!(
        replaced
            .text()
            .contains("[cd/export not kept: the shell ended before saving its state"),
        "{}",
        replaced.text()
    );
    let later = world.bash("[ \"$LAST\" = good ] && pwd").await;
    assert_eq!(
        later.text(),
        format!("{}\n", world.root().join("kept").display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_that_is_not_whole_keeps_the_last_good_state() {
    let world = World::new();
    world.bash("export LAST=good").await;
    // A function named `builtin` swallows every `builtin printf` the save
    // makes: nothing is written.
    let broken = world.bash("builtin() { :; }; export LAST=lost").await;
    assert!(
        broken
            .text()
            .contains("[cd/export not kept: the shell ended before saving its state"),
        "{}",
        broken.text()
    );
    assert!(broken.success);
    // Half a record written into the channel (bash's copy of it, at 10,
    // while the command runs), then no save: refused as not whole.
    let cut = world
        .bash("export LAST=lost; printf '/tmp\\0declare -x LAST=\"lost\"' >&10; exec true")
        .await;
    assert!(
        cut.text()
            .contains("[cd/export not kept: the state the shell wrote was cut short or malformed"),
        "{}",
        cut.text()
    );
    let later = world.bash("[ \"$LAST\" = good ] && echo kept").await;
    assert_eq!(later.text(), "kept\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_with_its_own_exit_trap_keeps_its_state() {
    let world = World::new();
    let first = world.bash("trap 'echo bye' EXIT; export WITH_TRAP=1").await;
    assert_eq!(first.text(), "bye\n");
    assert_eq!(world.bash("echo $WITH_TRAP").await.text(), "1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_variables_do_not_carry_over_and_the_answer_says_so() {
    let world = World::new();
    std::fs::write(world.root().join("hook.sh"), "echo HOOK RAN\n").expect("write");
    let set = world
        .bash("export BASH_ENV=./hook.sh PROMPT_COMMAND=date KEPT=1")
        .await;
    assert!(set.success, "{}", set.text());
    assert!(
        set.text()
            .contains("[not carried over to later calls: BASH_ENV, PROMPT_COMMAND"),
        "{}",
        set.text()
    );
    let later = world
        .bash("echo \"${BASH_ENV-none} ${PROMPT_COMMAND-none} $KEPT\"")
        .await;
    assert_eq!(later.text(), "none none 1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_under_nounset_and_with_arrays_are_saved() {
    let world = World::new();
    let first = world
        .bash("set -u; declare -a ARR=(1 2); declare -A MAP=([k]=v); export ARR MAP PLAIN=p; unset NOT_THERE")
        .await;
    assert!(first.success, "{}", first.text());
    assert!(!first.text().contains("not kept"), "{}", first.text());
    assert_eq!(world.bash("echo \"$PLAIN\"").await.text(), "p\n");
}

/// Names a session may carry: valid shell names other than bash's own and
/// the start-up variables.
fn carried_name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}".prop_filter("not bash's own or a start-up variable", |name| {
        !exec_tools::is_shell_managed(name)
            && ![
                // bash's own variables it sets or reads as it runs, and
                // the locale, which the round trip does not keep apart
                "ENV",
                "SHELLOPTS",
                "BASHOPTS",
                "PROMPT_COMMAND",
                "LD_PRELOAD",
                "LD_AUDIT",
                "IFS",
                "PATH",
                "HOME",
                "PS4",
                "GROUPS",
                "HOSTNAME",
                "HOSTTYPE",
                "MACHTYPE",
                "OSTYPE",
                "OPTIND",
                "OPTARG",
                "OPTERR",
                "RANDOM",
                "SECONDS",
                "LINENO",
                "SRANDOM",
                "EPOCHSECONDS",
                "EPOCHREALTIME",
                "COLUMNS",
                "LINES",
                "HISTCMD",
                "FUNCNAME",
                "DIRSTACK",
                "PIPESTATUS",
                "COMP_WORDBREAKS",
                "MAILCHECK",
                "CDPATH",
                "LANG",
                "LANGUAGE",
                "TERM",
            ]
            .contains(&name.as_str())
            && !name.starts_with("LC_")
            && !name.starts_with("__agent_exec")
            && exec_policy::export_carries(name, None, Some(OsStr::new("x"))).is_ok()
    })
}

/// Any bytes but NUL; mostly short, sometimes up to 64 KiB.
fn any_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(1u8..=255, 0..64),
        1 => proptest::collection::vec(1u8..=255, 0..=65_536),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Any set of exported names and values round-trips through a call
    /// exactly, and a later `true` still runs.
    #[test]
    fn any_exported_values_round_trip_exactly(
        vars in proptest::collection::btree_map(carried_name(), any_value(), 1..6),
        utf8 in any::<bool>(),
    ) {
        let world = World::with_env(if utf8 { with_utf8_locale() } else { without_locale() }, |config| config);
        let mut export = Vec::new();
        let mut check = Vec::new();
        for (index, (name, value)) in vars.iter().enumerate() {
            if value.len() <= 64 {
                export.push(format!("export {name}={}", ansi_c(value)));
                check.push(format!("[ \"${name}\" = {} ]", ansi_c(value)));
            } else {
                let file = world.root().join(format!("value-{index}"));
                std::fs::write(&file, value).expect("write value");
                export.push(format!("{} && export {name}", read_into(name, &file)));
                check.push(format!("{} && [ \"${name}\" = \"$__V\" ]", read_into("__V", &file)));
            }
        }
        run(async {
            let first = world.bash(&export.join("\n")).await;
            prop_assert!(first.success, "{}", first.text());
            prop_assert!(!first.text().contains("not kept"), "{}", first.text());
            let later = world.bash(&format!("{} && echo same", check.join(" && "))).await;
            prop_assert_eq!(later.text(), "same\n");
            let plain = world.bash("true").await;
            prop_assert!(plain.success, "{}", plain.text());
            prop_assert_eq!(meta(&plain, "exit_code"), 0);
            Ok(())
        })?;
    }

    /// A `cd` into a directory of any name is kept exactly.
    #[test]
    fn a_cd_into_any_directory_name_is_kept(
        name in proptest::collection::vec(1u8..=255, 1..40)
            .prop_filter("a single path component, not `-` (bash's `cd -- -` is `cd \"$OLDPWD\"`)", |name| {
                !name.contains(&b'/') && !matches!(name.as_slice(), b"." | b".." | b"-")
            }),
        utf8 in any::<bool>(),
    ) {
        let world = World::with_env(if utf8 { with_utf8_locale() } else { without_locale() }, |config| config);
        let dir = world.root().join(OsStr::from_bytes(&name));
        std::fs::create_dir(&dir).expect("mkdir");
        let name_file = world.root().join("name-of-dir");
        std::fs::write(&name_file, &name).expect("write name");
        run(async {
            let first = world.bash(&format!("{} && cd -- \"$D\"", read_into("D", &name_file))).await;
            prop_assert!(first.success, "{}", first.text());
            prop_assert!(!first.text().contains("not kept"), "{}", first.text());
            let later = world
                .bash(&format!(
                    "{} && [ \"$PWD\" = {}/\"$D\" ] && [ . -ef {}/\"$D\" ] && echo same",
                    read_into("D", &name_file),
                    single_quoted(&world.root().to_string_lossy()),
                    single_quoted(&world.root().to_string_lossy()),
                ))
                .await;
            prop_assert_eq!(later.text(), "same\n");
            Ok(())
        })?;
    }
}
