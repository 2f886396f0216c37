//! A private nats-server with JetStream ([`Nats`]): streams, publishes
//! and reads over the test client of `nats_client`.

use super::*;

/// Whether a NATS server on 127.0.0.1:`port` accepts a connection and
/// greets it with `INFO` (a connection alone could be another process's
/// that holds the port).
fn greets(port: u16) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        .map_err(|e| format!("port {port}: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut first = [0; 5];
    match stream.take(5).read_exact(&mut first).is_ok() && &first == b"INFO " {
        true => Ok(()),
        false => Err(format!(
            "what answers on port {port} sends no NATS greeting"
        )),
    }
}

/// What a JetStream publish acknowledgement says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubAck {
    pub stream: String,
    pub seq: u64,
    /// The message id was seen within the stream's duplicate window: the
    /// message was not stored again (`seq` is the first one's).
    pub duplicate: bool,
}

/// A message read back from a stream: sequence, subject, payload, and its
/// `Nats-Msg-Id` header.
pub type StreamMsg = (u64, String, Vec<u8>, Option<String>);

/// A private nats-server with JetStream (store in `DIR/js`), its output in
/// `DIR/nats.log`.
pub struct Nats {
    port: u16,
    bin: PathBuf,
    process: ServerProcess,
}

impl Nats {
    /// Starts a server on a free port; panics (with its log) when it cannot.
    pub fn start() -> Nats {
        let bin = nats_bin().unwrap_or_else(|e| not_installed(Nats::NAME, &e));
        let mut nats = Nats {
            port: 0,
            bin,
            process: ServerProcess::new("nats"),
        };
        nats.start_on_a_free_port();
        nats
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
            .unwrap_or_else(|e| panic!("connecting to NATS at {}: {e}", self.url()))
    }

    /// Sends a JetStream API request (`$JS.API.<api>`, `body` as JSON, none
    /// when null) and returns the reply, errors included (`{"error":
    /// {"code":404,"err_code":10059,"description":"stream not found"},..}`).
    pub fn js_api(&self, api: &str, body: &Value) -> Value {
        js_request(&mut self.client(), api, body)
    }

    /// Creates a file-backed stream `name` on `subjects` with a two-minute
    /// duplicate window (creating the same stream again is no error).
    pub fn create_stream(&self, name: &str, subjects: &[&str]) {
        let body = json!({
            "name": name,
            "subjects": subjects,
            "storage": "file",
            "duplicate_window": 120_000_000_000u64,
        });
        let reply = self.js_api(&format!("STREAM.CREATE.{name}"), &body);
        assert!(
            reply.get("error").is_none(),
            "creating stream {name} on {}: {reply}",
            self.url()
        );
    }

    /// The `STREAM.INFO` reply of stream `name` (its `config` and `state`),
    /// `None` when there is no such stream.
    pub fn stream_info(&self, name: &str) -> Option<Value> {
        let reply = self.js_api(&format!("STREAM.INFO.{name}"), &Value::Null);
        if reply["error"]["err_code"] == 10059 {
            return None;
        }
        assert!(
            reply.get("error").is_none(),
            "STREAM.INFO.{name} on {}: {reply}",
            self.url()
        );
        Some(reply)
    }

    /// Publishes each payload to `subject` and waits for its JetStream ack.
    pub fn publish(&self, subject: &str, payloads: &[&[u8]]) -> Vec<PubAck> {
        let mut client = self.client();
        payloads
            .iter()
            .map(|p| self.publish_one(&mut client, subject, &[], p))
            .collect()
    }

    /// Publishes `payload` to `subject` with header `Nats-Msg-Id: id` and
    /// waits for its ack (`duplicate` when `id` was published before).
    pub fn publish_with_id(&self, subject: &str, id: &str, payload: &[u8]) -> PubAck {
        self.publish_one(&mut self.client(), subject, &[("Nats-Msg-Id", id)], payload)
    }

