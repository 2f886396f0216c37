//! A minimal HTTP/1.1 client for the dashboard's tests and benchmark: one
//! request per connection ([`request`]), and reading server-sent events
//! ([`Events`]).

use crate::text::assert_has;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Time a request may take.
const TIMEOUT: Duration = Duration::from_secs(150);

/// A response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Body as text.
    pub body: String,
}

impl Reply {
    /// The header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics, showing it, when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// Sends `method path` with `headers` (a `host` header naming `addr` is
/// added unless given) and `body`, and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    conn.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    conn.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("reading the answer to {method} {path}: {e}"));
    parse(&String::from_utf8(raw).expect("a UTF-8 response"))
}

/// `GET path`.
pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], "")
}

fn parse(raw: &str) -> Reply {
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {raw:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status: status.parse().unwrap(),
        headers,
        body: body.to_string(),
    }
}

/// A server-sent event stream being read.
pub struct Events {
    reader: BufReader<TcpStream>,
}

impl Events {
    /// Opens `GET path` on `addr` and reads past the response head, which
    /// must say `200` and `text/event-stream`.
    pub fn open(addr: SocketAddr, path: &str) -> Events {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(TIMEOUT)).unwrap();
        write!(conn, "GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").unwrap();
        let mut reader = BufReader::new(conn);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_has(&head, "content-type: text/event-stream");
        Events { reader }
    }

    /// The next event: its name and data.
    pub fn next_event(&mut self) -> (String, String) {
        let (mut name, mut data) = (String::new(), String::new());
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).unwrap();
            assert!(n > 0, "the stream ended");
            let line = line.trim_end_matches('\n');
            if line.is_empty() {
                if !data.is_empty() {
                    return (name, data);
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
    }
}
