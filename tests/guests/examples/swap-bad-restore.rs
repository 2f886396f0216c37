//! Test fixture: a would-be successor of `word-count` whose `restore`
//! always fails, as a plugin with a broken migration would. Swapping to it
//! must be rolled back.

use weir_sdk::{Context, Error, Result};

fn restore(_ctx: &mut Context, state_version: u32, _bytes: &[u8]) -> Result<()> {
    Err(Error::IncompatibleState(format!(
        "cannot migrate state version {state_version} (deliberately broken)"
    )))
}

weir_guests::unit_guest!(
    BadRestore,
    weir_guests::info("word-count", "9.0.0-bad-restore").state_version(9),
    restore = restore,
);
