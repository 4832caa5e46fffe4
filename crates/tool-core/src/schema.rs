//! Input schemas: generated from a params type, published as JSON Schema,
//! and compiled into the checks applied to raw JSON arguments.
//!
//! Validation reads the very schema clients are shown, so what the schema
//! promises and what the tool accepts cannot drift apart. Only the keywords
//! listed in [`SUPPORTED_KEYWORDS`] may appear; compiling a schema with any
//! other keyword fails, so a new attribute can never be silently unchecked.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Number, Value};

/// Keywords the validator understands. Annotations (`description`,
/// `default`, `title`, `examples`, `format`) are kept and not checked.
const SUPPORTED_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "description",
    "default",
    "title",
    "examples",
    "format",
];

/// Why a params type cannot serve as a tool's input schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The root of the schema must describe a JSON object.
    #[error("the input schema must describe an object, found `{found}`")]
    RootNotObject {
        /// What the root's `type` was instead.
        found: String,
    },
    /// The schema uses a keyword the validator does not check.
    #[error("unsupported schema keyword `{keyword}` at `{path}`")]
    UnsupportedKeyword {
        /// Where in the schema (JSON pointer).
        path: String,
        /// The keyword.
        keyword: String,
    },
    /// A keyword holds a value of the wrong shape.
    #[error("schema keyword `{keyword}` at `{path}` has an invalid value")]
    InvalidKeyword {
        /// Where in the schema (JSON pointer).
        path: String,
        /// The keyword.
        keyword: String,
    },
}

/// Which rule an argument broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationRule {
    /// A required field is missing.
    Required,
    /// The value has the wrong JSON type.
    Type,
    /// A string or array is too short or too long.
    Length,
    /// A number is out of range.
    Range,
    /// A value is not one of the allowed ones.
    Enum,
    /// A field the schema does not declare.
    UnknownField,
    /// The arguments passed the schema but still failed to deserialize.
    Deserialize,
}

/// One broken rule, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// The field, as a dotted path (`arguments` for the whole object).
    pub field: String,
    /// The rule it broke.
    pub rule: ValidationRule,
    /// What the rule asks for and what was given.
    pub message: String,
}

impl ValidationError {
    fn new(field: &str, rule: ValidationRule, message: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            rule,
            message: message.into(),
        }
    }
}

/// A tool's input schema together with the checks compiled from it.
#[derive(Debug, Clone)]
pub struct InputSchema {
    json: Value,
    root: Node,
}

impl InputSchema {
    /// Generates, normalises and compiles the schema of `T`.
    ///
    /// Normalising inlines every subschema (no `$ref`), drops the `null`
    /// type and enum value schemars gives `Option` fields (absent and `null` both mean
    /// "not given"), and drops integer `format`s that are not JSON Schema.
    pub fn for_type<T: JsonSchema>() -> Result<Self, SchemaError> {
        let generator = SchemaSettings::draft2020_12()
            .with(|settings| {
                settings.inline_subschemas = true;
                settings.meta_schema = None;
            })
            .for_deserialize()
            .into_generator();
        let mut json = generator.into_root_schema_for::<T>().to_value();
        if let Value::Object(root) = &mut json {
            // The tool's own description speaks for it; the params type's doc
            // comment is for Rust readers.
            root.remove("title");
            root.remove("description");
            root.remove("$schema");
        }
        normalize(&mut json);
        Self::from_json(json)
    }

