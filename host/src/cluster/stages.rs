//! The stages of a job in worker mode ([`WorkerStage`]): the job file cut
//! at its repartition edges (`exchange = "repartition"` on an operator),
//! and the Kafka topic each such edge crosses through ([`Crossing`]).
//!
//! Invariants:
//! - The cut is [`stage_members`], the plan's own, over the job file's
//!   sources, operators and sinks in plan order; so stage *s* here is
//!   stage *s* of [`crate::plan::Plan::stages`], and stage 0 holds the
//!   job's first source.
//! - Every repartition edge joins two different stages; a job where one
//!   would stay inside a stage is refused.
//! - Each stage's workers join a group of their own (`[cluster] group`
//!   for stage 0, `<group>-s<s>` after), on the stage's anchor topic: its
//!   first Kafka source's first topic, else its first crossing's topic.

use std::collections::BTreeSet;

use crate::config::{Exchange, Job, Upstream};
use crate::plan::stage_members;

/// A repartition edge: the records `upstream` emits reach `operator`
/// through `topic`, partitioned by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    /// The operator downstream.
    pub operator: String,
    /// What feeds it upstream.
    pub upstream: Upstream,
    /// The stage upstream.
    pub from: u32,
    /// The stage downstream.
    pub to: u32,
    /// The topic: `<group>-<operator>-<upstream>-repartition`.
    pub topic: String,
    /// The id of the sink that writes it upstream and of the source that
    /// reads it downstream: `<operator>-from-<upstream>`.
    pub id: String,
}

/// One stage of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStage {
    /// Its number.
    pub id: u32,
    /// The ids of its sources, operators and sinks.
    pub nodes: BTreeSet<String>,
    /// The consumer group its workers join.
    pub group: String,
    /// The crossings that feed it.
    pub inputs: Vec<Crossing>,
    /// The crossings it feeds.
    pub outputs: Vec<Crossing>,
}

/// Cuts `job` into its stages; an error says which repartition edge
/// stays inside a stage.
pub fn cut(job: &Job) -> Result<Vec<WorkerStage>, String> {
    let ids: Vec<&str> = (job.sources.iter().map(|s| s.id.as_str()))
        .chain(job.operators.iter().map(|o| o.id.as_str()))
        .chain(job.sinks.iter().map(|s| s.id.as_str()))
        .collect();
    let index = |id: &str| {
        ids.iter()
            .position(|i| *i == id)
            .expect("a node of the job")
    };
    let mut joined = Vec::new();
    let mut crossing: Vec<(&str, Upstream)> = Vec::new();
    for op in &job.operators {
        for up in op.inputs.upstreams() {
            match op.exchange {
                Exchange::Local => joined.push((index(&up.node), index(&op.id))),
                Exchange::Repartition if !crossing.contains(&(&op.id, up.clone())) => {
                    crossing.push((&op.id, up.clone()));
                }
                Exchange::Repartition => {}
            }
        }
    }
    for sink in &job.sinks {
        joined.extend(
            sink.input
                .iter()
                .map(|up| (index(&up.node), index(&sink.id))),
        );
    }
    let groups = stage_members(ids.len(), joined);
    let stage_of = |id: &str| {
        let i = index(id);
        groups
            .iter()
            .position(|g| g.contains(&i))
            .expect("every node in a stage") as u32
    };
    let group = &job.cluster.group;
    let mut stages: Vec<WorkerStage> = (0u32..)
        .zip(&groups)
        .map(|(s, members)| WorkerStage {
            id: s,
            nodes: members.iter().map(|&i| ids[i].to_owned()).collect(),
            group: match s {
                0 => group.clone(),
                s => format!("{group}-s{s}"),
            },
            inputs: Vec::new(),
            outputs: Vec::new(),
        })
        .collect();
    for (operator, upstream) in crossing {
        let (from, to) = (stage_of(&upstream.node), stage_of(operator));
        if from == to {
            return Err(format!(
                "operator `{operator}` takes `{upstream}` through a repartition, but local edges join the two into one stage; set exchange = \"repartition\" on the operators between them too, or remove it"
            ));
        }
        let c = Crossing {
            operator: operator.to_owned(),
            topic: topic_name(&format!("{group}-{operator}-{upstream}-repartition")),
            id: id_of(&format!("{operator}-from-{upstream}")),
            upstream,
            from,
            to,
        };
        stages[from as usize].outputs.push(c.clone());
        stages[to as usize].inputs.push(c);
    }
    Ok(stages)
}

