use super::*;
use crate::text::assert_has;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};

/// Text that appears after a delay, two buttons that note clicks, an input.
const PAGE: &str = r#"<!doctype html><html><head><link rel="icon" href="data:,">
<title>t</title></head><body><p id="status">loading</p><button id="first">First</button>
<button id="second">Second</button><input id="name"><p id="clicked"></p><script>
setTimeout(() => { document.getElementById('status').textContent = 'ready after delay'; }, 300);
for (const b of document.querySelectorAll('button'))
  b.addEventListener('click', () => { document.getElementById('clicked').textContent += b.id; });
</script></body></html>"#;

fn respond(stream: TcpStream) {
    let (mut reader, mut line) = (BufReader::new(&stream), String::new());
    let _ = reader.read_line(&mut line);
    let body = if line.starts_with("GET / ") { PAGE } else { "" };
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {}
    let head = format!("Content-Type: text/html\r\nContent-Length: {}", body.len());
    let _ = write!(
        &stream,
        "HTTP/1.1 200 OK\r\n{head}\r\nConnection: close\r\n\r\n{body}"
    );
}

/// A browser (the test fails, never skips, without Chromium: the error
/// names the install command) and [`PAGE`] opened in it, served from a
/// loopback port (a thread per connection: Chromium may hold an idle
/// preconnected one).
fn launch() -> (Browser, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || respond(stream));
        }
    });
    (Browser::launch().unwrap_or_else(|e| panic!("{e}")), url)
}

#[test]
fn eval_wait_for_and_console_errors() {
    let (browser, url) = launch();
    let page = browser.open(&url).unwrap();
    assert_eq!(
        page.eval("[1 + 2, {a: 'x'}, null]").unwrap(),
        json!([3, {"a": "x"}, null])
    );
    let later = "new Promise(resolve => setTimeout(() => resolve(document.title), 50))";
    assert_eq!(page.eval(later).unwrap(), json!("t"));
    assert_eq!(page.eval("undefined").unwrap(), Value::Null);
    let error = page.eval("throw new Error('boom')").unwrap_err();
    assert_has(&error, "Error: boom");
    let error = page
        .eval("Promise.reject(new TypeError('nope'))")
        .unwrap_err();
    assert_has(&error, "TypeError: nope");

    let status = "document.getElementById('status').textContent";
    let js = format!("{status}.includes('ready') && {status}");
    let text = page.wait_for("the delayed text", &js, Duration::from_secs(10));
    assert_eq!(text.unwrap(), json!("ready after delay"));
    assert_eq!(page.console_errors(), Vec::<String>::new());
    page.eval("console.log('fine'); console.error('dashboard failed', 42, {n: 1})")
        .unwrap();
    page.eval("setTimeout(() => { throw new Error('late boom'); }, 0)")
        .unwrap();
    let error = page.wait_for("never", "document.title == 'x'", Duration::from_millis(300));
    let error = error.unwrap_err();
    let parts = [
        "for never",
        "last value was false",
        "ready after delay",
        "dashboard failed",
    ];
    for part in parts.into_iter().chain(["uncaught Error: late boom"]) {
        assert!(error.contains(part), "{part:?} missing in: {error}");
    }
    let errors = page.console_errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("console.error: dashboard failed 42"),
        "{errors:?}"
    );
    let error = page.wait_for("a throw", "missing.thing", Duration::from_millis(200));
    let error = error.unwrap_err();
    assert_has(&error, "threw ReferenceError: missing is not defined");
    assert!(browser.open(&url).unwrap().console_errors().is_empty());
    for (object, truth) in [
        (json!({"type": "undefined"}), false),
        (json!({"value": ""}), false),
    ] {
        assert_eq!(truthy(&object), truth, "{object}");
    }
    assert!(truthy(
        &json!({"type": "number", "unserializableValue": "Infinity"})
    ));
}

#[test]
fn keys_move_focus_and_activate_buttons_and_text_fills_an_input() {
    let (browser, url) = launch();
    let page = browser.open(&url).unwrap();
    let focused = || page.eval("document.activeElement.id").unwrap();
    let clicked = || {
        page.eval("document.getElementById('clicked').textContent")
            .unwrap()
    };
    page.press("Tab").unwrap();
    assert_eq!(focused(), json!("first"));
    page.press("Enter").unwrap();
    assert_eq!(clicked(), json!("first"));
    page.press("Tab").unwrap();
    assert_eq!(focused(), json!("second"));
    page.press("Space").unwrap();
    assert_eq!(clicked(), json!("firstsecond"));
    page.press_with_shift("Tab").unwrap();
    assert_eq!(focused(), json!("first"));
    page.press("Tab").unwrap();
    page.press("Tab").unwrap();
    assert_eq!(focused(), json!("name"));
    page.type_text("hello wörld").unwrap();
    page.press("Backspace").unwrap();
    let value = page.eval("document.getElementById('name').value").unwrap();
    assert_eq!(value, json!("hello wörl"));
    for key in ["Escape", "ArrowLeft", "ArrowUp", "ArrowRight", "ArrowDown"] {
        page.press(key).unwrap();
    }
    let error = page.press("F13").unwrap_err();
    assert_has(&error, "unknown key \"F13\"");
}

#[test]
fn screenshot_writes_a_png_of_the_given_size() {
    let (browser, url) = launch();
    let path = browser._dir.path().join("shot.png");
    browser
        .open(&url)
        .unwrap()
        .screenshot(&path, 640, 360)
        .unwrap();
    let png = std::fs::read(&path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((be(16), be(20)), (640, 360));
}
