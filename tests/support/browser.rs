//! A headless Chromium for the web dashboard's tests, driven over the
//! DevTools protocol on a pipe (`--remote-debugging-pipe`): Chromium reads
//! commands from its fd 3 and writes replies and events to its fd 4, each
//! message one JSON text ended by a NUL byte. [`Browser::launch`] starts it
//! with a fresh profile in a temporary folder, [`Browser::open`] opens a tab,
//! and a [`Page`] evaluates JavaScript, waits for conditions, presses keys,
//! types and takes screenshots.

use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::{fs::PermissionsExt, process::CommandExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long any one command may wait for its reply.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Console errors kept per page; older ones are dropped first.
const ERRORS_KEPT: usize = 200;
const INSTALL_HINT: &str =
    "run scripts/services.sh install (installs the Debian package chromium) or set WEIR_CHROMIUM";
const FLAGS: &str = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-extensions --remote-debugging-pipe --window-size=1400,900 about:blank";

type Reply = Result<Value, String>;

/// The Chromium binary: `$WEIR_CHROMIUM` if set (and not empty), else
/// `chromium` on `PATH`, else `/usr/bin/chromium` if it exists.
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WEIR_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let executable = |p: &PathBuf| {
        p.metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut found = std::env::split_paths(&path).map(|dir| dir.join("chromium"));
    found
        .find(|p| p.is_file() && executable(p))
        .or_else(|| Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.exists()))
}

/// What the reader thread shares with the callers.
#[derive(Default)]
struct Shared {
    /// The reply channel of each command sent and not answered yet, by id.
    pending: HashMap<u64, mpsc::Sender<Value>>,
    /// Per session id, what its events told.
    sessions: HashMap<String, Session>,
    /// Why the reader stopped. Once set, `pending` stays empty, so that no
    /// caller waits for a reply that cannot come.
    closed: Option<String>,
}

#[derive(Default)]
struct Session {
    /// Console errors and uncaught exceptions, oldest first, at most
    /// [`ERRORS_KEPT`].
    errors: VecDeque<String>,
    /// How many `Page.loadEventFired` arrived.
    loads: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running headless Chromium. Dropping it closes the browser (killing it
/// when it has not exited 2 s later) and removes its temporary folder.
pub struct Browser {
    child: Mutex<Child>,
    /// Our end of Chromium's fd 3.
    commands: Mutex<File>,
    shared: Arc<Mutex<Shared>>,
    next_id: AtomicU64,
    /// Chromium's stdout and stderr.
    log: PathBuf,
    /// The profile and the log. Fields drop after `drop` has ended Chromium.
    _dir: tempfile::TempDir,
}

/// A pipe with both ends close-on-exec and numbered above 4, so that the
/// child's `dup2`s onto fds 3 and 4 neither overwrite the other source nor
/// leave a descriptor that already is 3 or 4 close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let os_error = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills `fds` with two new descriptors, each wrapped once.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_error("pipe2"));
    }
    let [read, write] = fds.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    let above_4 = |fd: OwnedFd| match fd.as_raw_fd() {
        5.. => Ok(fd),
        // SAFETY: duplicates a descriptor we own; the copy is wrapped once
        // and the original closes when `fd` drops.
        raw => match unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 5) } {
            copy if copy >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(copy) }),
            _ => Err(os_error("fcntl(F_DUPFD_CLOEXEC)")),
        },
    };
    Ok((above_4(read)?, above_4(write)?))
}

