//! A tiny synchronous client of the NATS text protocol over a
//! [`TcpStream`], enough for the test helpers of [`super::Nats`]:
//! requests with a reply inbox (`PUB`/`HPUB` in, `MSG`/`HMSG` back),
//! headers, and answering the server's `PING`s. One subscription (the
//! client's inbox, `SUB <inbox>.*`), no reconnection, no TLS.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long connecting and each request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to a NATS server.
pub struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    /// This connection's reply subjects are `<inbox>.<n>`.
    inbox: String,
    next: u64,
}

/// A message the server delivered.
#[derive(Debug, Clone)]
pub struct Msg {
    pub subject: String,
    pub headers: Option<Headers>,
    pub payload: Vec<u8>,
}

/// A header block (`NATS/1.0[ status[ description]]` and `Name: value`
/// lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    /// The status of the first line (503: no responders), if any.
    pub status: Option<u16>,
    pub fields: Vec<(String, String)>,
}

impl Headers {
    /// Parses a header block as `HMSG` carries it (and as JetStream's
    /// `hdrs` holds it, base64 aside).
    pub fn parse(block: &[u8]) -> Result<Headers, String> {
        let text = String::from_utf8_lossy(block);
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let Some(rest) = first.strip_prefix("NATS/1.0") else {
            return Err(format!("a header block that starts {first:?}"));
        };
        let status = rest.split_whitespace().next().and_then(|s| s.parse().ok());
        let fields = lines
            .filter(|line| !line.is_empty())
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Ok(Headers { status, fields })
    }

    /// The first value of header `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        let mut values = self
            .fields
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name));
        values.next().map(|(_, v)| v.as_str())
    }
}

impl Client {
    /// Connects to the server on 127.0.0.1:`port` and waits for its `PONG`
    /// (so the connection and its inbox subscription are in place).
    pub fn connect(port: u16) -> Result<Client, String> {
        static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        let inbox = format!("_INBOX.weirtests{}x{n}", std::process::id());
        let mut client = Client {
            writer: stream,
            reader,
            inbox,
            next: 0,
        };
        let info = client.read_line()?;
        if !info.starts_with("INFO ") {
            return Err(format!("the server greeted with {info:?}, not INFO"));
        }
        let hello = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true,\"lang\":\"rust\",\"version\":\"weir-tests\"}}\r\n\
             SUB {}.* 1\r\nPING\r\n",
            client.inbox
        );
        client.send(hello.as_bytes())?;
        loop {
            match client.read_op()? {
                Op::Pong => return Ok(client),
                Op::Ping => client.send(b"PONG\r\n")?,
                Op::Err(e) => return Err(format!("the server refused the connection: -ERR {e}")),
                _ => {}
            }
        }
    }

    /// Publishes `payload` (with `headers`, when any) to `subject` with a
    /// fresh reply subject and returns the first reply; an error when no
    /// reply comes within [`TIMEOUT`] or the server says no one listens on
    /// `subject` (status 503).
    pub fn request(
        &mut self,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> Result<Msg, String> {
        self.next += 1;
        let reply = format!("{}.{}", self.inbox, self.next);
        self.publish_to(subject, Some(&reply), headers, payload)?;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.read_op() {
                Ok(Op::Msg(msg)) if msg.subject == reply => {
                    if msg.headers.as_ref().and_then(|h| h.status) == Some(503) {
                        return Err(format!(
                            "no responders on {subject} (nothing listens there)"
                        ));
                    }
                    return Ok(msg);
                }
                // A late reply to an earlier request.
                Ok(Op::Msg(_) | Op::Pong | Op::Ok | Op::Info) => {}
                Ok(Op::Ping) => self.send(b"PONG\r\n")?,
                Ok(Op::Err(e)) => {
                    return Err(format!("the server said -ERR {e} (request to {subject})"));
                }
                Err(e) => return Err(format!("{e} (waiting for the reply to {subject})")),
            }
            if Instant::now() > deadline {
                return Err(format!("no reply to {subject} within {TIMEOUT:?}"));
            }
        }
    }

    /// Publishes `payload` to `subject` without waiting for anything.
    pub fn publish(
        &mut self,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> Result<(), String> {
        self.publish_to(subject, None, headers, payload)
    }

    fn publish_to(
        &mut self,
        subject: &str,
        reply: Option<&str>,
        headers: &[(&str, &str)],
        payload: &[u8],
    ) -> Result<(), String> {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        let mut out = Vec::with_capacity(payload.len() + 128);
        if headers.is_empty() {
            out.extend_from_slice(format!("PUB {subject}{reply} {}\r\n", payload.len()).as_bytes());
        } else {
            let mut block = String::from("NATS/1.0\r\n");
            for (k, v) in headers {
                block.push_str(&format!("{k}: {v}\r\n"));
            }
            block.push_str("\r\n");
            let total = block.len() + payload.len();
            out.extend_from_slice(
                format!("HPUB {subject}{reply} {} {total}\r\n", block.len()).as_bytes(),
            );
            out.extend_from_slice(block.as_bytes());
        }
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
        self.send(&out)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(bytes)
            .map_err(|e| format!("writing to the server: {e}"))
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => Err("the server closed the connection".to_owned()),
            Ok(_) => Ok(String::from_utf8_lossy(&line).trim_end().to_owned()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(format!("nothing from the server within {TIMEOUT:?}"))
            }
            Err(e) => Err(format!("reading from the server: {e}")),
        }
    }

    fn read_op(&mut self) -> Result<Op, String> {
        let line = self.read_line()?;
        // Fields are separated by any run of blanks: the server writes
        // `MSG <subject> <sid>  <size>` (two spaces) for a message without
        // a reply subject, such as JetStream's publish acks.
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        let bad = || format!("a protocol line the client does not understand: {line:?}");
        let (subject, header_len, total) =
            match words.first().map(|w| w.to_ascii_uppercase()).as_deref() {
                Some("PING") => return Ok(Op::Ping),
                Some("PONG") => return Ok(Op::Pong),
                Some("+OK") => return Ok(Op::Ok),
                Some("INFO") => return Ok(Op::Info),
                Some("-ERR") => return Ok(Op::Err(line[4..].trim().to_owned())),
                // MSG <subject> <sid> [reply-to] <#bytes>
                Some("MSG") if (4..=5).contains(&words.len()) => {
                    (words[1], 0, words[words.len() - 1])
                }
                // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
                Some("HMSG") if (5..=6).contains(&words.len()) => {
                    let header_len = words[words.len() - 2].parse().map_err(|_| bad())?;
                    (words[1], header_len, words[words.len() - 1])
                }
                _ => return Err(bad()),
            };
        let total: usize = total.parse().map_err(|_| bad())?;
        if header_len > total {
            return Err(bad());
        }
        let subject = subject.to_owned();
        let mut body = vec![0; total + 2];
        self.reader
            .read_exact(&mut body)
            .map_err(|e| format!("reading a message on {subject}: {e}"))?;
        if !body.ends_with(b"\r\n") {
            return Err(format!("a message on {subject} not ended by CRLF"));
        }
        body.truncate(total);
        let headers = if header_len > 0 {
            Some(Headers::parse(&body[..header_len])?)
        } else {
            None
        };
        let payload = body.split_off(header_len);
        Ok(Op::Msg(Msg {
            subject,
            headers,
            payload,
        }))
    }
}

/// One protocol operation from the server.
enum Op {
    Msg(Msg),
    Ping,
    Pong,
    Ok,
    Info,
    Err(String),
}
