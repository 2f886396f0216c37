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

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// `AVRO`, `PROTOBUF` or `JSON`.
    pub kind: String,
    /// The schema's text.
    pub text: String,
}

/// A registry at one URL, with the schemas fetched from it so far.
pub struct Registry {
    url: String,
    client: reqwest::blocking::Client,
    by_id: Mutex<HashMap<u32, Stored>>,
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
        })
    }

    /// The registry's URL, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema with id `id`, fetched the first time only.
    pub fn schema(&self, id: u32) -> Result<Stored, FetchError> {
        if let Some(stored) = self.lock().get(&id) {
            return Ok(stored.clone());
        }
        let request = self.client.get(format!("{}/schemas/ids/{id}", self.url));
        let body = match self.call(request, &format!("fetching schema {id}")) {
            Ok(body) => body,
            Err((Some(404), message)) => return Err(FetchError::Missing(message)),
            Err((_, message)) => return Err(FetchError::Unavailable(message)),
        };
        let stored = stored(&body).ok_or_else(|| {
            let url = &self.url;
            FetchError::Missing(format!(
                "schema registry {url}: schema {id} came without a schema: {body}"
            ))
        })?;
        self.lock().insert(id, stored.clone());
        Ok(stored)
    }

    /// Registers `text` (of `kind`) under `subject`, or finds it there
    /// already; returns its id. A schema the subject's compatibility rule
    /// refuses is an error saying so.
    pub fn register(&self, subject: &str, kind: &str, text: &str) -> Result<u32, String> {
        let mut body = json!({ "schema": text });
        if kind != "AVRO" {
            body["schemaType"] = json!(kind);
        }
        let request = (self
            .client
            .post(format!("{}/subjects/{subject}/versions", self.url)))
        .header("content-type", MEDIA)
        .body(body.to_string());
        let doing = format!("registering the schema of subject {subject}");
        let reply = self.call(request, &doing).map_err(|(_, message)| message)?;
        let id = reply["id"].as_u64().and_then(|id| u32::try_from(id).ok());
        let id = id.ok_or_else(|| {
            format!("schema registry {}: registering under subject {subject} answered without an id: {reply}", self.url)
        })?;
        self.lock().insert(
            id,
            Stored {
                kind: kind.to_owned(),
                text: text.to_owned(),
            },
        );
        Ok(id)
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

/// The schema of a registry answer (`{"schema", "schemaType"}`).
fn stored(body: &serde_json::Value) -> Option<Stored> {
    Some(Stored {
        kind: body["schemaType"].as_str().unwrap_or("AVRO").to_owned(),
        text: body["schema"].as_str()?.to_owned(),
    })
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
            Some(Stored {
                kind: "AVRO".into(),
                text: "\"long\"".into()
            })
        );
    }
}
