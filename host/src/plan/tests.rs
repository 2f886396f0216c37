//! Tests of compiling a job into a plan: ids, the edges of a diamond, a
//! union and a side output, relinking after a swap, and the cut into
//! stages and tasks.

use super::*;
use crate::config::{Job, JobError};
use crate::connectors::Registry;

/// What a test plugin declares.
#[derive(Debug, Clone)]
struct Declared {
    inputs: Vec<String>,
    outputs: Vec<String>,
}

impl Ports for Declared {
    fn input_ports(&self) -> &[String] {
        &self.inputs
    }
    fn output_ports(&self) -> &[String] {
        &self.outputs
    }
}

fn declared(inputs: &[&str], outputs: &[&str]) -> Declared {
    let names = |ports: &[&str]| ports.iter().map(|p| p.to_string()).collect();
    Declared {
        inputs: names(inputs),
        outputs: names(outputs),
    }
}

/// The job `text` (operators run `p.wasm`, which exists) in a temporary folder.
fn job(text: &str) -> Job {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.wasm"), "x").unwrap();
    let text = format!("name = \"t\"\n{text}");
    Job::parse(&dir.path().join("job.toml"), &text, &Registry::builtin()).unwrap()
}

/// `job` compiled with `plugin` giving each operator's declared ports.
fn compile<'j>(job: &'j Job, plugin: impl Fn(&str) -> Declared) -> Plan<'j, Declared> {
    Plan::compile(job, |op| {
        let d = plugin(&op.id);
        let wired = job.resolve_ports(op, &op.plugin, &d.inputs, &d.outputs)?;
        Ok::<_, JobError>((d, wired))
    })
    .unwrap()
}

fn source(id: &str) -> String {
    format!("[[source]]\nid = \"{id}\"\ntype = \"generator\"\ncount = 1\n")
}

fn operator(id: &str, inputs: &str, parallelism: u32) -> String {
    format!(
        "[[operator]]\nid = \"{id}\"\nplugin = \"p.wasm\"\ninputs = {inputs}\nparallelism = {parallelism}\n"
    )
}

fn sink(id: &str, input: &str) -> String {
    format!("[[sink]]\nid = \"{id}\"\ntype = \"stdout\"\ninput = {input}\n")
}

/// `src` feeds `a` (2 instances) and `b`, which feed ports `l` and `r` of
/// `c`, which feeds `out`.
fn diamond() -> Job {
    job(&[
        source("src"),
        operator("c", "{ l = \"a\", r = \"b\" }", 3),
        operator("a", "[\"src\"]", 2),
        operator("b", "[\"src\"]", 1),
        sink("out", "\"c\""),
    ]
    .concat())
}

fn diamond_ports(id: &str) -> Declared {
    match id {
        "c" => declared(&["l", "r"], &["out"]),
        _ => declared(&["in"], &["out"]),
    }
}

/// The edges of `plan` as `(from node, from port, to node, to port)`.
fn edges<P>(plan: &Plan<'_, P>) -> Vec<(String, u32, String, u32)> {
    let name = |id: NodeId| plan.node(id).name().to_string();
    (plan.edges().iter())
        .map(|e| {
            (
                name(e.from().node),
                e.from().port,
                name(e.to().node),
                e.to().port,
            )
        })
        .collect()
}

fn edge(from: &str, out: u32, to: &str, port: u32) -> (String, u32, String, u32) {
    (from.into(), out, to.into(), port)
}

#[test]
fn node_ids_follow_the_job_file_sources_operators_sinks() {
    let job = diamond();
    let plan = compile(&job, diamond_ports);
    let names: Vec<(&str, NodeKind, u32)> = (plan.nodes().iter())
        .map(|n| (n.name(), n.kind(), n.parallelism()))
        .collect();
    use NodeKind::*;
    assert_eq!(
        names,
        [
            ("src", Source, 1),
            ("c", Operator, 3),
            ("a", Operator, 2),
            ("b", Operator, 1),
            ("out", Sink, 1)
        ]
    );
    for (i, node) in plan.nodes().iter().enumerate() {
        assert_eq!(node.id().index(), i);
        assert_eq!(plan.find(node.name()), Some(node.id()));
    }
    assert_eq!(plan.find("nope"), None);
    let c = plan.find("c").unwrap();
    let instances: Vec<String> = plan.node(c).instances().map(|i| i.to_string()).collect();
    assert_eq!(instances, ["n1[0]", "n1[1]", "n1[2]"]);
    assert_eq!(plan.instances().count(), 1 + 3 + 2 + 1 + 1);
    assert_eq!(plan.node(c).input_ports(), ["l", "r"]);
    let src = plan.node(plan.find("src").unwrap());
    assert_eq!(
        (src.input_ports().len(), src.output_ports()),
        (0, &[String::new()][..])
    );
    assert!(src.plugin().is_none() && plan.plugin(c).is_some());
}

#[test]
fn a_diamond_has_an_edge_per_upstream_numbered_by_consumer_then_port() {
    let job = diamond();
    let plan = compile(&job, diamond_ports);
    assert_eq!(
        edges(&plan),
        [
            edge("a", 0, "c", 0),
            edge("b", 0, "c", 1),
            edge("src", 0, "a", 0),
            edge("src", 0, "b", 0),
            edge("c", 0, "out", 0),
        ]
    );
    let src = plan.find("src").unwrap();
    assert_eq!(plan.node(src).outputs(0), [EdgeId(2), EdgeId(3)]);
    assert_eq!(
        plan.node(plan.find("c").unwrap()).inputs(),
        [EdgeId(0), EdgeId(1)]
    );
    for e in plan.edges() {
        assert_eq!(plan.edge(e.id()), e);
        assert_eq!(
            (e.partitioning(), e.exchange()),
            (Partitioning::Hash, Exchange::Local)
        );
    }
}

