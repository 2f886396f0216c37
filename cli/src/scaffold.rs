//! `weir new`: scaffolds a plugin, in Rust or Python ([`Lang`]), that builds
//! to a component and passes its own tests out of the box.
//!
//! The templates are the files under `cli/templates/plugin/` (Rust) and
//! `cli/templates/python/`, embedded in the binary. [`scaffold`] fills their
//! placeholders (`{{name}}`, `{{crate_name}}`, `{{struct_name}}`,
//! `{{class_name}}`, `{{sdk_path}}`, `{{sdk_path_toml}}`, `{{sdk_python}}`,
//! `{{sdk_python_py}}`, `{{python_sdk_sh}}`) and writes, for Rust:
//!
//! | file | what |
//! | --- | --- |
//! | `Cargo.toml` | a standalone crate (its own `[workspace]`), `cdylib` + `rlib`, depending on `weir-sdk` by absolute path |
//! | `src/lib.rs` | a keyed event counter over `MapState`, with unit tests using `weir_sdk::testing::Harness` |
//! | `README.md` | how to test, build, inspect and run it |
//! | `.gitignore` | `target/`, `state/`, `out/` |
//! | `job.toml` | a sample job: file source → the plugin → file sink |
//! | `input.jsonl` | the sample job's input |
//!
//! and for Python, a package on `weir_sdk` (`sdk/python`) built with the
//! checkout's `scripts/python-sdk.sh`:
//!
//! | file | what |
//! | --- | --- |
//! | `app.py` | the same keyed event counter on `weir_sdk.MapState`, exported with `weir_sdk.export` |
//! | `tests/test_app.py` | its pytest tests on `weir_sdk.testing.Harness` |
//! | `conftest.py` | puts the checkout's `weir_sdk` on a plain `pytest`'s path |
//! | `test.sh`, `build.sh` | run the tests, build `target/<name>.wasm` |
//! | `README.md`, `.gitignore`, `job.toml`, `input.jsonl` | as for Rust |
//!
//! ```no_run
//! use std::path::Path;
//! let sdk = weir_cli::scaffold::default_sdk_dir();
//! let lang = weir_cli::scaffold::Lang::Rust;
//! let files = weir_cli::scaffold::scaffold("my-counter", Path::new("."), &sdk, lang).unwrap();
//! print!("{}", weir_cli::scaffold::summary("my-counter", Path::new("."), &files, lang));
//! ```

use std::path::{Path, PathBuf};

/// The `weir-sdk` crate of the Weir checkout this binary was built from.
/// [`default_sdk_dir`] returns it as a path.
pub const DEFAULT_SDK_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");

/// The Rust target plugins are built for.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// Longest accepted plugin name (crates.io's limit).
pub const MAX_NAME_LEN: usize = 64;

/// One template: where it goes in the new crate, and its text.
struct Template {
    path: &'static str,
    text: &'static str,
}

/// The language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate on `weir-sdk`, built with cargo.
    Rust,
    /// A Python package on `weir_sdk`, built with componentize-py.
    Python,
}

impl Lang {
    /// Every file of a new plugin, in the order they are written and listed.
    fn templates(self) -> &'static [Template] {
        match self {
            Lang::Rust => TEMPLATES,
            Lang::Python => PYTHON_TEMPLATES,
        }
    }
}

/// Every file of a new Rust crate, in the order they are written and listed.
const TEMPLATES: &[Template] = &[
    Template {
        path: "Cargo.toml",
        text: include_str!("../templates/plugin/Cargo.toml.tmpl"),
    },
    Template {
        path: "src/lib.rs",
        text: include_str!("../templates/plugin/lib.rs.tmpl"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/plugin/README.md.tmpl"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/plugin/gitignore.tmpl"),
    },
    Template {
        path: "job.toml",
        text: include_str!("../templates/plugin/job.toml.tmpl"),
    },
    Template {
        path: "input.jsonl",
        text: include_str!("../templates/plugin/input.jsonl.tmpl"),
    },
];