/// `name` with every character a Kafka topic name cannot hold made `_`.
pub fn topic_name(name: &str) -> String {
    sanitized(name, ".-_")
}

/// `name` with every character an id cannot hold made `_`.
fn id_of(name: &str) -> String {
    sanitized(name, "-_")
}

/// `name` with every character but ASCII letters, digits and `also` made `_`.
fn sanitized(name: &str, also: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || also.contains(c);
    name.chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::Registry;

    /// The job `text` (operators run `p.wasm`, which exists) named `j`.
    fn job(text: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), "x").unwrap();
        let text = format!("name = \"j\"\n{text}");
        Job::parse(&dir.path().join("job.toml"), &text, &Registry::builtin()).unwrap()
    }

    const SOURCE: &str = "[[source]]\nid = \"in\"\ntype = \"generator\"\ncount = 1\n";

    fn operator(id: &str, inputs: &str, exchange: &str) -> String {
        format!(
            "[[operator]]\nid = \"{id}\"\nplugin = \"p.wasm\"\ninputs = {inputs}\nexchange = \"{exchange}\"\n"
        )
    }

    fn sink(id: &str, input: &str) -> String {
        format!("[[sink]]\nid = \"{id}\"\ntype = \"stdout\"\ninput = {input}\n")
    }

    #[test]
    fn repartition_edges_cut_stages_with_a_topic_and_a_group_each() {
        let job = job(&[
            SOURCE,
            &operator("split", "[\"in\"]", "local"),
            &operator("count", "{ words = \"split\" }", "repartition"),
            &operator("top", "[\"count\"]", "repartition"),
            &sink("raw", "\"split\""),
            &sink("out", "\"top\""),
        ]
        .concat());
        let stages = cut(&job).unwrap();
        let nodes: Vec<Vec<&str>> = (stages.iter())
            .map(|s| s.nodes.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            nodes,
            [
                vec!["in", "raw", "split"],
                vec!["count"],
                vec!["out", "top"]
            ]
        );
        let groups: Vec<&str> = stages.iter().map(|s| s.group.as_str()).collect();
        assert_eq!(groups, ["weir-j", "weir-j-s1", "weir-j-s2"]);
        let c = &stages[1].inputs[0];
        assert_eq!((c.from, c.to, c.id.as_str()), (0, 1, "count-from-split"));
        assert_eq!(c.topic, "weir-j-count-split-repartition");
        assert_eq!(stages[0].outputs, std::slice::from_ref(c));
        assert_eq!(stages[2].inputs[0].upstream, Upstream::parse("count"));
        assert!(stages[2].outputs.is_empty());
    }

    #[test]
    fn a_repartition_inside_one_stage_is_refused() {
        let job = job(&[
            SOURCE,
            &operator("count", "[\"in\"]", "repartition"),
            &sink("both", "[\"count\", \"in\"]"),
        ]
        .concat());
        let err = cut(&job).unwrap_err();
        assert!(
            err.contains("operator `count` takes `in` through a repartition"),
            "{err}"
        );
    }

    #[test]
    fn exchange_is_local_or_repartition() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.wasm"), "x").unwrap();
        let text = format!(
            "name = \"j\"\n{SOURCE}{}",
            operator("o", "[\"in\"]", "shuffle")
        );
        let err =
            Job::parse(&dir.path().join("job.toml"), &text, &Registry::builtin()).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("`exchange` = \"shuffle\" is not an exchange"),
            "{err}"
        );
    }
}
