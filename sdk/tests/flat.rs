//! Batches and emits in flat form: the component's exports (called natively
//! here, against the in-memory host) and the emit buffers.

mod common;

use std::cell::RefCell;

use common::flat_in_out;

use weir_flat::{Range, Span};
use weir_sdk::bindings::exports::weir::operator::{flat_lifecycle, lifecycle};
use weir_sdk::testing::{Harness, with_memory_host};
use weir_sdk::*;

/// Emits, per input record `n:size:ports`, `n` records of `size` bytes on
/// each of `ports` output ports; counts `process` and `process_batch` calls.
#[derive(Default)]
struct Flood {
    record_calls: usize,
    batch_calls: usize,
}

fn emit_flood(ctx: &mut Context, spec: &str) {
    let parts: Vec<usize> = spec.split(':').map(|p| p.parse().unwrap()).collect();
    for i in 0..parts[0] {
        for port in 0..parts[2] as u32 {
            let key = i.to_string();
            ctx.emit_with(port, Some(key.as_bytes()), |out| {
                out.push_bytes(&vec![b'x'; parts[1]])
            });
        }
    }
}

impl Operator for Flood {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("flood", "1.0.0")
            .input("in")
            .output("a")
            .output("b")
    }

    fn open(_: &OpenContext) -> Result<Self> {
        Ok(Flood::default())
    }

    fn process(&mut self, ctx: &mut Context, _: u32, batch: Vec<Record>) -> Result<()> {
        self.record_calls += 1;
        for rec in batch {
            emit_flood(ctx, rec.value_str()?);
        }
        Ok(())
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        self.batch_calls += 1;
        for rec in batch {
            emit_flood(ctx, rec.value_str()?);
        }
        Ok(())
    }
}

thread_local! {
    static SLOT: RefCell<Option<Flood>> = const { RefCell::new(None) };
}

impl __private::OperatorSlot for Flood {
    fn with_slot<R>(f: impl FnOnce(&mut Option<Self>) -> R) -> R {
        SLOT.with(|s| f(&mut s.borrow_mut()))
    }
}

type Exports = __private::Adapter<Flood>;

fn calls(f: impl FnOnce(&Flood) -> usize) -> usize {
    SLOT.with(|s| f(s.borrow().as_ref().unwrap()))
}

#[test]
fn each_export_calls_its_method_and_bad_spans_are_host_bugs() {
    with_memory_host(|| {
        <Exports as lifecycle::Guest>::open(OpenContext::with_config("{}")).unwrap();
        <Exports as lifecycle::Guest>::process(0, vec![Record::new("1:1:1")]).unwrap();
        assert_eq!(calls(|f| f.record_calls), 1);

        let value = Range { offset: 0, len: 5 };
        let span = Span {
            key: None,
            value,
            timestamp: None,
            change: Default::default(),
            encoding: Default::default(),
        };
        <Exports as flat_lifecycle::Guest>::process(0, b"1:1:1".to_vec(), span.encode().to_vec())
            .unwrap();
        assert_eq!(calls(|f| f.batch_calls), 1);

        // Spans that are not a whole number of spans: an error, before the
        // operator runs.
        let err = <Exports as flat_lifecycle::Guest>::process(
            0,
            b"1:1:1".to_vec(),
            span.encode()[..20].to_vec(),
        );
        assert!(format!("{err:?}").contains("host bug"), "{err:?}");
        assert_eq!(calls(|f| f.batch_calls), 1, "nothing ran");

        // A range outside the data: a panic (a trap in Wasm) when the
        // operator reads that record.
        let bad = Span {
            value: Range { offset: 1, len: 5 },
            ..span
        };
        let panic = std::panic::catch_unwind(|| {
            <Exports as flat_lifecycle::Guest>::process(
                0,
                b"1:1:1".to_vec(),
                [span.encode(), bad.encode()].concat(),
            )
        })
        .unwrap_err();
        let msg = panic.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("host bug: a record of a flat batch points at bytes 1..6"),
            "{msg}"
        );
    });
}

#[test]
fn the_harness_drives_process_batch() {
    let mut h = Harness::<Flood>::open("{}").unwrap();
    h.process("in", vec![Record::new("1:1:1")]).unwrap();
    assert_eq!(
        (h.operator().batch_calls, h.operator().record_calls),
        (1, 0)
    );
}

#[test]
fn one_emit_call_per_port_and_hook() {
    let mut h = Harness::<Flood>::open("{}").unwrap();
    let out = h
        .process_ports("in", vec![Record::new("3:2:2"), Record::new("1:0:1")])
        .unwrap();
    assert_eq!(h.host_calls().emit, 2);
    let on_a: Vec<_> = out
        .iter()
        .filter(|(p, _)| *p == 0)
        .map(|(_, r)| r.key_str().unwrap())
        .collect();
    assert_eq!(on_a, ["0", "1", "2", "0"], "in emit order");
    assert_eq!(out.iter().filter(|(p, _)| *p == 1).count(), 3);
    assert!(out.iter().all(|(_, r)| r.timestamp.is_none()));
}

#[test]
fn a_full_buffer_is_handed_over_early() {
    let mut h = Harness::<Flood>::open("{}").unwrap();
    let out = h.process("in", vec![Record::new("10000:1:1")]).unwrap();
    assert_eq!(out.len(), 10_000);
    assert_eq!(h.host_calls().emit, 3, "4096 + 4096 + the rest");
    let keys: Vec<usize> = out
        .iter()
        .map(|r| r.key_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(keys, (0..10_000).collect::<Vec<_>>());

    let mut h = Harness::<Flood>::open("{}").unwrap();
    let out = h.process("in", vec![Record::new("3:600000:1")]).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(h.host_calls().emit, 2, "1 MiB reached after two records");
}

#[test]
fn every_emit_form_builds_the_same_record() {
    let mut h = Harness::<Forms>::open("{}").unwrap();
    let out = h
        .process("in", vec![Record::new("v").with_key("k").with_timestamp(1)])
        .unwrap();
    // Every form carries the input record's timestamp: the forms without
    // one of their own take the current record's.
    let expected = Record::new("v").with_key("k").with_timestamp(1);
    assert_eq!(out, vec![expected; 4]);
}

/// Emits each input record in every form.
struct Forms;

impl Operator for Forms {
    flat_in_out!("forms");

    fn open(_: &OpenContext) -> Result<Self> {
        Ok(Forms)
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            ctx.emit(0, rec.to_record());
            ctx.emit_ref(0, rec);
            ctx.emit_bytes(0, rec.key, rec.value);
            ctx.emit_with(0, rec.key, |out| out.push_bytes(rec.value));
        }
        Ok(())
    }
}
