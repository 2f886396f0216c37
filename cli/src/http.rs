//! The little HTTP/1.1 server of the dashboard and the Prometheus
//! endpoint: a thread with its own runtime accepting connections
//! ([`spawn`]), one request per connection ([`read_request`]), answered by
//! one [`Response`] or a server-sent event stream, then closed.
//!
//! Invariants:
//! - At most the server's `max_connections` connections are served at
//!   once; one more is answered 503 and closed.
//! - A connection costs at most [`MAX_HEAD`] bytes of request head and
//!   [`MAX_BODY`] bytes of body, read within [`READ_TIMEOUT`]; anything
//!   larger, slower or malformed is answered with a 4xx status and closed.
//! - Every response carries `connection: close`, `cache-control: no-store`
//!   and `x-content-type-options: nosniff`; HTML also a content security
//!   policy that allows only the dashboard's own scripts, styles and API.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Longest request head (request line and headers), in bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest request body, in bytes (an action is a small JSON object).
pub const MAX_BODY: usize = 64 * 1024;
/// Time a client has to send its whole request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the page's HTML may load: its own script and style, its own API.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// Headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body (`content-length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A complete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `content-type`.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, body: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
        }
    }

    /// `{"error": message}` with `status`.
    pub fn error(status: u16, message: impl Into<String>) -> Response {
        let message: String = message.into();
        Response::json(status, &serde_json::json!({ "error": message }))
    }

    /// The response's bytes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        let csp = if self.content_type.starts_with("text/html") {
            format!("content-security-policy: {CONTENT_SECURITY_POLICY}\r\n")
        } else {
            String::new()
        };
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n{csp}{}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len(),
            COMMON_HEADERS
        )
        .into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

/// Headers every response carries.
const COMMON_HEADERS: &str = "cache-control: no-store\r\nx-content-type-options: nosniff\r\n\
     referrer-policy: no-referrer\r\nconnection: close\r\n";

/// The head of a server-sent event stream.
pub fn event_stream_head() -> String {
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{COMMON_HEADERS}\r\n")
}

/// One server-sent event: `name` with `data` (JSON text has no newline).
pub fn event(name: &str, data: &str) -> String {
    debug_assert!(!data.contains('\n'));
    format!("event: {name}\ndata: {data}\n\n")
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Reads one request from `conn` within [`READ_TIMEOUT`]; a request the
/// dashboard will not take is the error response to send instead.
pub async fn read_request<R: AsyncRead + Unpin>(conn: &mut R) -> Result<Request, Response> {
    match tokio::time::timeout(READ_TIMEOUT, read(conn)).await {
        Ok(result) => result,
        Err(_) => Err(Response::error(
            408,
            format!("no complete request within {} s", READ_TIMEOUT.as_secs()),
        )),
    }
}

async fn read<R: AsyncRead + Unpin>(conn: &mut R) -> Result<Request, Response> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(Response::error(
                431,
                format!("request head longer than {MAX_HEAD} bytes"),
            ));
        }
        let mut chunk = [0u8; 4096];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(Response::error(400, "the request ended early")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    if head_end > MAX_HEAD {
        return Err(Response::error(
            431,
            format!("request head longer than {MAX_HEAD} bytes"),
        ));
    }
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| Response::error(400, "the request head is not UTF-8"))?;
    let mut request = parse_head(head)?;
    let length = match request.header("content-length") {
        None => 0,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| Response::error(400, format!("bad content-length `{v}`")))?,
    };
    if request.header("transfer-encoding").is_some() {
        return Err(Response::error(
            400,
            "chunked bodies are not accepted; send content-length",
        ));
    }
    if length > MAX_BODY {
        return Err(Response::error(
            413,
            format!("request body longer than {MAX_BODY} bytes"),
        ));
    }
    let mut body = buf[head_end + 4..].to_vec();
    if body.len() > length {
        return Err(Response::error(
            400,
            "more bytes than content-length; one request per connection",
        ));
    }
    let have = body.len();
    body.resize(length, 0);
    conn.read_exact(&mut body[have..])
        .await
        .map_err(|_| Response::error(400, "the body ended before content-length"))?;
    request.body = body;
    Ok(request)
}

