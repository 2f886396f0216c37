//! Avro schemas that use named types defined in other schemas (a schema
//! registry's references, each named by its type's full name): each
//! referenced definition is put in place of the first use of its name, in
//! the order Avro reads a schema, so that the schema stands alone and
//! reads, resolves and compares as any other.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// Avro's primitive type names, never references.
const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// Schema `text` with the named types it takes from `imports` (full name,
/// schema text) defined in place; `text` itself when it imports nothing.
pub fn inline(text: &str, imports: &[(&str, &str)]) -> Result<String, String> {
    if imports.is_empty() {
        return Ok(text.to_owned());
    }
    let mut definitions = HashMap::new();
    for (name, text) in imports {
        let definition: Value = serde_json::from_str(text)
            .map_err(|e| format!("the referenced schema {name} is not JSON: {e}"))?;
        definitions.insert(name.to_string(), definition);
    }
    let mut schema: Value =
        serde_json::from_str(text).map_err(|e| format!("not an Avro schema: not JSON: {e}"))?;
    let mut inliner = Inliner {
        definitions,
        defined: HashSet::new(),
    };
    inliner.walk(&mut schema, None);
    Ok(schema.to_string())
}

struct Inliner {
    /// Referenced definitions by full name.
    definitions: HashMap<String, Value>,
    /// The full names defined so far, in reading order.
    defined: HashSet<String>,
}

/// `name`'s full name in namespace `namespace`.
fn full_name(name: &str, namespace: Option<&str>) -> String {
    match namespace.filter(|n| !n.is_empty()) {
        Some(namespace) if !name.contains('.') => format!("{namespace}.{name}"),
        _ => name.to_owned(),
    }
}

impl Inliner {
    /// Inlines the references of `schema`, read in `namespace`.
    fn walk(&mut self, schema: &mut Value, namespace: Option<&str>) {
        match schema {
            Value::String(name) if !PRIMITIVES.contains(&name.as_str()) => {
                let full = full_name(name, namespace);
                if self.defined.contains(&full) {
                    return;
                }
                let Some(mut definition) = self.definitions.get(&full).cloned() else {
                    return; // not a reference: parsing says what it is
                };
                self.defined.insert(full.clone());
                if let Value::Object(object) = &mut definition {
                    keep_full_name(object, &full);
                }
                self.walk(&mut definition, namespace);
                *schema = definition;
            }
            Value::Array(branches) => {
                for branch in branches {
                    self.walk(branch, namespace);
                }
            }
            Value::Object(object) => self.walk_object(object, namespace),
            _ => {}
        }
    }

    fn walk_object(&mut self, object: &mut Map<String, Value>, namespace: Option<&str>) {
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match kind.as_deref() {
            Some(kind @ ("record" | "error" | "enum" | "fixed")) => {
                let name = object.get("name").and_then(Value::as_str).unwrap_or("");
                let own = match name.rsplit_once('.') {
                    Some((namespace, _)) => Some(namespace.to_owned()),
                    None => match object.get("namespace").and_then(Value::as_str) {
                        Some(namespace) => Some(namespace.to_owned()),
                        None => namespace.map(str::to_owned),
                    },
                };
                self.defined.insert(full_name(name, own.as_deref()));
                if !matches!(kind, "record" | "error") {
                    return;
                }
                let fields = object.get_mut("fields").and_then(Value::as_array_mut);
                for field in fields.into_iter().flatten() {
                    if let Some(t) = field.get_mut("type") {
                        self.walk(t, own.as_deref());
                    }
                }
            }
            Some("array") => {
                if let Some(items) = object.get_mut("items") {
                    self.walk(items, namespace);
                }
            }
            Some("map") => {
                if let Some(values) = object.get_mut("values") {
                    self.walk(values, namespace);
                }
            }
            _ => {
                if let Some(t) = object.get_mut("type") {
                    self.walk(t, namespace);
                }
            }
        }
    }
}

/// Names `definition` by its full name `full` when it names itself
/// relatively and has no namespace, so that where it lands does not
/// change its name.
fn keep_full_name(definition: &mut Map<String, Value>, full: &str) {
    let relative =
        (definition.get("name").and_then(Value::as_str)).is_some_and(|n| !n.contains('.'));
    if relative && !definition.contains_key("namespace") && full.contains('.') {
        definition.insert("name".into(), Value::from(full));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::avro::{AvroReader, AvroSchema, AvroWriter};

    const ADDRESS: &str = r#"{"type": "record", "name": "Address", "namespace": "shop",
        "fields": [{"name": "city", "type": "string"}, {"name": "kind", "type": "shop.Kind"}]}"#;
    const KIND: &str =
        r#"{"type": "enum", "name": "Kind", "namespace": "shop", "symbols": ["HOME", "WORK"]}"#;
    const ORDER: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship", "type": "Address"},
        {"name": "bill", "type": ["null", "shop.Address"]},
        {"name": "kinds", "type": {"type": "array", "items": "Kind"}}]}"#;

    /// A schema using a referenced type twice (relatively and by full
    /// name, in a union), and one the referenced type uses itself, stands
    /// alone once inlined: each type defined once, at its first use.
    #[test]
    fn referenced_types_are_defined_at_their_first_use() {
        let imports = [("shop.Kind", KIND), ("shop.Address", ADDRESS)];
        let text = inline(ORDER, &imports).unwrap();
        assert_eq!(text.matches("\"symbols\"").count(), 1, "{text}");
        assert_eq!(text.matches("\"city\"").count(), 1, "{text}");
        let schema = AvroSchema::parse(&text).unwrap();
        let json = r#"{"id":1,"ship":{"city":"Oslo","kind":"WORK"},"bill":null,"kinds":["HOME"]}"#;
        let mut datum = Vec::new();
        AvroWriter::new(&schema)
            .unwrap()
            .write(json.as_bytes(), &mut datum)
            .unwrap();
        let mut out = Vec::new();
        AvroReader::new(&schema, None)
            .unwrap()
            .read(&datum, &mut out)
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), json);
        // Without its references the schema does not parse, naming the type.
        let e = AvroSchema::parse(&inline(ORDER, &[]).unwrap()).unwrap_err();
        assert!(e.contains("Address"), "{e}");
        assert_eq!(inline(ORDER, &[]).unwrap(), ORDER);
    }
}
