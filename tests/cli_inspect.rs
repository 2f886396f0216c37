//! `weir inspect` on every built plugin, and clean failures on bad files.

use weir_tests::cli::Weir;
use weir_tests::plugins;
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

fn weir(args: &[&str]) -> (i32, String, String) {
    let out = WEIR.output(args);
    (out.code().unwrap_or(-1), out.stdout, out.stderr)
}

#[test]
fn inspect_describes_every_plugin() {
    for (name, path) in plugins::ALL {
        let (code, stdout, stderr) = weir(&["inspect", path]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_has(
            &stdout,
            &match *name {
                "word-count-v2" => "plugin:        word-count 2.0.0".to_string(),
                other => format!("plugin:        {other} 0.1.0"),
            },
        );
        assert_has(&stdout, "weir:operator/lifecycle@0.1.0");
        assert_has(&stdout, "weir:operator/flat@0.1.0");
        assert_has(&stdout, "batches:       flat");
        // Of the plugins, reconcile alone reads rows.
        let rows = match *name {
            "reconcile" => "rows:          read as rows",
            _ => "rows:          read as JSON text",
        };
        assert_has(&stdout, rows);
        // Rust SDK plugins are of world `operator-timers`.
        assert_has(&stdout, "weir:operator/timers@0.1.0");
        assert_has(&stdout, "weir:operator/timer-lifecycle@0.1.0");
    }
}

#[test]
fn inspect_json_has_the_documented_shape() {
    let (code, stdout, stderr) = weir(&["inspect", "--json", plugins::RECONCILE]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["name"], "reconcile");
    assert_eq!(v["inputs"], serde_json::json!(["a", "b"]));
    assert_eq!(v["outputs"], serde_json::json!(["out", "late"]));
    assert_eq!(
        v["state_version"], 2,
        "reconcile's state values are rows since version 2"
    );
    assert_eq!(
        v["batches"], "flat",
        "the Rust SDK builds world operator-flat"
    );
    assert_eq!(v["reads_rows"], true, "reconcile reads its orders as rows");
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
    assert_eq!(keys.len(), 12, "{keys:?}");
}

fn assert_one_line_error(args: &[&str], needles: &[&str]) {
    WEIR.output(args).assert_one_line_error(needles);
}

#[test]
fn inspect_fails_cleanly_on_a_missing_file() {
    assert_one_line_error(
        &["inspect", "/nonexistent/op.wasm"],
        &["/nonexistent/op.wasm", "No such file"],
    );
}

/// `weir inspect` on a file `name` holding `bytes` fails with one line that
/// names the file and says `why`.
fn inspect_refuses(name: &str, bytes: &[u8], why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    assert_one_line_error(&["inspect", path.to_str().unwrap()], &[name, why]);
}

#[test]
fn inspect_fails_cleanly_on_a_non_wasm_file() {
    inspect_refuses("notes.wasm", b"hello", "not a WebAssembly file");
}

#[test]
fn inspect_fails_cleanly_on_a_core_module() {
    // The smallest valid core module: magic and version 1.
    inspect_refuses(
        "core.wasm",
        b"\0asm\x01\0\0\0",
        "core WebAssembly module, not a component",
    );
}

#[test]
fn inspect_fails_cleanly_on_a_truncated_component() {
    let bytes = std::fs::read(plugins::FILTER).unwrap();
    inspect_refuses("cut.wasm", &bytes[..bytes.len() / 2], "invalid component");
}

#[test]
fn inspect_fails_cleanly_on_a_component_of_another_world() {
    // An empty component: valid, but exports nothing of weir:operator.
    inspect_refuses(
        "empty.wasm",
        b"\0asm\x0d\0\x01\0",
        "does not implement the weir:operator@0.1.0 world",
    );
}