/// Parses the request line and headers.
fn parse_head(head: &str) -> Result<Request, Response> {
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::error(400, "bad request line"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(Response::error(400, "bad request line"));
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(Response::error(400, "bad header line"));
        };
        if name.is_empty() || name.contains([' ', '\t']) {
            return Err(Response::error(400, "bad header name"));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: Vec::new(),
    })
}

/// Serves each connection `listener` accepts with `serve`, on a thread
/// named `name`, at most `max_connections` at once (the 503 of one more
/// names the server).
pub fn spawn<F, Fut>(
    listener: std::net::TcpListener,
    name: &str,
    max_connections: usize,
    serve: F,
) -> std::io::Result<()>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let std_listener = listener;
    std_listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let busy = format!("the {name} serves {max_connections} connections at once; retry later");
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
                    return;
                };
                let slots = Arc::new(Semaphore::new(max_connections));
                loop {
                    let Ok((mut conn, _)) = listener.accept().await else {
                        // Out of file descriptors, say: let it pass.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        let busy = Response::error(503, busy.clone());
                        tokio::spawn(async move { respond(&mut conn, &busy).await });
                        continue;
                    };
                    let served = serve(conn);
                    tokio::spawn(async move {
                        served.await;
                        drop(slot);
                    });
                }
            });
        })?;
    Ok(())
}

/// Writes `response` and closes the connection.
pub async fn respond<W: AsyncWrite + Unpin>(conn: &mut W, response: &Response) {
    let _ = conn.write_all(&response.to_bytes()).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> Result<Request, Response> {
        let mut conn = bytes;
        read_request(&mut conn).await
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(f)
    }

    #[test]
    fn a_request_is_its_method_path_headers_and_body() {
        let r = block(parse(
            b"POST /api/swap?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 4\r\n\r\n{\"a\"",
        ))
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/swap"));
        assert_eq!(r.header("host"), Some("127.0.0.1:9"));
        assert_eq!(r.body, b"{\"a\"");
        let get = block(parse(b"GET / HTTP/1.0\r\n\r\n")).unwrap();
        assert!(get.body.is_empty() && get.headers.is_empty());
    }

    #[test]
    fn malformed_or_oversized_requests_get_a_4xx() {
        let status = |bytes: &[u8]| block(parse(bytes)).unwrap_err().status;
        assert_eq!(status(b"GET /\r\n\r\n"), 400, "no version");
        assert_eq!(status(b"GET x HTTP/1.1\r\n\r\n"), 400, "not a path");
        assert_eq!(status(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\n"), 400, "ended early");
        assert_eq!(status(b"POST / HTTP/1.1\r\ncontent-length: x\r\n\r\n"), 400);
        assert_eq!(
            status(b"POST / HTTP/1.1\r\ncontent-length: 9\r\n\r\nab"),
            400,
            "short body"
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\ncontent-length: 1\r\n\r\nab"),
            400,
            "a second request"
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"),
            400
        );
        let big = format!(
            "POST / HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(status(big.as_bytes()), 413);
        let long = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(status(long.as_bytes()), 431);
        assert_eq!(status(b"GET / HTTP/1.1\r\nx: \xff\r\n\r\n"), 400);
    }

    #[test]
    fn html_alone_carries_the_content_security_policy() {
        let html = Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: b"<p>".to_vec(),
        };
        let text = String::from_utf8(html.to_bytes()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("content-security-policy: default-src 'none'"));
        assert!(text.contains("content-length: 3\r\n") && text.ends_with("\r\n\r\n<p>"));
        let json = String::from_utf8(Response::error(404, "no").to_bytes()).unwrap();
        assert!(!json.contains("content-security-policy"));
        assert!(
            json.contains("x-content-type-options: nosniff")
                && json.ends_with("{\"error\":\"no\"}")
        );
    }
}
