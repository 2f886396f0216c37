//! Host bindings generated from `wit/`. Private to the crate, except the plain
//! data types re-exported from the crate root ([`crate::Record`]).

wasmtime::component::bindgen!({
    world: "operator",
    path: "../wit",
    imports: { default: trappable },
    additional_derives: [PartialEq, Eq, Hash],
});

pub use self::weir::operator::{emit, log, state, types};
