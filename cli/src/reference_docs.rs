//! Every key the job-file parser accepts is documented in `docs/reference/`.
//!
//! The keys come from the parser itself, never from a list kept here: each
//! table of a probe job gets an unknown key (`zz_probe`), and the parser's
//! message names the keys it accepts instead (serde's `unknown field ...,
//! expected one of ...`, the `(allowed: ...)` of a source or sink type, the
//! limits and grants it knows). The source and sink types come from the
//! message for an unknown `type`, so a new connector is checked as soon as it
//! is registered.
//!
//! A key counts as documented when it appears in backticks in the first cell
//! of a table row (`` | `key` | ... ``) in its section: the lines under the
//! section's heading up to the next heading. Sections are named by their
//! heading text (see [`Section`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The unknown key (and unknown type) each probe adds.
const PROBE: &str = "zz_probe";

/// The one call into the parser: the probe job `text`'s error message.
fn parse_error(text: &str) -> String {
    let registry = weir_connectors::registry();
    match weir::config::Job::parse(Path::new("probe/job.toml"), text, &registry) {
        Ok(_) => panic!("the probe job parsed, so it names no keys:\n{text}"),
        Err(error) => error.to_string(),
    }
}

/// A minimal valid job with `extra` (TOML) where the probe goes.
fn job(top: &str, sources: &str, operators: &str, sinks: &str) -> String {
    let sources = if sources.is_empty() {
        "[[source]]\nid = \"s\"\ntype = \"generator\"\ncount = 1\n"
    } else {
        sources
    };
    let sinks = if sinks.is_empty() {
        "[[sink]]\nid = \"o\"\ntype = \"stdout\"\ninput = \"s\"\n"
    } else {
        sinks
    };
    format!("name = \"probe\"\n{top}\n{sources}\n{operators}\n{sinks}")
}

/// The words of `text` between pairs of `mark` (`` ` `` or `"`): `` `a`, `b` ``
/// gives `a`, `b`.
fn marked(text: &str, mark: char) -> Vec<String> {
    text.split(mark)
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The keys (or values) the parser's message `error` says it accepts.
fn accepted(error: &str) -> Vec<String> {
    let after = |marker: &str| error.split_once(marker).map(|(_, rest)| rest);
    let keys = if let Some(rest) = after("(allowed: ") {
        let list = rest.split_once(')').map_or(rest, |(list, _)| list);
        list.split(", ").map(str::to_owned).collect()
    } else if let Some(rest) = after("the limits are: ") {
        rest.split(", ").map(|k| k.trim().to_owned()).collect()
    } else if let Some(rest) = after("the grants are ") {
        marked(rest.split_once(" (").map_or(rest, |(list, _)| list), '"')
    } else if let Some(rest) = after(", expected ") {
        // A nested table's message ends with `in `table``.
        marked(rest.split(" in `").next().unwrap_or(rest), '`')
    } else {
        Vec::new()
    };
    assert!(
        !keys.is_empty() && error.contains(PROBE),
        "the parser's message names no accepted keys; update `accepted` to read it: {error}"
    );
    keys
}

/// The `type`s of `[[source]]` (`kind` = "source") or `[[sink]]` entries,
/// from the parser's message for an unknown type.
fn types(kind: &str) -> Vec<String> {
    let probe = format!("[[{kind}]]\nid = \"x\"\ntype = \"{PROBE}\"\n");
    let error = match kind {
        "source" => parse_error(&job("", &probe, "", "")),
        _ => parse_error(&job("", "", "", &probe)),
    };
    let list = error.split_once("use type = ").map(|(_, rest)| rest);
    let names = list.map(|l| marked(l, '"')).unwrap_or_default();
    assert!(
        !names.is_empty(),
        "the parser's message for an unknown {kind} type lists no types: {error}"
    );
    names
}

/// A section of a reference file: the file (under `docs/reference/`) and a
/// test on its heading's text (without the `#`s).
struct Section {
    file: &'static str,
    heading: String,
    /// How the heading must read, for the failure message.
    matches: fn(&str, &str) -> bool,
}

impl Section {
    /// The section whose heading is exactly `heading`.
    fn exact(file: &'static str, heading: &str) -> Section {
        Section {
            file,
            heading: heading.to_owned(),
            matches: |line, heading| line == heading,
        }
    }

    /// The section of a source or sink type: a heading ending in
    /// `` source (`type = "NAME"`) `` (or `sink`), in `connectors.md`.
    fn connector(kind: &str, name: &str) -> Section {
        Section {
            file: "connectors.md",
            heading: format!("{kind} (`type = \"{name}\"`)"),
            matches: |line, heading| line.ends_with(heading),
        }
    }

    fn path(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/reference")
            .join(self.file)
    }

    /// The keys documented in the section, or `None` when the file has no
    /// such heading.
    fn documented(&self) -> Option<BTreeSet<String>> {
        let path = self.path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut keys = BTreeSet::new();
        let (mut found, mut inside, mut fenced) = (false, false, false);
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            if line.starts_with('#') {
                inside = (self.matches)(line.trim_start_matches('#').trim(), &self.heading);
                found |= inside;
            } else if inside && line.starts_with('|') {
                let first = line.trim_start_matches('|').split('|').next();
                let words = marked(first.unwrap_or_default(), '`');
                keys.extend(
                    words
                        .into_iter()
                        .map(|w| w.trim_matches(['[', ']', '"']).to_owned()),
                );
            }
        }
        found.then_some(keys)
    }
}

