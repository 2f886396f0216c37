//! A client of a Confluent-compatible schema registry (Confluent Schema
//! Registry, Karapace, Apicurio's `ccompat` API, Redpanda): schemas by id,
//! each fetched once ([`Registry::schema`]), and a subject's schema
//! registered or looked up ([`Registry::register`]). Blocking: sources and
//! sinks call it from their own threads, never from async code.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

/// How a subject is named from a topic and a schema's record name
/// (`subject_strategy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectStrategy {
    /// `<topic>-value` (Confluent's default, `TopicNameStrategy`).
    #[default]
    Topic,
    /// `<record full name>` (`RecordNameStrategy`).
    Record,
    /// `<topic>-<record full name>` (`TopicRecordNameStrategy`).
    TopicRecord,
}

impl SubjectStrategy {
    /// The subject of the values (or, with `keys`, the keys) of `topic`
    /// whose schema's record is `record` (a full name); `Err` when the
    /// strategy needs a record name and the schema has none.
    pub fn subject(self, topic: &str, record: Option<&str>, keys: bool) -> Result<String, String> {
        let record = || {
            record.ok_or_else(|| {
                "subject_strategy names subjects by the schema's record name, and the schema is not a named record".to_owned()
            })
        };
        Ok(match self {
            SubjectStrategy::Topic if keys => format!("{topic}-key"),
            SubjectStrategy::Topic => format!("{topic}-value"),
            SubjectStrategy::Record => record()?.to_owned(),
            SubjectStrategy::TopicRecord => format!("{topic}-{}", record()?),
        })
    }
}

/// A schema as the registry holds it, with the schemas it references.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stored {
    /// `AVRO`, `PROTOBUF` or `JSON`.
    pub kind: String,
    /// The schema's text.
    pub text: String,
    /// The schemas it references, each by the name the text uses for it
    /// (an Avro type's full name, a Protobuf import's path, a JSON
    /// Schema's `$ref`), with their own references.
    pub references: Vec<Referenced>,
}

/// A schema another references, by the name it is referenced by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referenced {
    /// The name the referencing schema uses.
    pub name: String,
    /// The schema.
    pub schema: Stored,
}

impl Stored {
    /// A schema that references nothing.
    pub fn new(kind: &str, text: &str) -> Stored {
        Stored {
            kind: kind.to_owned(),
            text: text.to_owned(),
            references: Vec::new(),
        }
    }

    /// Every schema it references, directly or through others, as (name,
    /// text): each once, after those it references itself.
    pub fn imports(&self) -> Vec<(&str, &str)> {
        fn walk<'s>(stored: &'s Stored, out: &mut Vec<(&'s str, &'s str)>) {
            for r in &stored.references {
                if out.iter().any(|(name, _)| *name == r.name) {
                    continue;
                }
                walk(&r.schema, out);
                if !out.iter().any(|(name, _)| *name == r.name) {
                    out.push((&r.name, &r.schema.text));
                }
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }
}

/// A reference as a sink registers it: the name its schema uses, and the
/// subject and version it is registered as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The name the referencing schema uses.
    pub name: String,
    /// The subject it is registered under.
    pub subject: String,
    /// Its version there.
    pub version: u32,
}

/// How deep references may nest (a cycle would be endless).
const MAX_DEPTH: usize = 16;

/// A registry at one URL, with the schemas fetched from it so far.
pub struct Registry {
    url: String,
    client: reqwest::blocking::Client,
    by_id: Mutex<HashMap<u32, Stored>>,
    /// Referenced schemas by subject and version.
    by_version: Mutex<HashMap<(String, u64), Stored>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The media type of the registry's API.
const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

/// How long a request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct ErrorBody {
    error_code: Option<i64>,
    message: Option<String>,
}

