//! Unit tests of input schemas: generation, validation and the messages that name a field.

use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::json;

/// Parameters shaped like the Bash tool's, to exercise every rule.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Params {
    /// The command to run.
    #[schemars(length(min = 1))]
    command: String,
    /// What it does.
    description: Option<String>,
    /// Milliseconds.
    #[schemars(range(min = 1000, max = 600_000))]
    timeout: Option<u64>,
    /// Run detached.
    #[serde(default)]
    run_in_background: bool,
    /// A mode.
    mode: Option<Mode>,
    /// Tags.
    #[schemars(length(max = 2))]
    tags: Option<Vec<Tag>>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Slow,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Tag {
    #[schemars(length(min = 1, max = 3))]
    name: String,
}

fn schema() -> InputSchema {
    InputSchema::for_type::<Params>().unwrap()
}

/// The message of each broken rule, in order.
#[expect(
    clippy::needless_pass_by_value,
    reason = "call sites read better with owned json! literals"
)]
fn errors(args: Value) -> Vec<String> {
    schema()
        .validate(&args)
        .unwrap_err()
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn generated_schema_is_inline_and_has_no_null_types() {
    assert_eq!(
        schema().json(),
        &json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The command to run."},
                "description": {"type": "string", "description": "What it does."},
                "timeout": {"type": "integer", "minimum": 1000, "maximum": 600_000, "description": "Milliseconds."},
                "run_in_background": {"type": "boolean", "default": false, "description": "Run detached."},
                "mode": {"type": "string", "enum": ["fast", "slow"], "description": "A mode."},
                "tags": {
                    "type": "array",
                    "maxItems": 2,
                    "description": "Tags.",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["name"],
                        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 3}}
                    }
                }
            }
        })
    );
}

#[test]
fn valid_arguments_pass_unchanged() {
    let args = json!({"command": "ls", "timeout": 1000, "run_in_background": true, "mode": "fast"});
    assert_eq!(schema().validate(&args), Ok(args));
}

#[test]
fn missing_required_field_is_named() {
    assert_eq!(errors(json!({})), ["command: is required"]);
}

