//! What the SDK's integration tests share: operators with one input port
//! `in` and one output port `out` that take flat batches only.

/// `describe` (`$name` 1.0.0, with one input port `in` and one output port
/// `out`) and `process` of an operator that overrides `process_batch`: the
/// test harness passes every batch in flat form, so `process` is never
/// called.
macro_rules! flat_in_out {
    ($name:literal) => {
        fn describe() -> OperatorInfo {
            OperatorInfo::new($name, "1.0.0").input("in").output("out")
        }

        fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> {
            unreachable!("the harness passes batches in flat form")
        }
    };
}

pub(crate) use flat_in_out;