impl Registry {
    /// A client of the registry at `url` (its API's base, as
    /// `http://host:8081` or `http://host/apis/ccompat/v7`).
    pub fn new(url: &str) -> Result<Registry, String> {
        let client = reqwest::blocking::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Registry {
            url: url.trim_end_matches('/').to_owned(),
            client,
            by_id: Mutex::new(HashMap::new()),
            by_version: Mutex::new(HashMap::new()),
        })
    }

    /// The registry's URL, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema with id `id` and the schemas it references, fetched
    /// the first time only.
    pub fn schema(&self, id: u32) -> Result<Stored, FetchError> {
        if let Some(stored) = self.lock().get(&id) {
            return Ok(stored.clone());
        }
        let request = self.client.get(format!("{}/schemas/ids/{id}", self.url));
        let stored = self.fetch(request, &format!("schema {id}"), 0)?;
        self.lock().insert(id, stored.clone());
        Ok(stored)
    }

    /// Version `version` of `subject`, a schema referenced `depth` levels
    /// down.
    fn version(&self, subject: &str, version: u64, depth: usize) -> Result<Stored, FetchError> {
        let key = (subject.to_owned(), version);
        let cached = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stored) = cached.get(&key) {
            return Ok(stored.clone());
        }
        drop(cached);
        let url = format!(
            "{}/subjects/{}/versions/{version}",
            self.url,
            segment(subject)
        );
        let what = format!("version {version} of subject {subject} (a referenced schema)");
        let stored = self.fetch(self.client.get(url), &what, depth)?;
        let mut cached = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        cached.insert(key, stored.clone());
        Ok(stored)
    }

    /// The schema `request` answers with (`what`, for messages), with its
    /// references fetched.
    fn fetch(
        &self,
        request: reqwest::blocking::RequestBuilder,
        what: &str,
        depth: usize,
    ) -> Result<Stored, FetchError> {
        let url = &self.url;
        let body = match self.call(request, &format!("fetching {what}")) {
            Ok(body) => body,
            Err((Some(404), message)) => return Err(FetchError::Missing(message)),
            Err((_, message)) => return Err(FetchError::Unavailable(message)),
        };
        let mut stored = stored(&body).ok_or_else(|| {
            FetchError::Missing(format!(
                "schema registry {url}: {what} came without a schema: {body}"
            ))
        })?;
        let references = body["references"].as_array().map_or(&[][..], Vec::as_slice);
        if !references.is_empty() && depth >= MAX_DEPTH {
            return Err(FetchError::Missing(format!(
                "schema registry {url}: {what}: references nest deeper than {MAX_DEPTH} schemas (a cycle?)"
            )));
        }
        for r in references {
            let (Some(name), Some(subject), Some(version)) = (
                r["name"].as_str(),
                r["subject"].as_str(),
                r["version"].as_u64(),
            ) else {
                return Err(FetchError::Missing(format!(
                    "schema registry {url}: {what} has a reference without name, subject and version: {r}"
                )));
            };
            let schema = self.version(subject, version, depth + 1)?;
            stored.references.push(Referenced {
                name: name.to_owned(),
                schema,
            });
        }
        Ok(stored)
    }

    /// Registers `text` (of `kind`) under `subject`, or finds it there
    /// already; returns its id. A schema the subject's compatibility rule
    /// refuses is an error saying so.
    pub fn register(
        &self,
        subject: &str,
        kind: &str,
        text: &str,
        references: &[Reference],
    ) -> Result<u32, String> {
        let path = format!("{}/versions", segment(subject));
        let doing = format!("registering the schema of subject {subject}");
        let id = self.post_schema(path, (kind, text, references), &doing, "id")?;
        if references.is_empty() {
            self.lock().insert(id, Stored::new(kind, text));
        }
        Ok(id)
    }

    /// The version of `subject` that `text` (of `kind`, with
    /// `references`) is registered as.
    pub fn version_of(
        &self,
        subject: &str,
        kind: &str,
        text: &str,
        references: &[Reference],
    ) -> Result<u32, String> {
        let doing = format!("looking up the schema's version in subject {subject}");
        self.post_schema(
            segment(subject),
            (kind, text, references),
            &doing,
            "version",
        )
    }

    /// POSTs a schema to `subjects/<path>` (`doing` it, for messages) and
    /// reads the number `field` of the answer.
    fn post_schema(
        &self,
        path: String,
        (kind, text, references): (&str, &str, &[Reference]),
        doing: &str,
        field: &str,
    ) -> Result<u32, String> {
        let request = self.with_schema(path, kind, text, references);
        let reply = self.call(request, doing).map_err(|(_, message)| message)?;
        let number = reply[field].as_u64().and_then(|n| u32::try_from(n).ok());
        number.ok_or_else(|| {
            format!(
                "schema registry {}: {doing}: answered without {field:?}: {reply}",
                self.url
            )
        })
    }

    /// A POST to `subjects/<path>` of a schema.
    fn with_schema(
        &self,
        path: String,
        kind: &str,
        text: &str,
        references: &[Reference],
    ) -> reqwest::blocking::RequestBuilder {
        let mut body = json!({ "schema": text });
        if kind != "AVRO" {
            body["schemaType"] = json!(kind);
        }
        if !references.is_empty() {
            let references: Vec<_> = (references.iter())
                .map(|r| json!({"name": r.name, "subject": r.subject, "version": r.version}))
                .collect();
            body["references"] = json!(references);
        }
        (self.client.post(format!("{}/subjects/{path}", self.url)))
            .header("content-type", MEDIA)
            .body(body.to_string())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Stored>> {
        self.by_id.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `request` (`doing` it, for messages) and reads its JSON body;
    /// an error has the HTTP status, if one came.
    fn call(
        &self,
        request: reqwest::blocking::RequestBuilder,
        doing: &str,
    ) -> Result<serde_json::Value, (Option<u16>, String)> {
        let url = &self.url;
        let reply = (request.header("accept", MEDIA).send())
            .map_err(|e| (None, format!("schema registry {url}: {doing} failed: {e}")))?;
        let status = reply.status();
        let text = (reply.text()).map_err(|e| {
            let message = format!("schema registry {url}: {doing}: reading the answer: {e}");
            (None, message)
        })?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| {
                let message =
                    format!("schema registry {url}: {doing}: the answer is not JSON ({e}): {text}");
                (Some(status.as_u16()), message)
            });
        }
        let error: Option<ErrorBody> = serde_json::from_str(&text).ok();
        let message = (error.as_ref())
            .and_then(|e| e.message.clone())
            .unwrap_or(text.clone());
        let code = (error.and_then(|e| e.error_code)).unwrap_or(i64::from(status.as_u16()));
        let message = message.replace('\n', " ");
        let said = match status.as_u16() {
            409 => format!(
                "schema registry {url} refused the schema as incompatible with the subject's earlier versions ({doing}): {message}; \
                 change the schema compatibly (add fields with defaults) or the subject's compatibility rule"
            ),
            422 => {
                format!("schema registry {url} refused the schema as invalid ({doing}): {message}")
            }
            404 => format!("schema registry {url}: {doing}: not found (error {code}): {message}"),
            _ => format!("schema registry {url}: {doing}: HTTP {status} (error {code}): {message}"),
        };
        Err((Some(status.as_u16()), said))
    }
}

