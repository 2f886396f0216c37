//! Test fixture (sandbox): `describe` returns a name that is not UTF-8 (the
//! canonical ABI forbids it; the host must reject it, not panic).

use weir_sdk::OperatorInfo;

fn describe() -> OperatorInfo {
    // SAFETY: deliberately not UTF-8; the bytes are only handed to the
    // host through the canonical ABI, never read as a `str` here.
    let name = unsafe { String::from_utf8_unchecked(vec![b'x', 0xff, 0xfe, b'y']) };
    weir_guests::info(name, "1.0.0")
}

weir_guests::unit_guest!(BadUtf8Name, describe());
