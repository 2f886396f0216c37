//! Avro datums as the JSON records the runtime carries, and back
//! ([`AvroSchema`], [`AvroReader`], [`AvroWriter`]); module `to_json`
//! states the mapping, module `to_row` the rows flat records become
//! (whose JSON is the same), module `from_json` its reverse; module `container`
//! writes object container files, module `references` makes a schema that
//! uses other schemas' types stand alone.
//!
//! Invariant: a parsed schema lives as long as the process (it is leaked
//! once, so that datum readers and writers can borrow it for their own
//! life); a process parses each distinct schema text once
//! ([`AvroSchema::parse`] keeps them by text), so what leaks is bounded by
//! the schemas a job meets.

pub mod container;
mod from_json;
mod from_row;
pub mod references;
mod resolve;
mod to_json;
mod to_row;

use std::collections::HashMap;

use super::Written;
use std::sync::{Arc, Mutex, OnceLock};

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::ResolvedSchema;
use apache_avro::writer::datum::GenericDatumWriter;

/// A parsed Avro schema, shared.
#[derive(Clone)]
pub struct AvroSchema(Arc<Parsed>);

struct Parsed {
    schema: &'static Schema,
    resolved: ResolvedSchema<'static>,
    /// The schema as written (what a registry is given).
    text: String,
}

impl std::fmt::Debug for AvroSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AvroSchema").field(&self.0.text).finish()
    }
}

impl PartialEq for AvroSchema {
    fn eq(&self, other: &Self) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for AvroSchema {}

impl AvroSchema {
    /// Parses schema `text` (Avro's JSON form), once per process.
    pub fn parse(text: &str) -> Result<AvroSchema, String> {
        static PARSED: OnceLock<Mutex<HashMap<String, AvroSchema>>> = OnceLock::new();
        let parsed = PARSED.get_or_init(Default::default);
        let mut parsed = parsed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(schema) = parsed.get(text) {
            return Ok(schema.clone());
        }
        let schema = Schema::parse_str(text).map_err(|e| format!("not an Avro schema: {e}"))?;
        let schema: &'static Schema = Box::leak(Box::new(schema));
        let resolved =
            ResolvedSchema::try_from(schema).map_err(|e| format!("not an Avro schema: {e}"))?;
        let avro = AvroSchema(Arc::new(Parsed {
            schema,
            resolved,
            text: text.to_owned(),
        }));
        parsed.insert(text.to_owned(), avro.clone());
        Ok(avro)
    }

    /// The schema as written.
    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The schema `schema` (an object container file's, say), as ours.
    pub fn of(schema: &Schema) -> Result<AvroSchema, String> {
        let text = serde_json::to_string(schema)
            .map_err(|e| format!("an Avro schema that cannot be written: {e}"))?;
        AvroSchema::parse(&text)
    }

    /// The full name of a named schema (a record's), if it is one: what
    /// the record-name subject strategies name subjects by.
    pub fn full_name(&self) -> Option<String> {
        self.0.schema.name().map(|n| n.fullname(None))
    }

    /// Avro's Parsing Canonical Form of the schema: equal for schemas
    /// that read and write datums alike, however they are written.
    pub fn canonical_form(&self) -> String {
        self.0.schema.canonical_form()
    }

    fn schema(&self) -> &'static Schema {
        self.0.schema
    }
}

/// Reads datums written with one schema, resolved against another (Avro's
/// rules: fields added with defaults, promotions, aliases), as JSON.
pub struct AvroReader {
    /// Reads with the writer's schema.
    reader: GenericDatumReader<'static>,
    writer: AvroSchema,
    /// The schema values come out in: the reader's, else the writer's.
    shape: AvroSchema,
    /// Whether values are resolved from `writer` to `shape`.
    resolves: bool,
}

impl AvroReader {
    /// Reads datums written with `writer`, as `reader` (if given) sees
    /// them; `Err` when the two cannot be resolved.
    pub fn new(writer: &AvroSchema, reader: Option<&AvroSchema>) -> Result<AvroReader, String> {
        let datum = GenericDatumReader::builder(writer.schema())
            .build()
            .map_err(|e| format!("not an Avro schema: {e}"))?;
        Ok(AvroReader {
            reader: datum,
            writer: writer.clone(),
            shape: reader.unwrap_or(writer).clone(),
            resolves: reader.is_some_and(|r| r != writer),
        })
    }

    /// Appends datum `bytes` (all of them) as JSON to `out`.
    pub fn read(&self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let value = self.datum(bytes)?;
        self.convert(value, out)
    }

    /// Appends datum `bytes` (all of them) to `out` as a row when it is a
    /// flat record (`to_row`), else as JSON; says which.
    pub fn read_row_or_json(&self, bytes: &[u8], out: &mut Vec<u8>) -> Result<Written, String> {
        let value = self.datum(bytes)?;
        self.row_or_json(&value, out)
    }