    /// Generates, normalises and compiles the schema of a tool's answers'
    /// metadata (MCP `outputSchema`): `T`'s fields, then `invalid_fields`
    /// (set when the arguments broke the input schema) and `output`, the
    /// answer's text. Only `output` is required: an answer refused before
    /// the tool ran (bad arguments, a panic) carries none of `T`'s facts.
    pub fn for_metadata<T: JsonSchema>() -> Result<Self, SchemaError> {
        let generator = SchemaSettings::draft2020_12()
            .with(|settings| {
                settings.inline_subschemas = true;
                settings.meta_schema = None;
            })
            .for_serialize()
            .into_generator();
        let mut json = generator.into_root_schema_for::<T>().to_value();
        normalize(&mut json);
        if let Value::Object(root) = &mut json {
            root.remove("title");
            root.remove("description");
            root.remove("$schema");
            root.insert("type".to_owned(), Value::from("object"));
            let properties = root
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(properties) = properties {
                properties.insert(
                    "invalid_fields".to_owned(),
                    serde_json::json!({
                        "description": "The arguments that broke the input schema (nothing ran).",
                        "type": "array",
                        "items": {"type": "string"}
                    }),
                );
                properties.insert(
                    "output".to_owned(),
                    serde_json::json!({
                        "description": "The answer's text, exactly as the content item has it: the output on success, the error message on failure.",
                        "type": "string"
                    }),
                );
            }
            root.insert("required".to_owned(), serde_json::json!(["output"]));
        }
        Self::from_json(json)
    }

    /// Compiles a schema given as JSON (already normalised).
    pub fn from_json(json: Value) -> Result<Self, SchemaError> {
        let root = Node::compile(&json, "")?;
        if root.types != [Kind::Object] {
            return Err(SchemaError::RootNotObject {
                found: json
                    .get("type")
                    .map_or_else(|| "none".to_owned(), Value::to_string),
            });
        }
        Ok(Self { json, root })
    }

    /// The schema as clients see it.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Checks `args` against the schema. On success returns the arguments
    /// with `null` optional fields removed, ready to deserialize; on failure
    /// every broken rule, in a stable order.
    pub fn validate(&self, args: &Value) -> Result<Value, Vec<ValidationError>> {
        let mut errors = Vec::new();
        let cleaned = self.root.check(args, "arguments", &mut errors);
        if errors.is_empty() {
            Ok(cleaned)
        } else {
            Err(errors)
        }
    }
}

fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".to_owned(), only);
                }
            }
            if let Some(Value::Array(allowed)) = map.get_mut("enum") {
                allowed.retain(|v| !v.is_null());
            }
            let integer_format = map.get("format").and_then(Value::as_str).is_some_and(|f| {
                f.starts_with("int") || f.starts_with("uint") || f == "double" || f == "float"
            });
            if integer_format {
                map.remove("format");
            }
            for child in map.values_mut() {
                normalize(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
    Null,
}

impl Kind {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "object" => Self::Object,
            "array" => Self::Array,
            "null" => Self::Null,
            _ => return None,
        })
    }

    fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Boolean,
            Value::Number(n) if n.is_i64() || n.is_u64() => Self::Integer,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }

    fn accepts(self, value: &Value) -> bool {
        let actual = Self::of(value);
        actual == self || (self == Self::Number && actual == Self::Integer)
    }

    fn with_article(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Integer => "an integer",
            Self::Number => "a number",
            Self::Boolean => "a boolean",
            Self::Object => "an object",
            Self::Array => "an array",
            Self::Null => "null",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
            Self::Null => "null",
        }
    }
}

/// The compiled checks of one schema node.
#[derive(Debug, Clone, Default)]
struct Node {
    /// Empty means any type.
    types: Vec<Kind>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    minimum: Option<Number>,
    maximum: Option<Number>,
    allowed: Option<Vec<Value>>,
    items: Option<Box<Node>>,
    /// Declared properties, sorted by name.
    properties: Vec<(String, Node)>,
    required: Vec<String>,
    additional_properties: bool,
}