/// Every file of a new Python package, in the order they are written and
/// listed.
const PYTHON_TEMPLATES: &[Template] = &[
    Template {
        path: "app.py",
        text: include_str!("../templates/python/app.py.tmpl"),
    },
    Template {
        path: "tests/test_app.py",
        text: include_str!("../templates/python/tests/test_app.py.tmpl"),
    },
    Template {
        path: "conftest.py",
        text: include_str!("../templates/python/conftest.py.tmpl"),
    },
    Template {
        path: "test.sh",
        text: include_str!("../templates/python/test.sh.tmpl"),
    },
    Template {
        path: "build.sh",
        text: include_str!("../templates/python/build.sh.tmpl"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/python/README.md.tmpl"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/python/gitignore.tmpl"),
    },
    Template {
        path: "job.toml",
        text: include_str!("../templates/python/job.toml.tmpl"),
    },
    Template {
        path: "input.jsonl",
        text: include_str!("../templates/plugin/input.jsonl.tmpl"),
    },
];

/// Rust keywords, strict and reserved: cargo refuses them as package names.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Other names the crate cannot take (compared with `-` read as `_`): crates
/// of the standard distribution, the template's own dependencies, and file
/// names Windows reserves.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    "std", "core", "alloc", "proc_macro", "test", "weir_sdk", "serde", "serde_json", "con",
    "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8", "com9",
    "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// Type names the generated `src/lib.rs` already uses; an operator struct
/// named like one of them gets an `Op` suffix.
const TAKEN_TYPE_NAMES: &[&str] = &[
    "Box",
    "Config",
    "Context",
    "Deserialize",
    "Err",
    "Error",
    "Harness",
    "InvalidConfig",
    "InvalidInput",
    "Map",
    "MapState",
    "None",
    "Ok",
    "OpenContext",
    "Operator",
    "OperatorInfo",
    "Option",
    "Record",
    "Result",
    "Some",
    "String",
    "Value",
    "Vec",
];

/// Why `weir new` refused or failed. Each message is one line that says what
/// is wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not a valid plugin crate name.
    #[error(
        "invalid plugin name `{name}`: {reason}; use lowercase letters, digits, `-` and `_`, starting with a letter (e.g. `my-operator`)"
    )]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The target directory exists and has files in it.
    #[error(
        "{}: the directory already exists and is not empty; choose another name or --dir, or remove it first",
        path.display()
    )]
    TargetNotEmpty {
        /// The crate directory that would have been created.
        path: PathBuf,
    },
    /// The target path exists and is not a directory.
    #[error(
        "{}: exists and is not a directory; choose another name or --dir",
        path.display()
    )]
    TargetNotDir {
        /// The crate directory that would have been created.
        path: PathBuf,
    },
    /// The SDK path does not hold the `weir-sdk` crate.
    #[error(
        "{}: {problem}; pass --sdk with the path of the `sdk` folder of a Weir checkout",
        path.display()
    )]
    SdkNotFound {
        /// The SDK path given (or the default).
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A path that must go into `Cargo.toml` is not UTF-8.
    #[error(
        "{}: the path is not valid UTF-8, so Cargo.toml cannot name it; move the SDK to a UTF-8 path",
        path.display()
    )]
    NonUtf8Path {
        /// The path.
        path: PathBuf,
    },
    /// Creating a directory or writing a file failed.
    #[error("{}: cannot {action}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`create the directory`, `write the file`, ...).
        action: &'static str,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// The default SDK path: [`DEFAULT_SDK_DIR`], the `sdk` folder of the Weir
/// checkout this binary was built from. [`scaffold`] canonicalizes it.
///
/// ```
/// assert!(weir_cli::scaffold::default_sdk_dir().ends_with("sdk"));
/// ```
pub fn default_sdk_dir() -> PathBuf {
    PathBuf::from(DEFAULT_SDK_DIR)
}

