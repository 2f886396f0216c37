//! The queue file of one operator's replays: a header line naming the
//! queue (`{"weir_replay_queue": "<id>", "job": ..., "operator": ...}`),
//! then one dead letter per line, as its dead-letter sink got it.
//!
//! Appends hold the file's lock and end with an fsync, so a letter the
//! command reported queued survives a crash; a letter already in the queue
//! (the same JSON object) is never queued twice.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The header's field holding the queue's id.
const ID: &str = "weir_replay_queue";

/// What [`enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// Letters appended.
    pub added: usize,
    /// Letters left out: in the queue already (queued before, or twice in
    /// the list).
    pub already: usize,
}

/// Appends `letters` (dead letters of `operator` of job `job`) to the
/// queue at `path`, made with its header if missing, leaving out those the
/// queue holds already; synced to disk before it returns.
///
/// Fails if the file is not a replay queue of `operator`, or on I/O.
pub fn enqueue(path: &Path, job: &str, operator: &str, letters: &[Value]) -> io::Result<Queued> {
    let dir = path.parent().expect("a queue lives in a folder");
    std::fs::create_dir_all(dir)?;
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    file.lock()?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    let mut out = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let created = text.is_empty();
    if created {
        let id = new_id();
        out.extend(
            json!({ ID: id, "job": job, "operator": operator })
                .to_string()
                .bytes(),
        );
        out.push(b'\n');
    } else {
        let mut lines = text.split(|&b| b == b'\n');
        let head: Value = serde_json::from_slice(lines.next().unwrap_or_default())
            .ok()
            .filter(|h: &Value| h.get(ID).is_some())
            .ok_or_else(|| invalid(path, "its first line is not a replay queue's header"))?;
        if head["operator"] != operator {
            let message = format!("it is the queue of operator {}", head["operator"]);
            return Err(invalid(path, &message));
        }
        let queued = lines.filter_map(|l| serde_json::from_slice::<Value>(l).ok());
        seen.extend(queued.map(|l| l.to_string()));
    }
    let mut queued = Queued {
        added: 0,
        already: 0,
    };
    for letter in letters {
        let line = letter.to_string();
        match seen.insert(line.clone()) {
            true => {
                out.extend(line.bytes());
                out.push(b'\n');
                queued.added += 1;
            }
            false => queued.already += 1,
        }
    }
    if !out.is_empty() {
        file.write_all(&out)?;
        file.sync_data()?;
    }
    if created {
        File::open(dir)?.sync_all()?;
    }
    Ok(queued)
}

/// Whether the queue at `path` holds letters past `offset` (a replay
/// source's, from a checkpoint; `None`: none read yet).
pub fn pending(path: &Path, offset: Option<&Value>) -> io::Result<bool> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let Some((id, header_len)) = header(&text) else {
        return Ok(false);
    };
    let read = offset.and_then(|o| Some((o.get("queue")?.as_str()?, o.get("byte")?.as_u64()?)));
    let from = match read {
        Some((queue, byte)) if queue == id => byte,
        _ => header_len,
    };
    let rest = text.get(from as usize..).unwrap_or_default();
    Ok(rest.contains(&b'\n'))
}

/// The queue id and the length (with its newline) of the header at the
/// start of `text`, once the header line is complete.
pub(super) fn header(text: &[u8]) -> Option<(String, u64)> {
    let end = text.iter().position(|&b| b == b'\n')?;
    let head: Value = serde_json::from_slice(&text[..end]).ok()?;
    let id = head.get(ID)?.as_str()?.to_owned();
    Some((id, end as u64 + 1))
}

/// An id no other queue of this machine has: the time and the process.
fn new_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{:x}", std::process::id())
}

fn invalid(path: &Path, why: &str) -> io::Error {
    let message = format!(
        "{} is not a replay queue this command can add to: {why}; move it away",
        path.display()
    );
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(n: u64) -> Value {
        json!({"node": "op", "value": format!("v{n}"), "port": "in"})
    }

    #[test]
    fn letters_are_queued_once_after_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replays/op.jsonl");
        let first = enqueue(&path, "job", "op", &[letter(1), letter(2), letter(1)]).unwrap();
        assert_eq!(
            first,
            Queued {
                added: 2,
                already: 1
            }
        );
        let again = enqueue(&path, "job", "op", &[letter(2), letter(3)]).unwrap();
        assert_eq!(
            again,
            Queued {
                added: 1,
                already: 1
            }
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0]["operator"], "op");
        assert_eq!(&lines[1..], &[letter(1), letter(2), letter(3)]);
        let refused = enqueue(&path, "job", "other", &[letter(4)]).unwrap_err();
        assert!(
            refused.to_string().contains("queue of operator \"op\""),
            "{refused}"
        );
    }

    #[test]
    fn pending_letters_are_those_past_the_offset_of_the_same_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("op.jsonl");
        assert!(!pending(&path, None).unwrap(), "no queue");
        enqueue(&path, "job", "op", &[]).unwrap();
        assert!(!pending(&path, None).unwrap(), "a header only");
        enqueue(&path, "job", "op", &[letter(1)]).unwrap();
        assert!(pending(&path, None).unwrap());
        let text = std::fs::read(&path).unwrap();
        let (id, _) = header(&text).unwrap();
        let end = json!({"queue": id, "byte": text.len()});
        assert!(!pending(&path, Some(&end)).unwrap(), "all read");
        let other = json!({"queue": "another", "byte": text.len()});
        assert!(
            pending(&path, Some(&other)).unwrap(),
            "another queue's offset"
        );
    }
}
