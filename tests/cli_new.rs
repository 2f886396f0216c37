//! `weir new`: the scaffolded crate (Rust) or package (`--lang python`)
//! passes its own tests, builds to a component that `weir inspect`
//! describes, and runs its sample job; bad names and occupied directories
//! fail cleanly.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use weir_tests::cli::Weir;
use weir_tests::nested_build::nested;
use weir_tests::repo_root;
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn weir(args: &[&str]) -> (i32, String, String) {
    let out = WEIR.output(args);
    (out.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// A command for a nested cargo build (as in tests/build.rs). Builds share
/// one target dir so that repeated runs are cached.
fn cargo_nested(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = nested(Command::new(program));
    cmd.env("CARGO_TARGET_DIR", target_dir());
    cmd
}

fn target_dir() -> PathBuf {
    repo_root().join("target/scaffold-test")
}

fn cargo() -> Command {
    cargo_nested(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `cmd`, failing the test with its output when it fails.
fn check(cmd: &mut Command, what: &str) -> Output {
    let start = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{what}: {:.1}s", start.elapsed().as_secs_f64());
    out
}

#[test]
fn a_new_plugin_tests_builds_inspects_and_runs() {
    let start = Instant::now();
    let (_tmp, root) = scaffolded(
        &["event-tally"],
        &[
            "Cargo.toml",
            "src/lib.rs",
            "README.md",
            ".gitignore",
            "job.toml",
            "input.jsonl",
        ],
        &[
            "cargo test",
            "cargo build --release --target wasm32-wasip2",
            "weir inspect target/wasm32-wasip2/release/event_tally.wasm",
            "weir run job.toml",
        ],
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let sdk = repo_root().join("sdk").canonicalize().unwrap();
    assert_has(
        &manifest,
        &format!("weir-sdk = {{ path = {:?} }}", sdk.to_str().unwrap()),
    );
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert_has(&lib, "pub struct EventTally");
    assert_has(&lib, "weir_sdk::export!(EventTally);");

    // The generated code is rustfmt-clean.
    check(
        Command::new("rustfmt")
            .args(["--edition", "2024", "--check"])
            .arg(root.join("src/lib.rs")),
        "rustfmt --check src/lib.rs",
    );

    // Its own unit tests pass.
    let out = check(cargo().arg("test").current_dir(&root), "cargo test");
    let report = String::from_utf8_lossy(&out.stdout);
    assert_has(&report, "test result: ok. 3 passed");

    // It builds to a component.
    check(
        cargo_nested("bash").arg(repo_root().join("scripts/ensure-wasm-target.sh")),
        "scripts/ensure-wasm-target.sh",
    );
    check(
        cargo()
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .current_dir(&root),
        "cargo build --release --target wasm32-wasip2",
    );
    // The shared target dir holds the component; put it where the crate's
    // own build would have (the sample job points there).
    let built = target_dir().join("wasm32-wasip2/release/event_tally.wasm");
    let wasm = root.join("target/wasm32-wasip2/release/event_tally.wasm");
    std::fs::create_dir_all(wasm.parent().unwrap()).unwrap();
    std::fs::copy(&built, &wasm).unwrap();

    assert_inspects_and_runs(&wasm, &root, "event-tally");
    eprintln!("weir new end to end: {:.1}s", start.elapsed().as_secs_f64());
}

/// `weir new --lang python`: the package's pytest tests pass, `./build.sh`
/// builds a component `weir inspect` describes, and the sample job gives
/// the same lines as the Rust template's.
#[test]
fn a_new_python_plugin_tests_builds_inspects_and_runs() {
    let start = Instant::now();
    let (_tmp, root) = scaffolded(
        &["py-tally", "--lang", "python"],
        &[
            "app.py",
            "tests/test_app.py",
            "conftest.py",
            "test.sh",
            "build.sh",
            "README.md",
            ".gitignore",
            "job.toml",
            "input.jsonl",
        ],
        &[
            "./test.sh",
            "./build.sh",
            "weir inspect target/py-tally.wasm",
            "weir run job.toml",
        ],
    );
    let app = std::fs::read_to_string(root.join("app.py")).unwrap();
    assert_has(&app, "class PyTally(Operator):");
    assert_has(&app, "weir_sdk.export(PyTally, globals())");

    // Its own tests pass under pytest, with no component build.
    let out = check(
        Command::new(root.join("test.sh"))
            .arg("-q")
            .current_dir(&root),
        "./test.sh",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert_has(&report, "4 passed");

    // It builds to a component with one command.
    check(&mut Command::new(root.join("build.sh")), "./build.sh");
    let wasm = root.join("target/py-tally.wasm");
    assert_inspects_and_runs(&wasm, &root, "py-tally");
    eprintln!(
        "weir new --lang python end to end: {:.1}s",
        start.elapsed().as_secs_f64()
    );
}

/// Runs `weir new ARGS --dir <a temporary folder>` (`args[0]` the name):
/// it writes every one of `files` and lists it, and its next steps include
/// `cd` into the new folder and every one of `steps`.
fn scaffolded(args: &[&str], files: &[&str], steps: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let mut full = vec!["new"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--dir", dir]);
    let (code, stdout, stderr) = weir(&full);
    assert_eq!(code, 0, "{stderr}");
    let root = tmp.path().join(args[0]);
    for file in files {
        assert!(root.join(file).is_file(), "{file} missing");
        assert!(stdout.contains(&format!("  {file}\n")), "{file}: {stdout}");
    }
    let cd = format!("cd {}", root.display());
    for step in std::iter::once(cd.as_str()).chain(steps.iter().copied()) {
        assert!(stdout.contains(step), "{step:?} not in {stdout}");
    }
    (tmp, root)
}

/// `weir inspect` shows the template's name `name` and ports for the
/// component `wasm`, and the sample job in `root` validates and runs,
/// counting the sample input's events per user.
fn assert_inspects_and_runs(wasm: &std::path::Path, root: &std::path::Path, name: &str) {
    let (code, stdout, stderr) = weir(&["inspect", "--json", wasm.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["name"], name);
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["inputs"], serde_json::json!(["in"]));
    assert_eq!(v["outputs"], serde_json::json!(["out"]));

    let job = root.join("job.toml");
    let (code, _, stderr) = weir(&["validate", job.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = weir(&["run", job.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let out = std::fs::read_to_string(root.join("out/counts.jsonl")).unwrap();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            r#"{"action":"login","count":1,"user":"ada"}"#,
            r#"{"action":"login","count":1,"user":"grace"}"#,
            r#"{"action":"search","count":2,"user":"ada"}"#,
            r#"{"action":"buy","count":3,"user":"ada"}"#,
            r#"{"action":"logout","count":2,"user":"grace"}"#,
        ]
    );
}

fn assert_one_line_error(args: &[&str], needles: &[&str]) {
    WEIR.output(args).assert_one_line_error(needles);
}

#[test]
fn new_refuses_invalid_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for (name, why) in [
        ("MyPlugin", "starts with `M`"),
        ("9lives", "starts with `9`"),
        ("my plugin", "contains ` `"),
        ("my.plugin", "contains `.`"),
        ("../escape", "starts with `.`"),
        ("struct", "Rust keyword"),
        ("weir-sdk", "dependency"),
    ] {
        assert_one_line_error(
            &["new", name, "--dir", dir],
            &[
                &format!("invalid plugin name `{name}`"),
                why,
                "lowercase letters, digits",
            ],
        );
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn new_refuses_an_existing_non_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("taken");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "mine").unwrap();
    assert_one_line_error(
        &["new", "taken", "--dir", tmp.path().to_str().unwrap()],
        &[
            root.to_str().unwrap(),
            "already exists and is not empty",
            "choose another name or --dir",
        ],
    );
    // Nothing was touched.
    let entries: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn new_refuses_a_path_that_is_not_the_sdk() {
    let tmp = tempfile::tempdir().unwrap();
    assert_one_line_error(
        &[
            "new",
            "op",
            "--dir",
            tmp.path().to_str().unwrap(),
            "--sdk",
            "/nonexistent/sdk",
        ],
        &["/nonexistent/sdk", "pass --sdk"],
    );
    assert!(!tmp.path().join("op").exists());
}