/// Checks that `name` is a valid plugin crate name: 1 to [`MAX_NAME_LEN`]
/// characters, lowercase ASCII letters, digits, `-` and `_`, starting with a
/// letter, and not a Rust keyword or a name the crate cannot take.
///
/// ```
/// use weir_cli::scaffold::validate_name;
/// assert!(validate_name("my-counter").is_ok());
/// assert!(validate_name("My-Counter").is_err());
/// assert!(validate_name("2fast").is_err());
/// assert!(validate_name("fn").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<(), ScaffoldError> {
    let invalid = |reason: String| ScaffoldError::InvalidName {
        name: name.to_string(),
        reason,
    };
    let Some(first) = name.chars().next() else {
        return Err(invalid("the name is empty".into()));
    };
    if !first.is_ascii_lowercase() {
        return Err(invalid(format!(
            "it starts with `{first}`, not a lowercase letter"
        )));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(invalid(format!("it contains `{}`", bad.escape_default())));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "it is {} characters long, more than {MAX_NAME_LEN}",
            name.len()
        )));
    }
    if KEYWORDS.contains(&name) {
        return Err(invalid("it is a Rust keyword".into()));
    }
    if RESERVED.contains(&crate_name(name).as_str()) {
        return Err(invalid(
            "it is the name of a standard crate, of a dependency of the plugin, or a reserved file name".into(),
        ));
    }
    Ok(())
}

/// The Rust crate name of the package `name`: `-` becomes `_`. It is also
/// the stem of the built component, `target/wasm32-wasip2/release/<crate_name>.wasm`.
///
/// ```
/// assert_eq!(weir_cli::scaffold::crate_name("my-counter"), "my_counter");
/// ```
pub fn crate_name(name: &str) -> String {
    name.replace('-', "_")
}

