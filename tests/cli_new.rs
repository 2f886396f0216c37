//! `weir new`: the scaffolded crate passes its own tests, builds to a
//! component that `weir inspect` describes, and runs its sample job; bad names
//! and occupied directories fail cleanly.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use weir_tests::cli::Weir;
use weir_tests::nested_build::nested;
use weir_tests::repo_root;

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
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let (code, stdout, stderr) = weir(&["new", "event-tally", "--dir", dir]);
    assert_eq!(code, 0, "{stderr}");
    let root = tmp.path().join("event-tally");
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "README.md",
        ".gitignore",
        "job.toml",
        "input.jsonl",
    ] {
        assert!(root.join(file).is_file(), "{file} missing");
        assert!(stdout.contains(&format!("  {file}\n")), "{file}: {stdout}");
    }
    for step in [
        &format!("cd {}", root.display()),
        "cargo test",
        "cargo build --release --target wasm32-wasip2",
        "weir inspect target/wasm32-wasip2/release/event_tally.wasm",
        "weir run job.toml",
    ] {
        assert!(stdout.contains(step), "{step:?} not in {stdout}");
    }
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let sdk = repo_root().join("sdk").canonicalize().unwrap();
    assert!(
        manifest.contains(&format!(
            "weir-sdk = {{ path = {:?} }}",
            sdk.to_str().unwrap()
        )),
        "{manifest}"
    );
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub struct EventTally"), "{lib}");
    assert!(lib.contains("weir_sdk::export!(EventTally);"), "{lib}");

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
    assert!(report.contains("test result: ok. 3 passed"), "{report}");

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

    // `weir inspect` shows the template's name and ports.
    let (code, stdout, stderr) = weir(&["inspect", "--json", wasm.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["name"], "event-tally");
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["inputs"], serde_json::json!(["in"]));
    assert_eq!(v["outputs"], serde_json::json!(["out"]));

    // The sample job validates and runs.
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
    eprintln!("weir new end to end: {:.1}s", start.elapsed().as_secs_f64());
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