/// Why a schema could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// The registry has no such schema (or answered without one): the
    /// message naming it is bad.
    Missing(String),
    /// The registry did not answer as one: worth trying again later.
    Unavailable(String),
}

/// `subject` as one segment of a URL's path (a Protobuf import's subject
/// holds slashes): every byte but letters, digits and `-._~`
/// percent-encoded.
fn segment(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for byte in subject.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The schema of a registry answer (`{"schema", "schemaType"}`), its
/// references not yet fetched.
fn stored(body: &serde_json::Value) -> Option<Stored> {
    let kind = body["schemaType"].as_str().unwrap_or("AVRO");
    Some(Stored::new(kind, body["schema"].as_str()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_follow_the_strategies() {
        let record = Some("shop.Order");
        assert_eq!(
            SubjectStrategy::Topic
                .subject("orders", record, false)
                .unwrap(),
            "orders-value"
        );
        assert_eq!(
            SubjectStrategy::Topic
                .subject("orders", record, true)
                .unwrap(),
            "orders-key"
        );
        assert_eq!(
            SubjectStrategy::Record
                .subject("orders", record, true)
                .unwrap(),
            "shop.Order"
        );
        assert_eq!(
            SubjectStrategy::TopicRecord
                .subject("orders", record, false)
                .unwrap(),
            "orders-shop.Order"
        );
        assert!(
            SubjectStrategy::Record
                .subject("orders", None, false)
                .is_err()
        );
        assert_eq!(
            stored(&json!({"schema": "\"long\""})),
            Some(Stored::new("AVRO", "\"long\""))
        );
    }

    #[test]
    fn subjects_are_one_segment_of_a_path() {
        assert_eq!(segment("shop/address.proto"), "shop%2Faddress.proto");
        assert_eq!(segment("orders-value"), "orders-value");
        assert_eq!(segment("a b?"), "a%20b%3F");
    }

    /// A schema's imports come once each, after their own.
    #[test]
    fn imports_come_after_their_own_once_each() {
        let leaf = Stored::new("PROTOBUF", "leaf");
        let refer = |name: &str, schema: &Stored| Referenced {
            name: name.into(),
            schema: schema.clone(),
        };
        let mid = Stored {
            references: vec![refer("leaf.proto", &leaf)],
            ..Stored::new("PROTOBUF", "mid")
        };
        let top = Stored {
            references: vec![refer("mid.proto", &mid), refer("leaf.proto", &leaf)],
            ..Stored::new("PROTOBUF", "top")
        };
        assert_eq!(
            top.imports(),
            [("leaf.proto", "leaf"), ("mid.proto", "mid")]
        );
    }
}