/// The operator's Rust type name for the plugin `name`: UpperCamelCase, with
/// an `Op` suffix when that would clash with a name the template uses.
///
/// ```
/// use weir_cli::scaffold::struct_name;
/// assert_eq!(struct_name("my-counter"), "MyCounter");
/// assert_eq!(struct_name("a1_b"), "A1B");
/// assert_eq!(struct_name("record"), "RecordOp");
/// ```
pub fn struct_name(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(['-', '_']).filter(|p| !p.is_empty()) {
        let mut chars = part.chars();
        if let Some(c) = chars.next() {
            out.push(c.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if TAKEN_TYPE_NAMES.contains(&out.as_str()) {
        out.push_str("Op");
    }
    out
}

/// The path of the built component relative to the crate directory.
///
/// ```
/// assert_eq!(
///     weir_cli::scaffold::component_path("my-counter"),
///     std::path::Path::new("target/wasm32-wasip2/release/my_counter.wasm")
/// );
/// ```
pub fn component_path(name: &str) -> PathBuf {
    Path::new("target")
        .join(WASM_TARGET)
        .join("release")
        .join(format!("{}.wasm", crate_name(name)))
}

/// `s` as a TOML basic string, quotes included.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` quoted for a POSIX shell.
fn sh_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Fills the placeholders of `template`; `sdk` is the `sdk` folder of a
/// Weir checkout (the Rust crate; the Python package is `sdk/python`, the
/// build script `scripts/python-sdk.sh` beside it).
fn render(template: &str, name: &str, sdk: &str) -> String {
    let python = format!("{sdk}/python");
    let script = format!("{sdk}/../scripts/python-sdk.sh");
    template
        .replace("{{name}}", name)
        .replace("{{crate_name}}", &crate_name(name))
        .replace("{{struct_name}}", &struct_name(name))
        .replace("{{class_name}}", &struct_name(name))
        .replace("{{sdk_path_toml}}", &toml_string(sdk))
        .replace("{{sdk_path}}", sdk)
        // A JSON string is a Python string literal.
        .replace(
            "{{sdk_python_py}}",
            &serde_json::to_string(&python).expect("a string serializes"),
        )
        .replace("{{sdk_python}}", &python)
        .replace("{{python_sdk_sh}}", &sh_string(&script))
}

/// Canonicalizes `sdk` and checks that it holds the `weir-sdk` crate and,
/// for Python, `python/weir_sdk` and `../scripts/python-sdk.sh`.
fn resolve_sdk(sdk: &Path, lang: Lang) -> Result<PathBuf, ScaffoldError> {
    let not_found = |problem: String| ScaffoldError::SdkNotFound {
        path: sdk.to_path_buf(),
        problem,
    };
    let dir = sdk
        .canonicalize()
        .map_err(|e| not_found(format!("cannot find the weir-sdk crate ({e})")))?;
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| not_found(format!("cannot read Cargo.toml ({e})")))?;
    let table: toml::Table = text
        .parse()
        .map_err(|_| not_found("its Cargo.toml is not valid TOML".into()))?;
    let package = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    if package != Some("weir-sdk") {
        return Err(not_found(format!(
            "its Cargo.toml is not the weir-sdk crate's (package {})",
            package.map_or("missing".to_string(), |p| format!("`{p}`"))
        )));
    }
    if lang == Lang::Python {
        for needed in ["python/weir_sdk/__init__.py", "../scripts/python-sdk.sh"] {
            if !dir.join(needed).is_file() {
                return Err(not_found(format!(
                    "it has no {needed}, which a Python plugin needs"
                )));
            }
        }
    }
    Ok(dir)
}

/// Creates the plugin crate `name` in `dir/name`, depending on the `weir-sdk`
/// crate at `sdk` (canonicalized, so the crate builds from anywhere), and
/// returns the paths of the files it wrote, `dir/name/...`, in a stable order.
///
/// Refuses an invalid `name` (see [`validate_name`]), a `dir/name` that exists
/// and is not an empty directory, and an `sdk` that is not the `weir-sdk`
/// crate, before writing anything. If writing fails half-way, removes what it
/// wrote.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// use weir_cli::scaffold::{default_sdk_dir, scaffold, Lang};
/// let files = scaffold("my-counter", dir.path(), &default_sdk_dir(), Lang::Rust).unwrap();
/// assert!(files.contains(&dir.path().join("my-counter/src/lib.rs")));
/// assert!(scaffold("my-counter", dir.path(), &default_sdk_dir(), Lang::Rust).is_err());
/// let files = scaffold("py-counter", dir.path(), &default_sdk_dir(), Lang::Python).unwrap();
/// assert!(files.contains(&dir.path().join("py-counter/app.py")));
/// ```
pub fn scaffold(
    name: &str,
    dir: &Path,
    sdk: &Path,
    lang: Lang,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    validate_name(name)?;
    let root = dir.join(name);
    let existed = match std::fs::metadata(&root) {
        Ok(meta) if !meta.is_dir() => return Err(ScaffoldError::TargetNotDir { path: root }),
        Ok(_) => {
            let mut entries = std::fs::read_dir(&root).map_err(|error| ScaffoldError::Io {
                path: root.clone(),
                action: "read the directory",
                error,
            })?;
            if entries.next().is_some() {
                return Err(ScaffoldError::TargetNotEmpty { path: root });
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => {
            return Err(ScaffoldError::Io {
                path: root,
                action: "read the directory",
                error,
            });
        }
    };
    let sdk = resolve_sdk(sdk, lang)?;
    let sdk = sdk
        .to_str()
        .ok_or_else(|| ScaffoldError::NonUtf8Path { path: sdk.clone() })?;

    let written = write_all(&root, name, sdk, lang);
    if written.is_err() {
        // Best effort: leave things as they were.
        if existed {
            for t in lang.templates() {
                let _ = std::fs::remove_file(root.join(t.path));
            }
            let _ = std::fs::remove_dir(root.join("src"));
            let _ = std::fs::remove_dir(root.join("tests"));
        } else {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    written
}

/// Writes every template into `root`.
fn write_all(
    root: &Path,
    name: &str,
    sdk: &str,
    lang: Lang,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    let templates = lang.templates();
    let mut files = Vec::with_capacity(templates.len());
    for t in templates {
        let path = root.join(t.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| ScaffoldError::Io {
                path: parent.to_path_buf(),
                action: "create the directory",
                error,
            })?;
        }
        std::fs::write(&path, render(t.text, name, sdk)).map_err(|error| ScaffoldError::Io {
            path: path.clone(),
            action: "write the file",
            error,
        })?;
        if t.path.ends_with(".sh") {
            make_executable(&path)?;
        }
        files.push(path);
    }
    Ok(files)
}

/// Sets the executable bits of a script written by [`write_all`].
fn make_executable(path: &Path) -> Result<(), ScaffoldError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|error| {
        ScaffoldError::Io {
            path: path.to_path_buf(),
            action: "make the script executable",
            error,
        }
    })
}

/// What `weir new` prints after [`scaffold`]: the files it created (`files`,
/// under `dir/name`) and the next steps.
///
/// ```
/// use std::path::Path;
/// use weir_cli::scaffold::{summary, Lang};
/// let s = summary("demo", Path::new("."), &[Path::new("./demo/Cargo.toml").into()], Lang::Rust);
/// assert!(s.contains("cargo build --release --target wasm32-wasip2"));
/// assert!(s.contains("weir inspect target/wasm32-wasip2/release/demo.wasm"));
/// let s = summary("demo", Path::new("."), &[Path::new("./demo/app.py").into()], Lang::Python);
/// assert!(s.contains("./build.sh") && s.contains("weir inspect target/demo.wasm"));
/// ```
pub fn summary(name: &str, dir: &Path, files: &[PathBuf], lang: Lang) -> String {
    let root = dir.join(name);
    let mut s = format!("Created plugin `{name}` in {}:\n", root.display());
    for f in files {
        let shown = f.strip_prefix(&root).unwrap_or(f);
        s.push_str(&format!("  {}\n", shown.display()));
    }
    let cd = format!("cd {}", root.display());
    let run = ("weir run job.toml", "input.jsonl -> out/counts.jsonl");
    let (inspect, build, target);
    let steps: Vec<(&str, &str)> = match lang {
        Lang::Rust => {
            inspect = format!("weir inspect {}", component_path(name).display());
            build = format!("cargo build --release --target {WASM_TARGET}");
            target = format!("rustup target add {WASM_TARGET}");
            vec![
                (&cd, ""),
                ("cargo test", "unit tests, run natively"),
                (&target, "once, if the target is missing"),
                (&build, "builds the component"),
                (&inspect, ""),
                run,
            ]
        }
        Lang::Python => {
            inspect = format!("weir inspect target/{name}.wasm");
            vec![
                (&cd, ""),
                ("./test.sh", "pytest on weir_sdk.testing, natively"),
                ("./build.sh", "builds the component (componentize-py)"),
                (&inspect, ""),
                run,
            ]
        }
    };
    s.push_str("\nNext steps:\n");
    for (cmd, comment) in steps {
        if comment.is_empty() {
            s.push_str(&format!("  {cmd}\n"));
        } else {
            s.push_str(&format!("  {cmd:<46} # {comment}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "my-counter", "my_counter", "op2", "a-1_b"] {
            validate_name(ok).unwrap();
        }
        for (bad, why) in [
            ("", "empty"),
            ("My", "starts with `M`"),
            ("1op", "starts with `1`"),
            ("-op", "starts with `-`"),
            ("my op", "contains ` `"),
            ("my.op", "contains `.`"),
            ("opé", "contains `\\u{e9}`"),
            ("fn", "keyword"),
            ("weir-sdk", "dependency"),
            ("serde-json", "dependency"),
            ("std", "standard crate"),
        ] {
            let e = validate_name(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("starting with a letter"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }

    #[test]
    fn struct_names() {
        assert_eq!(struct_name("word-count"), "WordCount");
        assert_eq!(struct_name("a__b"), "AB");
        assert_eq!(struct_name("config"), "ConfigOp");
        assert_eq!(struct_name("map_state"), "MapStateOp");
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
        let v: toml::Table = format!("p = {}", toml_string("x\ty\\\"")).parse().unwrap();
        assert_eq!(v["p"].as_str(), Some("x\ty\\\""));
    }

    #[test]
    fn every_placeholder_is_filled() {
        for t in TEMPLATES.iter().chain(PYTHON_TEMPLATES) {
            let out = render(t.text, "my-counter", "/opt/weir/sdk");
            assert!(!out.contains("{{"), "{}: {out}", t.path);
            assert!(!out.contains("}}"), "{}: {out}", t.path);
        }
        let cargo: toml::Table = render(TEMPLATES[0].text, "x", "/a \"b\"/sdk")
            .parse()
            .unwrap();
        assert_eq!(
            cargo["dependencies"]["weir-sdk"]["path"].as_str(),
            Some("/a \"b\"/sdk")
        );
        assert!(cargo.contains_key("workspace"));
        let job: toml::Table = render(TEMPLATES[4].text, "x-y", "/s").parse().unwrap();
        assert_eq!(
            job["operator"][0]["plugin"].as_str(),
            Some("target/wasm32-wasip2/release/x_y.wasm")
        );
    }

    #[test]
    fn the_default_sdk_is_found() {
        let dir = resolve_sdk(&default_sdk_dir(), Lang::Rust).unwrap();
        assert!(dir.is_absolute());
        assert_eq!(resolve_sdk(&default_sdk_dir(), Lang::Python).unwrap(), dir);
        let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
        let refused = [
            (Path::new("/nonexistent/sdk").to_path_buf(), "--sdk"),
            (cli.join("src"), "cannot read Cargo.toml"),
            // The runtime crate, beside the CLI: a crate, but not the SDK.
            (cli.join("../host"), "package `weir`"),
        ];
        for (dir, says) in refused {
            let e = resolve_sdk(&dir, Lang::Rust).unwrap_err().to_string();
            assert!(e.contains(says), "{}: {e}", dir.display());
        }
    }

    #[test]
    fn python_placeholders_quote_paths_for_their_language() {
        let sdk = "/it's \"here\"/sdk";
        let build = render(PYTHON_TEMPLATES[4].text, "x", sdk);
        assert!(
            build.contains(
                r#"exec '/it'\''s "here"/sdk/../scripts/python-sdk.sh' build . target/x.wasm"#
            ),
            "{build}"
        );
        let conftest = render(PYTHON_TEMPLATES[2].text, "x", sdk);
        assert!(
            conftest.contains(r#"sys.path.insert(0, "/it's \"here\"/sdk/python")"#),
            "{conftest}"
        );
        let app = render(PYTHON_TEMPLATES[0].text, "my-op", sdk);
        assert!(app.contains("class MyOp(Operator):") && app.contains("name = \"my-op\""));
        let job: toml::Table = render(PYTHON_TEMPLATES[7].text, "x-y", sdk)
            .parse()
            .unwrap();
        assert_eq!(
            job["operator"][0]["plugin"].as_str(),
            Some("target/x-y.wasm")
        );
    }

    #[test]
    fn python_scripts_are_executable() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        scaffold("op", tmp.path(), &default_sdk_dir(), Lang::Python).unwrap();
        for script in ["build.sh", "test.sh"] {
            let mode = std::fs::metadata(tmp.path().join("op").join(script))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111, "{script}");
        }
    }

    #[test]
    fn scaffold_refuses_a_non_empty_directory_and_fills_an_empty_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("op");
        std::fs::create_dir(&root).unwrap();
        let files = scaffold("op", tmp.path(), &default_sdk_dir(), Lang::Rust).unwrap();
        assert_eq!(files.len(), TEMPLATES.len());
        assert!(root.join(".gitignore").is_file());
        let e = scaffold("op", tmp.path(), &default_sdk_dir(), Lang::Python).unwrap_err();
        assert!(matches!(e, ScaffoldError::TargetNotEmpty { .. }), "{e}");
        std::fs::write(tmp.path().join("file"), "").unwrap();
        let e = scaffold("file", tmp.path(), &default_sdk_dir(), Lang::Rust).unwrap_err();
        assert!(matches!(e, ScaffoldError::TargetNotDir { .. }), "{e}");
        let e = scaffold("other", tmp.path(), Path::new("/nonexistent"), Lang::Python).unwrap_err();
        assert!(matches!(e, ScaffoldError::SdkNotFound { .. }), "{e}");
        assert!(!tmp.path().join("other").exists());
    }
}