#[test]
fn a_union_and_a_side_output_are_edges_of_their_ports() {
    let job = job(&[
        source("s1"),
        source("s2"),
        operator("u", "{ in = [\"s2\", \"s1\"] }", 1),
        operator("split", "[\"u\"]", 2),
        sink("main", "\"split\""),
        sink("late", "\"split.late\""),
        sink("both", "[\"split.late\", \"u\"]"),
    ]
    .concat());
    let plan = compile(&job, |id| match id {
        "split" => declared(&["in"], &["main", "late", "unread"]),
        _ => declared(&["in"], &["out"]),
    });
    assert_eq!(
        edges(&plan),
        [
            edge("s2", 0, "u", 0),
            edge("s1", 0, "u", 0),
            edge("u", 0, "split", 0),
            edge("split", 0, "main", 0),
            edge("split", 1, "late", 0),
            edge("split", 1, "both", 0),
            edge("u", 0, "both", 0),
        ]
    );
    let split = plan.node(plan.find("split").unwrap());
    assert_eq!(split.outputs(1), [EdgeId(4), EdgeId(5)]);
    assert!(split.outputs(2).is_empty(), "nothing reads port `unread`");
    assert!(split.outputs(9).is_empty());
    let both = plan.node(plan.find("both").unwrap());
    assert_eq!(both.wired().len(), 2);
    assert_eq!(both.inputs(), [EdgeId(5), EdgeId(6)]);
}

#[test]
fn replacing_a_plugin_relinks_its_ports_and_keeps_the_ids() {
    let job = job(&[
        source("s"),
        operator("split", "[\"s\"]", 1),
        sink("late", "\"split.late\""),
    ]
    .concat());
    let mut plan = compile(&job, |_| declared(&["in"], &["main", "late"]));
    let split = plan.find("split").unwrap();
    assert_eq!(edges(&plan)[1], edge("split", 1, "late", 0));
    let d = declared(&["in"], &["late", "main"]);
    let wired = plan.node(split).wired().to_vec();
    let (old, _) = plan.replace_operator(split, d, wired);
    assert_eq!(old.outputs, ["main", "late"]);
    assert_eq!(plan.find("split"), Some(split));
    assert_eq!(edges(&plan)[1], edge("split", 0, "late", 0));
    assert!(plan.node(split).outputs(1).is_empty());
}

#[test]
fn a_connected_job_is_one_stage_of_one_task_holding_every_instance() {
    let job = diamond();
    let plan = compile(&job, diamond_ports);
    let stages = plan.stages();
    assert_eq!(stages.len(), 1);
    let stage = &stages[0];
    assert_eq!(stage.id, StageId(0));
    let all: Vec<NodeId> = plan.nodes().iter().map(|n| n.id()).collect();
    assert_eq!(stage.nodes, all);
    assert_eq!(stage.tasks.len(), 1);
    assert_eq!(stage.tasks[0].id.to_string(), "s0-0");
    assert_eq!(
        stage.tasks[0].instances,
        plan.instances().collect::<Vec<_>>()
    );
}

#[test]
fn disjoint_pipelines_are_stages_of_their_own() {
    let job = job(&[
        source("s1"),
        source("s2"),
        operator("a", "[\"s2\"]", 2),
        sink("o1", "\"s1\""),
        sink("o2", "\"a\""),
    ]
    .concat());
    let plan = compile(&job, |_| declared(&["in"], &["out"]));
    let stages = plan.stages();
    let names = |s: &Stage| -> Vec<&str> { s.nodes.iter().map(|&n| plan.node(n).name()).collect() };
    assert_eq!(stages.len(), 2);
    assert_eq!(names(&stages[0]), ["s1", "o1"]);
    assert_eq!(names(&stages[1]), ["s2", "a", "o2"]);
    assert_eq!(stages[1].id.index(), 1);
    assert_eq!(stages[1].tasks.len(), 1);
    assert_eq!(stages[1].tasks[0].instances.len(), 4);
    assert_eq!(
        stages[1].tasks[0].id,
        TaskId {
            stage: StageId(1),
            index: 0
        }
    );
}

#[test]
fn a_repartition_edge_cuts_the_job_into_stages() {
    let text = [
        source("src"),
        operator("split", "[\"src\"]", 1),
        operator("count", "[\"split\"]", 1),
        "exchange = \"repartition\"\n".to_owned(),
        sink("out", "\"count\""),
    ]
    .concat();
    let job = job(&text);
    let plan = compile(&job, |_| declared(&["in"], &["out"]));
    let crossing: Vec<Exchange> = plan.edges().iter().map(|e| e.exchange()).collect();
    assert_eq!(
        crossing,
        [Exchange::Local, Exchange::Repartition, Exchange::Local]
    );
    let stages = plan.stages();
    let names = |s: &Stage| -> Vec<&str> { s.nodes.iter().map(|&n| plan.node(n).name()).collect() };
    assert_eq!(stages.len(), 2);
    assert_eq!(names(&stages[0]), ["src", "split"]);
    assert_eq!(names(&stages[1]), ["count", "out"]);
}