    /// Publishes message `i` = `message(i)` (an optional message id and a
    /// payload) to `subject` for `i` = 0, 1, ..., each once the previous one
    /// is acknowledged, until `stop` is set; returns how many it published.
    pub fn publish_until(
        &self,
        subject: &str,
        stop: &std::sync::atomic::AtomicBool,
        message: impl Fn(u64) -> (Option<String>, Vec<u8>),
    ) -> u64 {
        let mut client = self.client();
        let mut i = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let (id, payload) = message(i);
            let headers: Vec<(&str, &str)> =
                id.iter().map(|id| ("Nats-Msg-Id", id.as_str())).collect();
            self.publish_one(&mut client, subject, &headers, &payload);
            i += 1;
        }
        i
    }

    fn publish_one(
        &self,
        client: &mut Client,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> PubAck {
        let reply = client
            .request(subject, headers, payload)
            .unwrap_or_else(|e| {
                panic!(
                    "publishing to {subject} on {} (is a stream bound to it?): {e}",
                    self.url()
                )
            });
        let ack: Value = serde_json::from_slice(&reply.payload).unwrap_or_else(|e| {
            panic!(
                "the ack of a publish to {subject} is not JSON ({e}): {:?}",
                reply.payload
            )
        });
        match (ack["stream"].as_str(), ack["seq"].as_u64()) {
            (Some(stream), Some(seq)) if ack.get("error").is_none() => PubAck {
                stream: stream.to_owned(),
                seq,
                duplicate: ack["duplicate"] == true,
            },
            _ => panic!("publishing to {subject} on {}: {ack}", self.url()),
        }
    }

    /// The payloads of every message of `stream` ([`Nats::read_stream`]),
    /// as UTF-8, one a line.
    pub fn read_stream_text(&self, stream: &str) -> String {
        let messages = self.read_stream(stream);
        let lines: Vec<String> = messages
            .into_iter()
            .map(|m| String::from_utf8(m.2).expect("a UTF-8 payload"))
            .collect();
        lines.join("\n")
    }

    /// Every message of `stream`, in order (first to last sequence, deleted
    /// ones left out).
    pub fn read_stream(&self, stream: &str) -> Vec<StreamMsg> {
        (self.read_stream_with_headers(stream).into_iter())
            .map(|(m, _)| m)
            .collect()
    }

    /// [`read_stream`](Self::read_stream), each message with all its
    /// headers (name, value) in order.
    pub fn read_stream_with_headers(
        &self,
        stream: &str,
    ) -> Vec<(StreamMsg, Vec<(String, String)>)> {
        let mut client = self.client();
        let info = js_request(&mut client, &format!("STREAM.INFO.{stream}"), &Value::Null);
        let state = &info["state"];
        let (Some(first), Some(last), Some(count)) = (
            state["first_seq"].as_u64(),
            state["last_seq"].as_u64(),
            state["messages"].as_u64(),
        ) else {
            panic!("STREAM.INFO.{stream} on {}: {info}", self.url());
        };
        let mut messages = Vec::new();
        for seq in first..=last {
            if count == 0 {
                break;
            }
            let reply = js_request(
                &mut client,
                &format!("STREAM.MSG.GET.{stream}"),
                &json!({ "seq": seq }),
            );
            if reply["error"]["err_code"] == 10037 {
                continue; // no message found: deleted
            }
            let message = &reply["message"];
            let (Some(subject), Some(got)) = (message["subject"].as_str(), message["seq"].as_u64())
            else {
                panic!(
                    "STREAM.MSG.GET.{stream} seq {seq} on {}: {reply}",
                    self.url()
                );
            };
            // An empty payload and a message without headers leave out
            // `data` and `hdrs`.
            let decode = |field: &str| match message[field].as_str() {
                Some(b64) => BASE64
                    .decode(b64)
                    .unwrap_or_else(|e| panic!("{field} of {reply}: {e}")),
                None => Vec::new(),
            };
            let payload = decode("data");
            let hdrs = decode("hdrs");
            let headers = match hdrs.is_empty() {
                true => None,
                false => {
                    Some(Headers::parse(&hdrs).unwrap_or_else(|e| panic!("hdrs of {reply}: {e}")))
                }
            };
            let id = (headers.as_ref()).and_then(|h| h.get("Nats-Msg-Id").map(str::to_owned));
            let fields = headers.map(|h| h.fields).unwrap_or_default();
            messages.push(((got, subject.to_owned(), payload, id), fields));
        }
        messages
    }
}

/// Its folder holds `js/` (the JetStream store) and `nats.log`; a stop is
/// a SIGKILL.
impl PrivateServer for Nats {
    server_process_methods!("NATS (nats-server)");

    fn spawn(&mut self) -> Result<(), String> {
        let js = self.process.dir().join("js");
        let log = self
            .process
            .open_log(&format!("{} -p {}", self.bin.display(), self.port));
        let child = Command::new(&self.bin)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&js)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", self.bin.display()))?;
        self.process.set_child(child, false);
        let port = self.port;
        let ready =
            (self.process)
                .wait_until_ready(START_TIMEOUT, Duration::from_millis(10), || greets(port));
        if ready.is_err() {
            self.stop();
        }
        ready
    }
}

fn js_request(client: &mut Client, api: &str, body: &Value) -> Value {
    let payload = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let reply = client
        .request(&format!("$JS.API.{api}"), &[], &payload)
        .unwrap_or_else(|e| panic!("$JS.API.{api}: {e}"));
    serde_json::from_slice(&reply.payload).unwrap_or_else(|e| {
        panic!(
            "the reply to $JS.API.{api} is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&reply.payload)
        )
    })
}

/// The nats-server release `scripts/services.sh install` puts in
/// `$WEIR_NATS_HOME/<NATS_VERSION>` (default `~/.cache/weir-nats/...`).
fn nats_bin() -> Result<PathBuf, String> {
    installed_bin("NATS_VERSION", "WEIR_NATS_HOME", "weir-nats", "nats-server")
}
