//! Test fixture (sandbox): `describe` returns a name with a newline and
//! terminal escapes, as a plugin forging log lines would.

weir_guests::unit_guest!(
    BadNames,
    weir_guests::info("evil\nERROR weir: fake line \u{1b}[31m", "1.0.0")
);