/// Every key in `keys` is documented in one of `sections` (the first is the
/// one to add it to); returns what is missing as messages.
fn check(table: &str, keys: &[String], sections: &[Section]) -> Vec<String> {
    let documented: Vec<Option<BTreeSet<String>>> =
        sections.iter().map(Section::documented).collect();
    let target = &sections[0];
    let file = format!("docs/reference/{}", target.file);
    if documented[0].is_none() {
        return vec![format!(
            "{table}: {file} has no heading matching '{}'; add that section with a table row \
             | `key` | ... | for each of its keys: {}",
            target.heading,
            keys.join(", ")
        )];
    }
    keys.iter()
        .filter(|key| !documented.iter().flatten().any(|set| set.contains(*key)))
        .map(|key| {
            format!(
                "{table}: key `{key}` is accepted by the parser but not documented; \
                 add a row | `{key}` | ... | under the heading '{}' in {file}",
                target.heading
            )
        })
        .collect()
}

#[test]
fn every_job_file_key_is_documented_in_docs_reference() {
    let job_file = |heading: &str| Section::exact("job-file.md", heading);
    let mut missing = Vec::new();
    let mut probe = |table: &str, text: String, sections: &[Section]| {
        missing.extend(check(table, &accepted(&parse_error(&text)), sections));
    };

    let top = format!("{PROBE} = 1");
    probe(
        "the top level",
        job(&top, "", "", ""),
        &[job_file("Top level")],
    );
    let checkpoint = format!("[checkpoint]\n{PROBE} = 1");
    probe(
        "[checkpoint]",
        job(&checkpoint, "", "", ""),
        &[job_file("`[checkpoint]`")],
    );
    let restart = format!("[restart]\n{PROBE} = 1");
    probe(
        "[restart]",
        job(&restart, "", "", ""),
        &[job_file("`[restart]`")],
    );

    for name in types("source") {
        let source = format!("[[source]]\ntype = \"{name}\"\n{PROBE} = 1\n");
        let sections = [
            Section::connector("source", &name),
            job_file("`[[source]]`"),
        ];
        probe(
            &format!("source type {name:?}"),
            job("", &source, "", ""),
            &sections,
        );
    }
    let watermark = format!(
        "[[source]]\nid = \"s\"\ntype = \"generator\"\ncount = 1\nwatermark = {{ {PROBE} = 1 }}\n"
    );
    probe(
        "a source's watermark",
        job("", &watermark, "", ""),
        &[job_file("`watermark`")],
    );

    let operator = format!("[[operator]]\n{PROBE} = 1\n");
    probe(
        "[[operator]]",
        job("", "", &operator, ""),
        &[job_file("`[[operator]]`")],
    );
    let op = "[[operator]]\nid = \"op\"\nplugin = \"op.wasm\"\ninputs = [\"s\"]\n";
    let limits = format!("{op}limits = {{ {PROBE} = 1 }}\n");
    probe(
        "an operator's limits",
        job("", "", &limits, ""),
        &[job_file("`limits`")],
    );
    let grants = format!("{op}grants = [\"{PROBE}\"]\n");
    probe(
        "an operator's grants",
        job("", "", &grants, ""),
        &[job_file("`grants`")],
    );

    for name in types("sink") {
        let sink = format!("[[sink]]\ntype = \"{name}\"\n{PROBE} = 1\n");
        let sections = [Section::connector("sink", &name), job_file("`[[sink]]`")];
        probe(
            &format!("sink type {name:?}"),
            job("", "", "", &sink),
            &sections,
        );
    }

    assert!(
        missing.is_empty(),
        "undocumented job-file keys:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_probes_read_the_parsers_messages() {
    // The readers of the messages, on the messages' shapes.
    let serde = "job: unknown field `zz_probe`, expected one of `a`, `b`";
    assert_eq!(accepted(serde), ["a", "b"]);
    let nested = "unknown field `zz_probe`, expected `a` or `b` in `t`";
    assert_eq!(accepted(nested), ["a", "b"]);
    let typed = "unknown key `zz_probe` for type = \"x\" (allowed: id, type, p); remove it";
    assert_eq!(accepted(typed), ["id", "type", "p"]);
    // The types include the built-in ones.
    assert!(types("source").contains(&"file".to_owned()));
    assert!(types("sink").contains(&"stdout".to_owned()));
}