impl Node {
    fn compile(schema: &Value, path: &str) -> Result<Self, SchemaError> {
        let Value::Object(map) = schema else {
            // `true` accepts anything; `false` is not something a params type produces.
            return match schema {
                Value::Bool(true) => Ok(Self {
                    additional_properties: true,
                    ..Self::default()
                }),
                _ => Err(invalid(path, "schema")),
            };
        };
        let mut node = Self {
            additional_properties: true,
            ..Self::default()
        };
        for (keyword, value) in map {
            if !SUPPORTED_KEYWORDS.contains(&keyword.as_str()) {
                return Err(SchemaError::UnsupportedKeyword {
                    path: pointer(path),
                    keyword: keyword.clone(),
                });
            }
            let bad = || invalid(path, keyword);
            match keyword.as_str() {
                "type" => {
                    let names: Vec<&str> = match value {
                        Value::String(name) => vec![name.as_str()],
                        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                        _ => return Err(bad()),
                    };
                    node.types = names
                        .into_iter()
                        .map(|name| Kind::parse(name).ok_or_else(bad))
                        .collect::<Result<_, _>>()?;
                }
                "minLength" | "minItems" => node.min_length = Some(value.as_u64().ok_or_else(bad)?),
                "maxLength" | "maxItems" => node.max_length = Some(value.as_u64().ok_or_else(bad)?),
                "minimum" => node.minimum = Some(value.as_number().ok_or_else(bad)?.clone()),
                "maximum" => node.maximum = Some(value.as_number().ok_or_else(bad)?.clone()),
                "enum" => node.allowed = Some(value.as_array().ok_or_else(bad)?.clone()),
                "items" => {
                    node.items = Some(Box::new(Self::compile(value, &format!("{path}/items"))?));
                }
                "required" => {
                    node.required = value
                        .as_array()
                        .ok_or_else(bad)?
                        .iter()
                        .map(|name| name.as_str().map(str::to_owned).ok_or_else(bad))
                        .collect::<Result<_, _>>()?;
                }
                "additionalProperties" => {
                    node.additional_properties = value.as_bool().ok_or_else(bad)?;
                }
                "properties" => {
                    for (name, property) in value.as_object().ok_or_else(bad)? {
                        let child = Self::compile(property, &format!("{path}/properties/{name}"))?;
                        node.properties.push((name.clone(), child));
                    }
                    node.properties.sort_by(|a, b| a.0.cmp(&b.0));
                }
                _ => {}
            }
        }
        Ok(node)
    }