    /// Datum `bytes` (all of them), resolved to the reader's schema.
    fn datum(&self, bytes: &[u8]) -> Result<apache_avro::types::Value, String> {
        let mut input = bytes;
        let value = (self.reader.read_value(&mut input))
            .map_err(|e| format!("not an Avro datum of its schema: {e}"))?;
        if !input.is_empty() {
            return Err(format!(
                "{} bytes are left after the Avro datum: not written with this schema",
                input.len()
            ));
        }
        self.resolved(value)
    }

    /// Appends `value`, read with the writer's schema (as an object
    /// container file's reader gives it), as JSON to `out`.
    pub fn convert(
        &self,
        value: apache_avro::types::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let value = self.resolved(value)?;
        self.write_json(&value, out)
    }

    /// Appends `value`, read with the writer's schema (as an object
    /// container file's reader gives it), to `out` as a row when it is a
    /// flat record, else as JSON; says which.
    pub fn convert_row_or_json(
        &self,
        value: apache_avro::types::Value,
        out: &mut Vec<u8>,
    ) -> Result<Written, String> {
        let value = self.resolved(value)?;
        self.row_or_json(&value, out)
    }

    /// Appends `value`, of the reader's schema, as a row when it is a flat
    /// record, else as JSON.
    fn row_or_json(
        &self,
        value: &apache_avro::types::Value,
        out: &mut Vec<u8>,
    ) -> Result<Written, String> {
        let shape = &self.shape.0;
        if to_row::write(value, shape.schema, shape.resolved.get_names(), out)? {
            return Ok(Written::Row);
        }
        self.write_json(value, out)?;
        Ok(Written::Json)
    }

    /// `value`, read with the writer's schema, in the reader's.
    fn resolved(
        &self,
        value: apache_avro::types::Value,
    ) -> Result<apache_avro::types::Value, String> {
        if !self.resolves {
            return Ok(value);
        }
        let (writer, shape) = (&self.writer.0, &self.shape.0);
        resolve::resolve(
            value,
            writer.schema,
            writer.resolved.get_names(),
            shape.schema,
            shape.resolved.get_names(),
        )
    }

    /// Appends `value`, of the reader's schema, as JSON to `out` (nothing
    /// on an error).
    fn write_json(
        &self,
        value: &apache_avro::types::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let start = out.len();
        let shape = &self.shape.0;
        to_json::write(value, shape.schema, shape.resolved.get_names(), out).inspect_err(|_| {
            out.truncate(start);
        })
    }
}

/// Writes JSON records, and rows, as datums of a schema.
pub struct AvroWriter {
    writer: GenericDatumWriter<'static>,
    schema: AvroSchema,
    /// How rows are written without JSON, when the schema allows it.
    rows: Option<from_row::RowPlan>,
}

impl AvroWriter {
    /// Writes datums of `schema`.
    pub fn new(schema: &AvroSchema) -> Result<AvroWriter, String> {
        let writer = GenericDatumWriter::builder(schema.schema())
            .build()
            .map_err(|e| format!("not an Avro schema: {e}"))?;
        let parsed = &schema.0;
        Ok(AvroWriter {
            writer,
            schema: schema.clone(),
            rows: from_row::RowPlan::new(parsed.schema, parsed.resolved.get_names()),
        })
    }

    /// The schema it writes.
    pub fn schema(&self) -> &AvroSchema {
        &self.schema
    }

    /// Appends `row` (a [`weir_flat::row`]) as a datum to `out`: the
    /// bytes [`write`](Self::write) gives its JSON, written directly when
    /// the schema and the row allow it (module `from_row`).
    pub fn write_row(&self, row: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(plan) = &self.rows
            && plan.write(row, out)
        {
            return Ok(());
        }
        self.write(&super::json_of_row(row)?, out)
    }

    /// Appends JSON `json` as a datum to `out`; `Err` names the field that
    /// does not fit.
    pub fn write(&self, json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let json: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
        let parsed = &self.schema.0;
        let value = from_json::value(&json, parsed.schema, parsed.resolved.get_names(), "")?;
        (self.writer.write_value_ref(out, &value))
            .map(drop)
            .map_err(|e| format!("cannot be written with the schema: {e}"))
    }
}

/// `schema`, or the type it names when it is a reference (`names`: the
/// named types of the schema it is part of).
fn named<'s>(
    schema: &'s Schema,
    names: &apache_avro::schema::NamesRef<'s>,
) -> Result<&'s Schema, String> {
    match schema {
        Schema::Ref { name } => (names.get(name).copied())
            .ok_or_else(|| format!("the schema names type {name}, which it does not define")),
        schema => Ok(schema),
    }
}

#[cfg(test)]
mod tests;
