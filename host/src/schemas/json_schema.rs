//! JSON Schema (the `json` format): a compiled schema that checks the JSON
//! records of a source or sink. Records stay the JSON text they are; the
//! schema only says which ones fit.
//!
//! The draft is the one the schema's `$schema` names (2020-12 without
//! one; Confluent's clients write draft-07 and say so). `$ref`s resolve
//! inside the schema and to the schemas it references in a registry (by
//! the `$ref` each is registered under); nothing is fetched from the
//! network or disk.
//! `format` keywords are annotations, as the drafts since 2019-09 say.

use std::sync::Arc;

use serde_json::Value;

/// A JSON Schema, compiled.
#[derive(Clone)]
pub struct JsonSchema {
    text: String,
    validator: Arc<jsonschema::Validator>,
    /// The schema's `title`, for the record-name subject strategies.
    title: Option<String>,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSchema")
            .field("title", &self.title)
            .finish()
    }
}

impl PartialEq for JsonSchema {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for JsonSchema {}

/// The schemas a schema references, by the `$ref` each is known by.
struct Imports(Vec<(String, Value)>);

impl jsonschema::Retrieve for Imports {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        let named = |name: &str| uri == name || uri.ends_with(&format!("/{name}"));
        match self.0.iter().find(|(name, _)| named(name)) {
            Some((_, schema)) => Ok(schema.clone()),
            None => Err(format!("{uri} is no schema this one references").into()),
        }
    }
}

impl JsonSchema {
    /// Compiles the schema `text`; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<JsonSchema, String> {
        JsonSchema::parse_with(text, &[])
    }

    /// Compiles the schema `text`, whose `$ref`s may name the schemas of
    /// `imports` (each by its `$ref`, with its text).
    pub fn parse_with(text: &str, imports: &[(&str, &str)]) -> Result<JsonSchema, String> {
        let schema: Value =
            serde_json::from_str(text).map_err(|e| format!("not a JSON Schema: not JSON: {e}"))?;
        let mut parsed = Vec::new();
        for (name, text) in imports {
            let value = serde_json::from_str(text)
                .map_err(|e| format!("the referenced schema {name} is not JSON: {e}"))?;
            parsed.push((name.to_string(), value));
        }
        let validator = (jsonschema::options().with_retriever(Imports(parsed)))
            .build(&schema)
            .map_err(|e| format!("not a valid JSON Schema: {e}"))?;
        let title = (schema.get("title").and_then(Value::as_str)).map(str::to_owned);
        Ok(JsonSchema {
            text: text.to_owned(),
            validator: Arc::new(validator),
            title,
        })
    }

    /// The schema as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its `title`, if it has one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Checks record `json` against the schema: an error names where the
    /// first misfit is (a JSON pointer into the record) and why.
    pub fn check(&self, json: &[u8]) -> Result<(), String> {
        let value: Value = serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
        self.check_value(&value)
    }

    /// [`check`](Self::check) of a parsed record.
    pub fn check_value(&self, value: &Value) -> Result<(), String> {
        match self.validator.validate(value) {
            Ok(()) => Ok(()),
            Err(e) => {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                Err(format!("does not fit the JSON Schema at {at}: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r##"{
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "amount": {"type": "number", "minimum": 0},
            "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}}
        },
        "required": ["id", "amount"],
        "additionalProperties": false,
        "definitions": {
            "line": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
        }
    }"##;

    #[test]
    fn records_that_fit_pass_and_others_name_where_and_why() {
        let schema = JsonSchema::parse(ORDER).unwrap();
        assert_eq!(schema.title(), Some("Order"));
        schema
            .check(br#"{"id": 1, "amount": 2.5, "lines": [{"sku": "a"}]}"#)
            .unwrap();
        for (record, at, why) in [
            (
                r#"{"id": "1", "amount": 2}"#,
                "at /id",
                "not of type \"integer\"",
            ),
            (r#"{"id": 1}"#, "at /", "\"amount\" is a required property"),
            (r#"{"id": 1, "amount": -1}"#, "at /amount", "minimum"),
            (
                r#"{"id": 1, "amount": 1, "x": 0}"#,
                "at /",
                "Additional properties",
            ),
            (
                r#"{"id": 1, "amount": 1, "lines": [{"sku": "a"}, {}]}"#,
                "at /lines/1",
                "\"sku\" is a required property",
            ),
            (r#"{"id": 1,"#, "not JSON", ""),
        ] {
            let err = schema.check(record.as_bytes()).unwrap_err();
            assert!(err.contains(at) && err.contains(why), "{record}: {err}");
        }
    }

    /// A `$ref` to a schema the registry says this one references
    /// resolves to it; without it, the schema does not compile.
    #[test]
    fn references_to_other_schemas_resolve() {
        let line =
            r#"{"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}"#;
        let order = r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"lines": {"type": "array", "items": {"$ref": "line.json"}}}}"#;
        let schema = JsonSchema::parse_with(order, &[("line.json", line)]).unwrap();
        schema.check(br#"{"lines": [{"sku": "a"}]}"#).unwrap();
        let err = schema.check(br#"{"lines": [{"sku": 1}]}"#).unwrap_err();
        assert!(err.contains("at /lines/0/sku"), "{err}");
        let err = JsonSchema::parse(order).unwrap_err();
        assert!(err.contains("line.json"), "{err}");
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        let err = JsonSchema::parse("{\"type\": 3}").unwrap_err();
        assert!(err.starts_with("not a valid JSON Schema"), "{err}");
        let err = JsonSchema::parse("{").unwrap_err();
        assert!(err.starts_with("not a JSON Schema: not JSON"), "{err}");
    }
}
