//! Test fixture (sandbox): emits a record and writes state from `describe`,
//! which must not call imports.

use weir_sdk::bindings::weir::operator::{emit as raw_emit, state as raw_state};
use weir_sdk::{OperatorInfo, Record};

fn describe() -> OperatorInfo {
    // Reading is harmless; writing and emitting trap.
    let _ = raw_state::get(b"anything");
    raw_emit::emit(0, &Record::new("from describe"));
    raw_state::put(b"k", b"v");
    weir_guests::info("describe-emit", "1.0.0")
}

weir_guests::unit_guest!(DescribeEmit, describe());
