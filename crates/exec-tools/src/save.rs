//! `save`: an approval kept as an `allow` rule in the policy file, as
//! Codex's and Claude Code's "always allow" do. The rule matches exactly
//! the simple commands of the approved command (an anchored regex of each,
//! as rules see them) and carries the command as its `match` example, so
//! the start-up check runs it like any other rule's. The file is written
//! only when the whole file, rule included, still loads: a saved rule can
//! never keep the server from starting.

use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use exec_policy::{Analyzer, Policy};

/// One save at a time: two would read the same file and lose one rule.
static SAVING: Mutex<()> = Mutex::new(());

/// Saves an approval of `command` as an `allow` rule in the policy file
/// ([`crate::save`]); the line the answer ends with says which rule, or
/// why nothing was saved (the approval is remembered either way).
pub(crate) fn save_note(exec: &crate::environment::ExecEnvironment, command: &str) -> String {
    let saved = if exec.redact(command) == command {
        save_rule(&exec.analyzer, exec.config.policy_file.as_deref(), command)
    } else {
        Err(
            "the command holds a secret value, which is never written to the policy file"
                .to_owned(),
        )
    };
    match saved {
        Ok(id) => format!(
            "[approval saved as rule {id} in {}]",
            exec.config
                .policy_file
                .as_deref()
                .map_or_else(String::new, |path| exec.redact(&path.to_string_lossy()))
        ),
        Err(why) => format!(
            "[approval not saved as a rule: {}; remembered until the server stops]",
            exec.redact(&why)
        ),
    }
}

/// Appends an `allow` rule for `command` to `policy_file`; the rule's id,
/// or why nothing was saved.
pub(crate) fn save_rule(
    analyzer: &Analyzer,
    policy_file: Option<&Path>,
    command: &str,
) -> Result<String, String> {
    let Some(path) = policy_file else {
        return Err("the server runs without a policy file (`--policy`)".to_owned());
    };
    let Some(texts) = analyzer.rule_texts(command) else {
        return Err(
            "a command fed by another one (a pipe or redirection) cannot be saved as a rule: \
             the rule would allow it whatever feeds it"
                .to_owned(),
        );
    };
    if texts.is_empty() {
        return Err("the command runs no program".to_owned());
    }
    let alternatives: Vec<String> = texts.iter().map(|text| regex::escape(text)).collect();
    let regex = format!("^(?:{})$", alternatives.join("|"));
    let _saving = SAVING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let old =
        std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let id = format!("saved-{}", rule_number(&old));
    let rule = format!(
        "\n[[rule]]\nid = {}\ndecision = \"allow\"\nregex = {}\nreason = \"saved from an approval\"\nmatch = [{}]\n",
        toml_string(&id),
        toml_string(&regex),
        toml_string(command),
    );
    let separator = if old.is_empty() || old.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    let new = format!("{old}{separator}{rule}");
    Policy::parse(&new, path)
        .map_err(|error| format!("the policy file would not load with it: {error}"))?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(format!("{separator}{rule}").as_bytes()))
        .map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(id)
}

/// The number for the next `saved-N` rule of a file.
fn rule_number(text: &str) -> usize {
    (1..)
        .find(|n| !text.contains(&format!("\"saved-{n}\"")))
        .unwrap_or(1)
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyzer(path: &Path) -> Analyzer {
        Analyzer::new(Policy::load(path).expect("loads").analyzer)
    }

    #[test]
    fn a_saved_rule_allows_the_command_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "# mine\n").expect("write");
        let command = "X=$(mktemp) && rm -rf \"$X\"";
        assert_eq!(analyzer(&path).check(command).name(), "ask");
        let id = save_rule(&analyzer(&path), Some(&path), command).expect("saved");
        assert_eq!(id, "saved-1");
        let saved = analyzer(&path);
        assert_eq!(saved.check(command).name(), "allow");
        assert_eq!(
            saved.check("X=$(mktemp) && rm -rf \"$X\" \"$X\"").name(),
            "ask"
        );
        assert_eq!(saved.check("rm -rf \"$Y\"").name(), "ask");
        assert!(
            std::fs::read_to_string(&path)
                .expect("read")
                .starts_with("# mine\n")
        );
        let id = save_rule(&saved, Some(&path), "rm -rf \"$Y\"").expect("saved");
        assert_eq!(id, "saved-2");
        assert_eq!(analyzer(&path).check("rm -rf \"$Y\"").name(), "allow");
    }

    #[test]
    fn what_cannot_be_saved_says_why_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("policy.toml");
        let ask = "[[rule]]\nid = \"mine\"\ndecision = \"ask\"\nprogram = \"touch\"\n";
        std::fs::write(&path, ask).expect("write");
        let refused = |command: &str, file: Option<&Path>| {
            save_rule(&analyzer(&path), file, command).expect_err("not saved")
        };
        assert!(refused("echo x | sh", Some(&path)).contains("pipe"));
        assert!(refused("touch a", None).contains("without a policy file"));
        // An `ask` rule of the file wins over an `allow` one: the example
        // check fails, so nothing is written.
        assert!(refused("touch a", Some(&path)).contains("would not load"));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), ask);
    }

    #[test]
    fn toml_strings_escape_what_toml_needs() {
        assert_eq!(
            toml_string("a\"b\\c\nd\u{1b}"),
            "\"a\\\"b\\\\c\\nd\\u001B\""
        );
    }
}