impl Browser {
    /// Starts Chromium headless with a fresh profile and checks that it
    /// answers on the DevTools pipe.
    pub fn launch() -> Result<Browser, String> {
        let bin = chromium().ok_or_else(|| format!("chromium not found: {INSTALL_HINT}"))?;
        let dir = tempfile::Builder::new().prefix("weir-chromium-").tempdir();
        let dir = dir.map_err(|e| format!("creating a temporary folder for chromium: {e}"))?;
        let log = dir.path().join("chromium.log");
        let log_file = File::create(&log).and_then(|f| Ok((f.try_clone()?, f)));
        let (stdout, stderr) = log_file.map_err(|e| format!("{}: {e}", log.display()))?;
        let (their_commands, our_commands) = pipe()?;
        let (our_replies, their_replies) = pipe()?;
        let (fd3, fd4) = (their_commands.as_raw_fd(), their_replies.as_raw_fd());
        let mut command = Command::new(&bin);
        command.args(FLAGS.split_whitespace());
        let profile = dir.path().join("profile");
        command.arg(format!("--user-data-dir={}", profile.display()));
        command.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
        // SAFETY: runs between fork and exec and only calls dup2, which is
        // async-signal-safe. fd3 and fd4 are above 4 (see `pipe`); the
        // copies on 3 and 4 are not close-on-exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(fd3, 3) < 0 || libc::dup2(fd4, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let bin = bin.display();
        let child = command.spawn();
        let child = child.map_err(|e| format!("starting {bin}: {e} ({INSTALL_HINT})"))?;
        // Only Chromium holds its ends, so the reader sees the pipe end when
        // Chromium exits.
        drop((their_commands, their_replies));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let reader_shared = Arc::clone(&shared);
        let reader = std::thread::Builder::new().name("chromium-devtools".into());
        let reader = reader.spawn(move || read_messages(File::from(our_replies), &reader_shared));
        let browser = Browser {
            child: Mutex::new(child),
            commands: Mutex::new(File::from(our_commands)),
            shared,
            next_id: AtomicU64::new(1),
            log,
            _dir: dir,
        };
        reader.map_err(|e| format!("starting the DevTools reader thread: {e}"))?;
        let version = browser.send(None, "Browser.getVersion", json!({}), COMMAND_TIMEOUT);
        version.map_err(|e| format!("{bin} does not answer on the DevTools pipe: {e}"))?;
        Ok(browser)
    }

