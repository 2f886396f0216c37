//! `weir inspect` on every built plugin, and clean failures on bad files.

use std::process::Command;

use weir_tests::plugins;

fn weir(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("runs weir");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn inspect_describes_every_plugin() {
    for (name, path) in plugins::ALL {
        let (code, stdout, stderr) = weir(&["inspect", path]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(
            stdout.contains(&match *name {
                "word-count-v2" => "plugin:        word-count 2.0.0".to_string(),
                other => format!("plugin:        {other} 0.1.0"),
            }),
            "{stdout}"
        );
        assert!(stdout.contains("weir:operator/lifecycle@0.1.0"), "{stdout}");
        assert!(stdout.contains("weir:operator/flat@0.1.0"), "{stdout}");
        assert!(stdout.contains("batches:       flat"), "{stdout}");
    }
}

#[test]
fn inspect_json_has_the_documented_shape() {
    let (code, stdout, stderr) = weir(&["inspect", "--json", plugins::RECONCILE]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["name"], "reconcile");
    assert_eq!(v["inputs"], serde_json::json!(["a", "b"]));
    assert_eq!(v["outputs"], serde_json::json!(["out"]));
    assert_eq!(v["state_version"], 1);
    assert_eq!(
        v["batches"], "flat",
        "the Rust SDK builds world operator-flat"
    );
    assert!(v["size"].as_u64().unwrap() > 0);
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
    assert!(
        v["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "weir:operator/snapshot@0.1.0")
    );
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 11, "{keys:?}");
}

fn assert_one_line_error(args: &[&str], needles: &[&str]) {
    let (code, stdout, stderr) = weir(args);
    assert_ne!(code, 0);
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn inspect_fails_cleanly_on_a_missing_file() {
    assert_one_line_error(
        &["inspect", "/nonexistent/op.wasm"],
        &["/nonexistent/op.wasm", "No such file"],
    );
}

#[test]
fn inspect_fails_cleanly_on_a_non_wasm_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.wasm");
    std::fs::write(&path, "hello").unwrap();
    assert_one_line_error(
        &["inspect", path.to_str().unwrap()],
        &["notes.wasm", "not a WebAssembly file"],
    );
}

#[test]
fn inspect_fails_cleanly_on_a_core_module() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    // The smallest valid core module: magic and version 1.
    std::fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    assert_one_line_error(
        &["inspect", path.to_str().unwrap()],
        &["core.wasm", "core WebAssembly module, not a component"],
    );
}

#[test]
fn inspect_fails_cleanly_on_a_truncated_component() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.wasm");
    let bytes = std::fs::read(plugins::FILTER).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert_one_line_error(
        &["inspect", path.to_str().unwrap()],
        &["cut.wasm", "invalid component"],
    );
}

#[test]
fn inspect_fails_cleanly_on_a_component_of_another_world() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.wasm");
    // An empty component: valid, but exports nothing of weir:operator.
    std::fs::write(&path, b"\0asm\x0d\0\x01\0").unwrap();
    assert_one_line_error(
        &["inspect", path.to_str().unwrap()],
        &[
            "empty.wasm",
            "does not implement the weir:operator@0.1.0 world",
        ],
    );
}
