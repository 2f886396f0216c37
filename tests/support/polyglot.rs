//! The operators written in Python, C, JavaScript and Zig (`plugins/python/`,
//! `plugins/c/`, `plugins/js/`, `plugins/zig/`), built to
//! `plugins/target/<operator>-<suffix>.wasm` by `scripts/build-polyglot.sh`,
//! which installs each language's toolchain from the package registries when
//! it is missing.
//!
//! [`build`] runs that script once per test process. A language whose
//! toolchain cannot be installed here makes the script fail, and so
//! [`build`]; only with `WEIR_POLYGLOT_OPTIONAL=1` is it reported as
//! unavailable with the script's reason, and its tests [`skip`].

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// A guest language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lang {
    /// Name for people and for `scripts/build-polyglot.sh`.
    pub name: &'static str,
    /// Suffix of the component files: `word-count-<suffix>.wasm`.
    pub suffix: &'static str,
    /// Folder of the sources, one subfolder per operator.
    pub dir: &'static str,
}

/// Every guest language besides Rust.
pub const LANGS: &[Lang] = &[
    Lang {
        name: "python",
        suffix: "py",
        dir: "plugins/python",
    },
    Lang {
        name: "c",
        suffix: "c",
        dir: "plugins/c",
    },
    Lang {
        name: "js",
        suffix: "js",
        dir: "plugins/js",
    },
    Lang {
        name: "zig",
        suffix: "zig",
        dir: "plugins/zig",
    },
];

/// The language called `name`.
pub fn lang(name: &str) -> Lang {
    *LANGS
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no language {name}"))
}

/// Runs `scripts/build-polyglot.sh` once per process; panics when it fails
/// (a build error, or an unavailable toolchain unless
/// `WEIR_POLYGLOT_OPTIONAL=1`).
pub fn build() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = crate::repo_root();
        let started = std::time::Instant::now();
        let out = Command::new("bash")
            .arg(root.join("scripts/build-polyglot.sh"))
            .output()
            .expect("running scripts/build-polyglot.sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Past the test harness's capture: what was built or skipped shows.
        let _ = writeln!(
            std::io::stderr(),
            "{}(scripts/build-polyglot.sh: {:.1} s)",
            stderr,
            started.elapsed().as_secs_f64()
        );
        assert!(
            out.status.success(),
            "scripts/build-polyglot.sh failed:\n{stderr}"
        );
    });
}

/// The component of `operator` (e.g. `word-count`) in `lang`, or why there
/// is none (the toolchain cannot be installed here). Builds first.
pub fn component(lang: Lang, operator: &str) -> Result<PathBuf, String> {
    build();
    let root = crate::repo_root();
    let status_file = root.join("target/polyglot/status").join(lang.name);
    let status = std::fs::read_to_string(&status_file)
        .unwrap_or_else(|e| panic!("{}: {e}", status_file.display()));
    let status = status.trim();
    if status != "ok" {
        return Err(format!("{}: {status}", lang.name));
    }
    let path = root
        .join("plugins/target")
        .join(format!("{operator}-{}.wasm", lang.suffix));
    assert!(path.exists(), "{} was not built", path.display());
    Ok(path)
}

/// A test cannot run for want of a toolchain (`reason`): a failure, unless
/// `WEIR_POLYGLOT_OPTIONAL=1` asks to skip it (then it says so past the test
/// harness's capture). The test suite never passes by skipping.
pub fn skip(test: &str, reason: &str) {
    assert!(
        may_skip(std::env::var("WEIR_POLYGLOT_OPTIONAL").ok().as_deref()),
        "{test}: {reason}; scripts/build-polyglot.sh installs the toolchain (set WEIR_POLYGLOT_OPTIONAL=1 to skip)"
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// Whether `WEIR_POLYGLOT_OPTIONAL` (its value) lets a test skip a language.
fn may_skip(optional: Option<&str>) -> bool {
    optional == Some("1")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_weir_polyglot_optional_1_lets_a_test_skip() {
        assert!(super::may_skip(Some("1")));
        for value in [None, Some(""), Some("0"), Some("true")] {
            assert!(!super::may_skip(value), "{value:?}");
        }
    }
}
