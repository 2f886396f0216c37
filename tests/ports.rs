//! Side outputs and unions through `weir run`: every output port of an
//! operator can be wired (`op.port`), and one input port or sink can take
//! several upstreams (a union). Each wired port's output reaches its
//! consumers exactly once and in order (each input's records through one
//! instance in input order, each word's counts in order), across SIGKILLs
//! too.

use std::collections::BTreeMap;

use weir_tests::cli::Weir;
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::jobs::route_words;
use weir_tests::order::{assert_in_order_per_instance, check_interleaving, line_key};
use weir_tests::pipeline::{XorShift, assert_same_lines, multiset, seed};
use weir_tests::plugins;
use weir_tests::text::{assert_has, assert_has_all, assert_lacks};

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `n` lines `w<i>` with `i` below `vocabulary`.
fn words(rng: &mut XorShift, vocabulary: u64, n: usize) -> String {
    (0..n)
        .map(|_| format!("w{}\n", rng.range(0, vocabulary)))
        .collect()
}

/// The lines of every text in `texts`, as one multiset.
fn lines_of(texts: &[&str]) -> BTreeMap<String, usize> {
    multiset(&texts.concat())
}

/// `name` with sources `a` and `b` reading `a.txt` and `b.txt` (at `rate`
/// records per second, or unthrottled).
fn from_a_and_b(name: &str, rate: Option<u64>) -> JobFile {
    JobFile::new(name)
        .source(Source::file("a", "a.txt").throttle(rate))
        .source(Source::file("b", "b.txt").throttle(rate))
}

/// [`route_words`] with port `out` into `passed.txt` and port `rejected`
/// into `rejected.txt`.
fn routed(name: &str, parallelism: u32) -> JobFile {
    route_words(name, parallelism)
        .sink(Sink::file("passed", "passed.txt").input("route"))
        .sink(Sink::file("rejected", "rejected.txt").input("route.rejected"))
}

/// `two-outputs` emits every record on `out` and again on `rejected`: with
/// both ports wired, each sink gets every record exactly once, and no
/// warning is given.
#[test]
fn a_side_output_reaches_its_own_sink() {
    let job = routed("side", 2).checkpoint(Checkpoint::every("50ms"));
    let input = words(&mut XorShift(seed()), 50, 2000);
    let j = JobDir::new(WEIR, job, &[("words.txt", &input)]);
    assert_lacks(&j.run_ok(&[]), "nothing consumes");
    let expected = multiset(&input);
    for (file, port) in [
        ("passed.txt", "port `out`"),
        ("rejected.txt", "port `rejected`"),
    ] {
        assert_same_lines(&j.lines(file), &expected, port);
        assert_in_order_per_instance(&j.read(file), &[&input], 2, line_key, port);
    }
}

/// Two sources into the one input port of `word-count`: it counts the
/// words of both files.
#[test]
fn a_union_into_an_operator_port_counts_both_inputs() {
    let (a, b) = ("x\ny\nx\n", "y\nz\nx\n");
    let job = from_a_and_b("union-op", None)
        .operator(Operator::new("count", plugins::WORD_COUNT).union("in", &["a", "b"]))
        .sink(Sink::file("out", "out.jsonl").input("count"));
    let j = JobDir::new(WEIR, job, &[("a.txt", a), ("b.txt", b)]);
    assert_has(&j.validate().assert_ok().stdout, "in <- a, in <- b");
    j.run_ok(&[]);
    let want = true_counts(a.lines().chain(b.lines()));
    assert_running_counts(&want, &j.read("out.jsonl"), "the union's counts");
}

/// A sink with `input = [...]` writes what all its upstreams send: a
/// source and an operator's side output.
#[test]
fn a_union_at_a_sink_writes_every_upstream() {
    let (a, b) = ("1\n2\n3\n", "4\n5\n");
    let job = from_a_and_b("union-sink", None)
        .operator(Operator::new("route", plugins::GUEST_TWO_OUTPUTS).inputs(&["b"]))
        .sink(Sink::file("all", "all.txt").inputs(&["a", "route.rejected"]))
        .sink(Sink::file("passed", "passed.txt").input("route"));
    let j = JobDir::new(WEIR, job, &[("a.txt", a), ("b.txt", b)]);
    j.run_ok(&[]);
    assert_same_lines(&j.lines("all.txt"), &lines_of(&[a, b]), "the sink's union");
    let all = j.read("all.txt");
    let all: Vec<&str> = all.lines().collect();
    let inputs: [Vec<&str>; 2] = [a.lines().collect(), b.lines().collect()];
    check_interleaving(&all, &[&inputs[0], &inputs[1]])
        .unwrap_or_else(|e| panic!("the sink's union, each upstream in order: {e}"));
    assert_eq!(j.read("passed.txt"), b, "port `out`, in order");
}

/// Two throttled sources unioned into `route` (2 instances), whose `out`
/// goes to a file and whose `rejected` goes to `word-count` (2 instances):
/// killed again and again, both outputs are exactly once.
#[test]
fn a_union_and_a_side_output_survive_sigkills_exactly_once() {
    let mut rng = XorShift(seed() ^ 15);
    let (a, b) = (words(&mut rng, 300, 12_000), words(&mut rng, 300, 12_000));
    let job = from_a_and_b("ports", Some(4000))
        .checkpoint(Checkpoint::every("100ms"))
        .operator(
            Operator::new("route", plugins::GUEST_TWO_OUTPUTS)
                .union("in", &["a", "b"])
                .parallelism(2),
        )
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["route.rejected"])
                .parallelism(2),
        )
        .sink(Sink::file("passed", "passed.txt").input("route"))
        .sink(Sink::file("counts", "counts.jsonl").input("count"));
    let j = JobDir::new(WEIR, job, &[("a.txt", &a), ("b.txt", &b)]);
    let killed = j.run_through_kills(4, "passed.txt", (0, 300), &mut rng);
    let what = format!("after {killed} crashes (seed {})", seed());
    let passed = j.lines("passed.txt");
    let port = format!("port `out` {what}");
    assert_same_lines(&passed, &lines_of(&[&a, &b]), &port);
    assert_in_order_per_instance(&j.read("passed.txt"), &[&a, &b], 2, line_key, &port);
    let want = true_counts(a.lines().chain(b.lines()));
    assert_running_counts(&want, &j.read("counts.jsonl"), &format!("counts {what}"));
}

/// A plugin swapped in must declare the output ports the job reads.
#[test]
fn a_swap_to_a_plugin_without_a_read_port_is_refused() {
    let j = JobDir::new(WEIR, routed("swap-ports", 1), &[("words.txt", "a\n")]);
    let swap = format!("route={}", plugins::WORD_COUNT);
    let out = j.run(&["--swap", &swap]);
    let err = &out.stderr;
    assert!(!out.success(), "{err}");
    let refused = "cannot swap operator `route` to ";
    let why = "sink \"rejected\": input \"route.rejected\": operator \"route\" has no output port \"rejected\"";
    assert_has_all(
        err,
        &[refused, why, "declares outputs: out); name one of those"],
    );
}
