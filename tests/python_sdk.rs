//! The Python SDK's own tests and the harness tests of the Python plugins
//! (`sdk/python/tests`, `plugins/python/*/tests`), run with pytest in plain
//! CPython through `scripts/python-sdk.sh test`, which installs pytest and
//! componentize-py when missing. A toolchain that cannot be installed fails
//! this test, as it fails `scripts/build-polyglot.sh`: the suite never
//! passes by skipping.

use std::process::Command;

#[test]
fn python_sdk_and_plugin_harness_tests_pass_under_pytest() {
    let root = weir_tests::repo_root();
    let out = Command::new("bash")
        .arg(root.join("scripts/python-sdk.sh"))
        .args(["test", "-q", "sdk/python/tests", "plugins/python"])
        .current_dir(&root)
        .output()
        .expect("running scripts/python-sdk.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pytest failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The summary line names how many passed: not zero, none skipped.
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.contains(" passed") && !summary.contains("skipped"),
        "unexpected pytest summary: {summary}\n{stdout}"
    );
}