    /// Opens `url` in a new tab and waits for its load event.
    pub fn open(&self, url: &str) -> Result<Page<'_>, String> {
        let blank = json!({"url": "about:blank"});
        let created = self.send(None, "Target.createTarget", blank, COMMAND_TIMEOUT)?;
        let target = string_field(&created, "targetId", "Target.createTarget")?;
        let attach = json!({"targetId": target, "flatten": true});
        let attached = self.send(None, "Target.attachToTarget", attach, COMMAND_TIMEOUT);
        // From here on the page's Drop closes the tab, also on errors.
        let mut page = Page {
            browser: self,
            target,
            session: String::new(),
        };
        page.session = string_field(&attached?, "sessionId", "Target.attachToTarget")?;
        for method in ["Runtime.enable", "Page.enable", "Log.enable"] {
            page.call(method, json!({}))?;
        }
        page.navigate(url)?;
        Ok(page)
    }

    /// Sends `method` (to session `to`, else to the browser) and waits up to
    /// `wait` for its reply's `result`.
    fn send(&self, to: Option<&str>, method: &str, params: Value, wait: Duration) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = to {
            message["sessionId"] = json!(session);
        }
        let (reply_to, replies) = mpsc::channel();
        {
            let mut shared = lock(&self.shared);
            if let Some(why) = &shared.closed {
                return Err(self.failed(method, why));
            }
            shared.pending.insert(id, reply_to);
        }
        if let Err(e) = lock(&self.commands).write_all(format!("{message}\0").as_bytes()) {
            lock(&self.shared).pending.remove(&id);
            return Err(self.failed(method, &format!("writing to the DevTools pipe: {e}")));
        }
        let Ok(reply) = replies.recv_timeout(wait) else {
            let mut shared = lock(&self.shared);
            shared.pending.remove(&id);
            let why = shared.closed.clone();
            let why = why.unwrap_or_else(|| format!("no reply within {wait:?}"));
            return Err(self.failed(method, &why));
        };
        match reply.get("error") {
            Some(error) => Err(self.failed(method, &format!("the browser answered {error}"))),
            None => Ok(reply.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    /// An error of `method`, with Chromium's exit status if it exited and
    /// the end of its log.
    fn failed(&self, method: &str, why: &str) -> String {
        let status = match lock(&self.child).try_wait() {
            Ok(Some(status)) => format!(" (chromium exited: {status})"),
            _ => String::new(),
        };
        let log = std::fs::read(&self.log).unwrap_or_default();
        let tail = String::from_utf8_lossy(&log[log.len().saturating_sub(2000)..]);
        let log = self.log.display();
        format!("{method}: {why}{status}\nthe end of chromium's log {log}:\n{tail}")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.send(None, "Browser.close", json!({}), Duration::from_secs(2));
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        let deadline = Instant::now() + Duration::from_secs(2);
        while let Ok(None) = child.try_wait() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The reader thread: splits what Chromium writes to its fd 4 at NUL bytes,
/// hands each reply to its caller by id and notes events per session.
fn read_messages(mut pipe: File, shared: &Mutex<Shared>) {
    let (mut buffer, mut chunk, mut searched) = (Vec::new(), vec![0; 1 << 16], 0);
    let why = loop {
        match pipe.read(&mut chunk) {
            Ok(0) => break "chromium closed the DevTools pipe".to_string(),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("reading the DevTools pipe: {e}"),
        }
        // `buffer[..searched]` holds no NUL: only what is new is searched.
        let mut start = 0;
        while let Some(end) = buffer[searched..].iter().position(|&b| b == 0) {
            route(&buffer[start..searched + end], shared);
            (start, searched) = (searched + end + 1, searched + end + 1);
        }
        buffer.drain(..start);
        searched = buffer.len();
    };
    let mut shared = lock(shared);
    shared.closed = Some(why);
    shared.pending.clear();
}

/// Hands a reply to its caller, or notes an event. Unparsable messages and
/// replies nobody waits for (any more) are dropped.
fn route(bytes: &[u8], shared: &Mutex<Shared>) {
    let Ok(message) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let mut shared = lock(shared);
    if let Some(id) = message["id"].as_u64() {
        if let Some(reply_to) = shared.pending.remove(&id) {
            let _ = reply_to.send(message);
        }
        return;
    }
    let (params, session) = (&message["params"], text(&message["sessionId"]).to_string());
    let kind = text(&params["type"]);
    let error = match text(&message["method"]) {
        "Page.loadEventFired" => {
            shared.sessions.entry(session).or_default().loads += 1;
            return;
        }
        "Runtime.exceptionThrown" => format!("uncaught {}", exception(&params["exceptionDetails"])),
        "Runtime.consoleAPICalled" if kind == "error" || kind == "assert" => {
            let none = Vec::new();
            let args = params["args"].as_array().unwrap_or(&none);
            let args: Vec<String> = args.iter().map(describe).collect();
            format!("console.{kind}: {}", args.join(" "))
        }
        "Log.entryAdded" if params["entry"]["level"] == "error" => {
            let entry = &params["entry"];
            let (source, url) = (text(&entry["source"]), text(&entry["url"]));
            format!("{source}: {} {url}", text(&entry["text"]))
        }
        "Inspector.targetCrashed" => "the page crashed".to_string(),
        _ => return,
    };
    let errors = &mut shared.sessions.entry(session).or_default().errors;
    if errors.len() == ERRORS_KEPT {
        errors.pop_front();
    }
    errors.push_back(error.trim_end().to_string());
}

/// A JSON string's text; anything else is empty.
fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn string_field(reply: &Value, field: &str, method: &str) -> Result<String, String> {
    let value = reply[field].as_str().map(str::to_string);
    value.ok_or_else(|| format!("{method}: no {field} in the reply {reply}"))
}

/// A remote object (`Runtime.RemoteObject`) as a person reads it: a string
/// as it is, another value as JSON, else its description or type.
fn describe(object: &Value) -> String {
    match object.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(value) => value.to_string(),
        None => {
            let keys = ["unserializableValue", "description", "type"];
            let key = keys.into_iter().find(|&key| object[key].is_string());
            key.map_or("undefined", |key| text(&object[key])).into()
        }
    }
}

/// A remote object's value as `returnByValue` serialised it; NaN, Infinity
/// and bigints (which JSON cannot hold) as their text, undefined as null.
fn value_of(object: &Value) -> Value {
    match object.get("value") {
        Some(value) => value.clone(),
        None => object["unserializableValue"].clone(),
    }
}

/// Whether JavaScript holds the remote object true.
fn truthy(object: &Value) -> bool {
    match object.get("value") {
        Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
        None => match object["unserializableValue"].as_str() {
            Some(text) => !matches!(text, "NaN" | "-0" | "0n"),
            None => object["type"] != "undefined",
        },
    }
}

/// An exception's description (of a `Runtime.ExceptionDetails`).
fn exception(details: &Value) -> String {
    match details.get("exception") {
        Some(exception) if exception["type"] != "undefined" => describe(exception),
        _ => text(&details["text"]).to_string(),
    }
}

/// A tab of a [`Browser`]. Dropping it closes the tab.
pub struct Page<'b> {
    browser: &'b Browser,
    target: String,
    /// The flat session attached to `target`; every command goes to it.
    session: String,
}

/// A key as `Input.dispatchKeyEvent` names it: `key`, `code`,
/// `windowsVirtualKeyCode` and the text it types (Enter and Space activate
/// a focused button through it).
type Key = (&'static str, &'static str, i64, &'static str);
#[rustfmt::skip]
const KEYS: &[Key] = &[
    ("Tab", "Tab", 9, ""), ("Enter", "Enter", 13, "\r"), (" ", "Space", 32, " "),
    ("Escape", "Escape", 27, ""), ("Backspace", "Backspace", 8, ""),
    ("ArrowLeft", "ArrowLeft", 37, ""), ("ArrowUp", "ArrowUp", 38, ""),
    ("ArrowRight", "ArrowRight", 39, ""), ("ArrowDown", "ArrowDown", 40, ""),
];
const SHIFT_KEY: Key = ("Shift", "ShiftLeft", 16, "");
/// The protocol's modifier bit of Shift.
const SHIFT: i64 = 8;

impl Page<'_> {
    /// Reads what this page's events told.
    fn events<T>(&self, read: impl FnOnce(&Session) -> T) -> T {
        let shared = lock(&self.browser.shared);
        let none = Session::default();
        read(shared.sessions.get(&self.session).unwrap_or(&none))
    }

    fn call(&self, method: &str, params: Value) -> Reply {
        self.browser
            .send(Some(&self.session), method, params, COMMAND_TIMEOUT)
    }

    /// Loads `url` in this tab and waits for its load event.
    pub fn navigate(&self, url: &str) -> Result<(), String> {
        let loads = || self.events(|session| session.loads);
        let before = loads();
        let navigated = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(error) = navigated["errorText"].as_str() {
            return Err(format!("loading {url}: {error}"));
        }
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while loads() == before {
            if Instant::now() > deadline {
                let why = format!("no load event for {url} within {COMMAND_TIMEOUT:?}");
                return Err(self.browser.failed("Page.navigate", &why));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// `Runtime.evaluate`: the outer error is the protocol's, the inner one
    /// the page's (a thrown exception or a rejected promise).
    fn evaluate(&self, js: &str) -> Result<Result<Value, String>, String> {
        let params = json!({"expression": js, "returnByValue": true, "awaitPromise": true});
        let reply = self.call("Runtime.evaluate", params)?;
        Ok(match reply.get("exceptionDetails") {
            Some(details) => Err(exception(details)),
            None => Ok(reply["result"].clone()),
        })
    }

    /// Evaluates `js` in the page (awaiting a promise) and returns its value
    /// as JSON (undefined as null). An exception is an error with its
    /// description.
    pub fn eval(&self, js: &str) -> Result<Value, String> {
        let value = self.evaluate(js)?.map(|object| value_of(&object));
        value.map_err(|exception| format!("evaluating `{js}`: {exception}"))
    }

    /// Evaluates `js` every 100 ms until its value is truthy and returns that
    /// value. After `timeout` the error names `what`, the last value or
    /// exception, the start of the page's text and its console errors.
    pub fn wait_for(&self, what: &str, js: &str, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        let last = loop {
            let last = match self.evaluate(js)? {
                Ok(object) if truthy(&object) => return Ok(value_of(&object)),
                Ok(object) => match object.get("value") {
                    Some(value) => format!("the last value was {value}"),
                    None => format!("the last value was {}", describe(&object)),
                },
                Err(exception) => format!("the last evaluation threw {exception}"),
            };
            let now = Instant::now();
            if now >= deadline {
                break last;
            }
            std::thread::sleep(Duration::from_millis(100).min(deadline - now));
        };
        let text = self.eval("document.body ? document.body.innerText.slice(0, 2000) : ''");
        let text = text.unwrap_or_else(|e| json!(format!("(unreadable: {e})")));
        let text = describe(&json!({ "value": text }));
        let errors = self.console_errors();
        let errors = errors[errors.len().saturating_sub(20)..].join("\n");
        Err(format!(
            "timed out after {timeout:?} waiting for {what} (`{js}`): {last}\n\
             the page's text:\n{text}\nits console errors:\n{errors}"
        ))
    }

    /// Presses and releases `key` (a `KeyboardEvent.key`: Tab, Enter, " " or
    /// Space, Escape, Backspace, ArrowUp/Down/Left/Right) as a keyboard
    /// does: Tab moves the focus, Enter and Space activate a focused button.
    pub fn press(&self, key: &str) -> Result<(), String> {
        self.press_key(key, 0)
    }

    /// Presses `key` with Shift held (Shift+Tab moves the focus back).
    pub fn press_with_shift(&self, key: &str) -> Result<(), String> {
        self.key_event("keyDown", SHIFT_KEY, SHIFT)?;
        let pressed = self.press_key(key, SHIFT);
        self.key_event("keyUp", SHIFT_KEY, 0)?;
        pressed
    }

    fn press_key(&self, key: &str, modifiers: i64) -> Result<(), String> {
        let Some(&key) = KEYS.iter().find(|k| k.0 == key || k.1 == key) else {
            let known: Vec<&str> = KEYS.iter().map(|k| k.1).collect();
            return Err(format!("press: unknown key {key:?} (known: {known:?})"));
        };
        self.key_event("keyDown", key, modifiers)?;
        self.key_event("keyUp", key, modifiers).map(drop)
    }

    fn key_event(&self, kind: &str, (key, code, vk, text): Key, modifiers: i64) -> Reply {
        let mut event = json!({"type": kind, "key": key, "code": code, "modifiers": modifiers,
            "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk});
        if kind == "keyDown" && !text.is_empty() {
            (event["text"], event["unmodifiedText"]) = (json!(text), json!(text));
        }
        self.call("Input.dispatchKeyEvent", event)
    }

    /// Types `text` into the focused element (`Input.insertText`).
    pub fn type_text(&self, text: &str) -> Result<(), String> {
        let text = json!({ "text": text });
        self.call("Input.insertText", text).map(drop)
    }

    /// Sets the viewport to `width` x `height` CSS pixels at scale 1 (it
    /// stays so) and writes a PNG screenshot of it to `path`.
    pub fn screenshot(&self, path: &Path, width: u32, height: u32) -> Result<(), String> {
        let metrics =
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false});
        self.call("Emulation.setDeviceMetricsOverride", metrics)?;
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        let png = base64::engine::general_purpose::STANDARD.decode(text(&shot["data"]));
        let png = png.map_err(|e| format!("Page.captureScreenshot's data: {e}"))?;
        std::fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// The page's console errors (`console.error`, failed `console.assert`,
    /// error log entries such as failed loads) and uncaught exceptions,
    /// oldest first: the last 200.
    pub fn console_errors(&self) -> Vec<String> {
        self.events(|session| session.errors.iter().cloned().collect())
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        let close = json!({"targetId": self.target});
        let wait = Duration::from_secs(2);
        let _ = self.browser.send(None, "Target.closeTarget", close, wait);
    }
}

#[cfg(test)]
mod tests;