#[test]
fn wrong_type_is_named_with_what_was_given() {
    assert_eq!(
        errors(json!({"command": 5})),
        ["command: must be a string, got integer 5"]
    );
    assert_eq!(
        errors(json!({"command": "ls", "run_in_background": "yes"})),
        [r#"run_in_background: must be a boolean, got string "yes""#]
    );
}

#[test]
fn fractional_number_is_not_an_integer() {
    assert_eq!(
        errors(json!({"command": "ls", "timeout": 1500.5})),
        ["timeout: must be an integer, got number 1500.5"]
    );
}

#[test]
fn out_of_range_names_both_bounds() {
    assert_eq!(
        errors(json!({"command": "ls", "timeout": 999})),
        ["timeout: must be between 1000 and 600000, got 999"]
    );
    assert_eq!(
        errors(json!({"command": "ls", "timeout": 600_001})),
        ["timeout: must be between 1000 and 600000, got 600001"]
    );
    assert_eq!(
        errors(json!({"command": "ls", "timeout": -1})),
        ["timeout: must be between 1000 and 600000, got -1"]
    );
}

#[test]
fn range_bounds_are_inclusive() {
    for timeout in [1000, 600_000] {
        assert!(
            schema()
                .validate(&json!({"command": "x", "timeout": timeout}))
                .is_ok()
        );
    }
}

#[test]
fn empty_string_breaks_min_length() {
    assert_eq!(
        errors(json!({"command": ""})),
        ["command: must not be empty"]
    );
}

#[test]
fn length_counts_characters_not_bytes() {
    let args = json!({"command": "x", "tags": [{"name": "ééé"}]});
    assert!(schema().validate(&args).is_ok());
    assert_eq!(
        errors(json!({"command": "x", "tags": [{"name": "éééé"}]})),
        ["tags[0].name: must have at most 3 characters, got 4"]
    );
}

#[test]
fn unknown_field_lists_the_known_ones() {
    assert_eq!(
        errors(json!({"command": "ls", "cwd": "/"})),
        [
            "cwd: unknown field, expected one of: command, description, mode, run_in_background, tags, timeout"
        ]
    );
}

#[test]
fn enum_lists_allowed_values() {
    assert_eq!(
        errors(json!({"command": "ls", "mode": "warp"})),
        [r#"mode: must be one of "fast", "slow", got string "warp""#]
    );
}

#[test]
fn array_length_and_items_are_checked() {
    assert_eq!(
        errors(json!({"command": "ls", "tags": [{"name": "a"}, {"name": "b"}, {"name": ""}]})),
        [
            "tags: must have at most 2 items, got 3",
            "tags[2].name: must not be empty",
        ]
    );
    assert_eq!(
        errors(json!({"command": "ls", "tags": [{}]})),
        ["tags[0].name: is required"]
    );
}

#[test]
fn null_optional_means_absent() {
    let args = json!({"command": "ls", "timeout": null, "description": null});
    assert_eq!(schema().validate(&args), Ok(json!({"command": "ls"})));
}

#[test]
fn null_required_is_a_type_error() {
    assert_eq!(
        errors(json!({"command": null})),
        ["command: must be a string, got null"]
    );
}

#[test]
fn arguments_must_be_an_object() {
    assert_eq!(
        errors(json!(["ls"])),
        ["arguments: must be an object, got array"]
    );
}

#[test]
fn every_broken_rule_is_reported() {
    assert_eq!(
        errors(json!({"timeout": 5, "extra": 1})),
        [
            "extra: unknown field, expected one of: command, description, mode, run_in_background, tags, timeout",
            "timeout: must be between 1000 and 600000, got 5",
            "command: is required",
        ]
    );
}

#[test]
fn long_strings_are_previewed() {
    let long = "x".repeat(100);
    let message = &errors(json!({"command": "ls", "timeout": long}))[0];
    assert!(
        message.ends_with(&format!("got string \"{}\"...", "x".repeat(40))),
        "{message}"
    );
}

#[test]
fn unsupported_keyword_is_refused() {
    let error = InputSchema::from_json(json!({
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^x"}}
    }))
    .unwrap_err();
    assert_eq!(
        error,
        SchemaError::UnsupportedKeyword {
            path: "/properties/a".into(),
            keyword: "pattern".into()
        }
    );
}

#[test]
fn references_are_refused() {
    let error = InputSchema::from_json(json!({"type": "object", "$ref": "#/$defs/x"})).unwrap_err();
    assert!(matches!(error, SchemaError::UnsupportedKeyword { keyword, .. } if keyword == "$ref"));
}

#[test]
fn root_must_be_an_object() {
    let error = InputSchema::from_json(json!({"type": "string"})).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the input schema must describe an object, found `\"string\"`"
    );
}

#[test]
fn malformed_keywords_are_refused() {
    for bad in [
        json!({"type": 5}),
        json!({"type": "object", "required": "a"}),
        json!({"type": "object", "properties": {"a": {"minLength": -1}}}),
        json!({"type": "object", "properties": {"a": {"type": "text"}}}),
        json!({"type": "object", "properties": {"a": false}}),
        json!({"type": "object", "additionalProperties": {}}),
    ] {
        assert!(
            matches!(
                InputSchema::from_json(bad.clone()),
                Err(SchemaError::InvalidKeyword { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn open_objects_keep_unknown_fields() {
    let schema =
        InputSchema::from_json(json!({"type": "object", "properties": {"a": true}, "minimum": 1}))
            .unwrap();
    assert_eq!(
        schema.validate(&json!({"a": [1], "b": 2})),
        Ok(json!({"a": [1], "b": 2}))
    );
}

#[test]
fn one_sided_ranges_read_naturally() {
    let schema = InputSchema::from_json(json!({
        "type": "object",
        "properties": {"low": {"type": "number", "minimum": 0.5}, "high": {"type": "integer", "maximum": 3}}
    }))
    .unwrap();
    let messages: Vec<String> = schema
        .validate(&json!({"low": 0.25, "high": 4}))
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "high: must be at most 3, got 4",
            "low: must be at least 0.5, got 0.25"
        ]
    );
    assert!(schema.validate(&json!({"low": 1, "high": 3})).is_ok());
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
        (1000u64..=600_000).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn arbitrary_arguments() -> impl Strategy<Value = Value> {
    let field = prop_oneof![
        Just("command".to_owned()),
        Just("description".to_owned()),
        Just("timeout".to_owned()),
        Just("run_in_background".to_owned()),
        Just("mode".to_owned()),
        Just("tags".to_owned()),
        "[a-z_]{1,10}",
    ];
    prop::collection::btree_map(field, arbitrary_json(), 0..6)
        .prop_map(|map| Value::Object(map.into_iter().collect()))
}

proptest! {
    /// Any JSON object either deserializes into valid params or yields
    /// errors that each name a field of the input or of the schema.
    #[test]
    fn any_object_parses_or_names_a_field(args in arbitrary_arguments()) {
        let schema = schema();
        match schema.validate(&args) {
            Ok(cleaned) => {
                let params: Result<Params, _> = serde_json::from_value(cleaned);
                prop_assert!(params.is_ok(), "validated but failed to deserialize: {args} {params:?}");
                let params = params.unwrap();
                prop_assert!(!params.command.is_empty());
                if let Some(timeout) = params.timeout {
                    prop_assert!((1000..=600_000).contains(&timeout));
                }
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
                for error in errors {
                    let top = error.field.split(['.', '[']).next().unwrap().to_owned();
                    let known = ["command", "description", "timeout", "run_in_background", "mode", "tags"];
                    prop_assert!(
                        keys.contains(&&top) || known.contains(&top.as_str()),
                        "error names no field: {error}"
                    );
                    let prefix = format!("{}: ", error.field);
                    prop_assert!(error.to_string().starts_with(&prefix), "{}", error);
                }
            }
        }
    }

    /// Validation never panics whatever the value, and is deterministic.
    #[test]
    fn any_value_is_validated_deterministically(args in arbitrary_json()) {
        let schema = schema();
        prop_assert_eq!(schema.validate(&args), schema.validate(&args));
    }
}
