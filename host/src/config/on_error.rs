//! What an entry does with a record it cannot handle: `on_error` (see
//! [`OnError`]) and its budget `max_bad`, read by every `[[source]]`.

/// The output port of a node whose `on_error` sends bad records to a sink
/// (`{ dead_letter = "<sink>" }`): the sink reads it as
/// `<node>.dead-letter`, wired by the job file's parser.
pub const DEAD_LETTER_PORT: &str = "dead-letter";

/// What a source does with a record it cannot read (malformed, or without
/// a valid timestamp), `on_error`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum OnError {
    /// Fail, naming the record (the default): the job stops or restarts as
    /// for any failure, and meets the record again.
    #[default]
    Fail,
    /// Drop the record and count it.
    Skip,
    /// Send the record to this sink, as a dead letter that says what was
    /// wrong and where the record came from, and count it.
    DeadLetter(String),
}

impl OnError {
    /// The sink this policy sends dead letters to, if any.
    pub fn dead_letter_sink(&self) -> Option<&str> {
        match self {
            OnError::DeadLetter(sink) => Some(sink),
            _ => None,
        }
    }
}

/// The policy `on_error` and the budget `max_bad` of an entry, checked.
pub(super) fn build_on_error(
    raw: Option<toml::Value>,
    max_bad: Option<i64>,
) -> Result<(OnError, Option<u64>), String> {
    const HINT: &str = "write on_error = \"fail\", \"skip\" or { dead_letter = \"<sink id>\" }";
    let on_error = match raw {
        None => OnError::Fail,
        Some(toml::Value::String(w)) if w == "fail" => OnError::Fail,
        Some(toml::Value::String(w)) if w == "skip" => OnError::Skip,
        Some(toml::Value::String(w)) => {
            return Err(format!("`on_error` = {w:?} is not a policy; {HINT}"));
        }
        Some(toml::Value::Table(mut t)) => {
            let sink = match t.remove("dead_letter") {
                Some(toml::Value::String(sink)) if !sink.trim().is_empty() => sink,
                Some(toml::Value::String(_)) => {
                    return Err(format!("`on_error.dead_letter` is empty; {HINT}"));
                }
                Some(other) => {
                    return Err(format!(
                        "`on_error.dead_letter` must be a sink id string (got {}); {HINT}",
                        other.type_str()
                    ));
                }
                None => return Err(format!("`on_error` table has no `dead_letter`; {HINT}")),
            };
            if let Some(key) = t.keys().next() {
                return Err(format!("`on_error` has an unknown key `{key}`; {HINT}"));
            }
            OnError::DeadLetter(sink)
        }
        Some(other) => {
            return Err(format!(
                "`on_error` must be a string or a table (got {}); {HINT}",
                other.type_str()
            ));
        }
    };
    let max_bad = match max_bad {
        None => None,
        Some(_) if on_error == OnError::Fail => {
            return Err(
                "`max_bad` needs on_error = \"skip\" or { dead_letter = \"<sink id>\" }: with \"fail\" the first bad record fails"
                    .into(),
            );
        }
        Some(n) if n < 1 => {
            return Err(format!(
                "`max_bad` = {n}: at least 1 bad record per checkpoint must be allowed (or use on_error = \"fail\")"
            ));
        }
        Some(n) => Some(n as u64),
    };
    Ok((on_error, max_bad))
}