    /// Checks `value`, pushing every broken rule; returns the value with
    /// `null` optional properties removed.
    fn check(&self, value: &Value, field: &str, errors: &mut Vec<ValidationError>) -> Value {
        if !self.types.is_empty() && !self.types.iter().any(|kind| kind.accepts(value)) {
            let expected: Vec<&str> = self.types.iter().map(|kind| kind.with_article()).collect();
            errors.push(ValidationError::new(
                field,
                ValidationRule::Type,
                format!("must be {}, got {}", expected.join(" or "), describe(value)),
            ));
            return value.clone();
        }
        if let Some(allowed) = &self.allowed
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            errors.push(ValidationError::new(
                field,
                ValidationRule::Enum,
                format!(
                    "must be one of {}, got {}",
                    list.join(", "),
                    describe(value)
                ),
            ));
        }
        match value {
            Value::String(text) => {
                let count = text.chars().count() as u64;
                self.check_length(count, "character", field, errors);
                value.clone()
            }
            Value::Number(number) => {
                self.check_range(number, field, errors);
                value.clone()
            }
            Value::Array(items) => {
                self.check_length(items.len() as u64, "item", field, errors);
                let checked = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| match &self.items {
                        Some(node) => node.check(item, &format!("{field}[{index}]"), errors),
                        None => item.clone(),
                    })
                    .collect();
                Value::Array(checked)
            }
            Value::Object(map) => Value::Object(self.check_object(map, field, errors)),
            Value::Null | Value::Bool(_) => value.clone(),
        }
    }

    fn check_object(
        &self,
        map: &Map<String, Value>,
        field: &str,
        errors: &mut Vec<ValidationError>,
    ) -> Map<String, Value> {
        // Top-level fields are named bare (`timeout`), nested ones by path.
        let child_name = |name: &str| {
            if field == "arguments" {
                name.to_owned()
            } else {
                format!("{field}.{name}")
            }
        };
        let mut cleaned = Map::new();
        // By name, so errors come in one order whatever order the client
        // wrote the fields in (serde_json keeps that order here).
        let mut fields: Vec<(&String, &Value)> = map.iter().collect();
        fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (name, value) in fields {
            let declared = self
                .properties
                .iter()
                .find(|(declared, _)| declared == name);
            match declared {
                Some((_, node)) => {
                    let required = self.required.iter().any(|r| r == name);
                    if value.is_null() && !required && !node.types.contains(&Kind::Null) {
                        // `null` for an optional argument means absent.
                        continue;
                    }
                    let checked = node.check(value, &child_name(name), errors);
                    cleaned.insert(name.clone(), checked);
                }
                None if self.additional_properties => {
                    cleaned.insert(name.clone(), value.clone());
                }
                None => {
                    let expected: Vec<&str> = self
                        .properties
                        .iter()
                        .map(|(name, _)| name.as_str())
                        .collect();
                    errors.push(ValidationError::new(
                        &child_name(name),
                        ValidationRule::UnknownField,
                        format!("unknown field, expected one of: {}", expected.join(", ")),
                    ));
                }
            }
        }
        for name in &self.required {
            if !map.contains_key(name) {
                errors.push(ValidationError::new(
                    &child_name(name),
                    ValidationRule::Required,
                    "is required",
                ));
            }
        }
        cleaned
    }

    fn check_length(&self, count: u64, unit: &str, field: &str, errors: &mut Vec<ValidationError>) {
        let plural = |n: u64| {
            if n == 1 {
                unit.to_owned()
            } else {
                format!("{unit}s")
            }
        };
        if let Some(min) = self.min_length
            && count < min
        {
            let message = if min == 1 && unit == "character" {
                "must not be empty".to_owned()
            } else {
                format!("must have at least {min} {}, got {count}", plural(min))
            };
            errors.push(ValidationError::new(field, ValidationRule::Length, message));
        }
        if let Some(max) = self.max_length
            && count > max
        {
            errors.push(ValidationError::new(
                field,
                ValidationRule::Length,
                format!("must have at most {max} {}, got {count}", plural(max)),
            ));
        }
    }

    fn check_range(&self, number: &Number, field: &str, errors: &mut Vec<ValidationError>) {
        let below = self
            .minimum
            .as_ref()
            .is_some_and(|min| less_than(number, min));
        let above = self
            .maximum
            .as_ref()
            .is_some_and(|max| less_than(max, number));
        if !below && !above {
            return;
        }
        let message = match (&self.minimum, &self.maximum) {
            (Some(min), Some(max)) => format!("must be between {min} and {max}, got {number}"),
            (Some(min), None) => format!("must be at least {min}, got {number}"),
            (None, Some(max)) => format!("must be at most {max}, got {number}"),
            (None, None) => return,
        };
        errors.push(ValidationError::new(field, ValidationRule::Range, message));
    }
}

/// `a < b` for JSON numbers, exact for integers of either sign.
fn less_than(a: &Number, b: &Number) -> bool {
    match (as_i128(a), as_i128(b)) {
        (Some(a), Some(b)) => a < b,
        _ => a.as_f64().unwrap_or(f64::NAN) < b.as_f64().unwrap_or(f64::NAN),
    }
}

fn as_i128(number: &Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

/// A short description of a value for messages: its type and a preview.
fn describe(value: &Value) -> String {
    const PREVIEW: usize = 40;
    let kind = Kind::of(value).name();
    match value {
        Value::Null => "null".to_owned(),
        Value::Object(_) | Value::Array(_) => kind.to_owned(),
        Value::String(text) if text.chars().count() > PREVIEW => {
            let head: String = text.chars().take(PREVIEW).collect();
            format!("{kind} {}...", Value::String(head))
        }
        _ => format!("{kind} {value}"),
    }
}

fn pointer(path: &str) -> String {
    if path.is_empty() {
        "/".to_owned()
    } else {
        path.to_owned()
    }
}

fn invalid(path: &str, keyword: &str) -> SchemaError {
    SchemaError::InvalidKeyword {
        path: pointer(path),
        keyword: keyword.to_owned(),
    }
}

#[cfg(test)]
mod tests;
