//! The host side of Weir's WIT interfaces (`wit/`), one module per
//! interface, each an `impl Host` on the store data [`InstanceState`]:
//! `state` (host-owned keyed state) and `flat-state` (the same state in
//! packed buffers, `state_flat`), `timers` (watermark, clock and
//! host-owned timers), `emit` and `flat` (records out, in both forms),
//! `reject` (records of a batch the plugin refuses) and `log`. `types` has
//! no functions.
//!
//! Every import is trappable: a host function refuses a call (a limit, an
//! emit or state write the current hook may not make, a bad argument) with a
//! trap, never with a return value, so the call fails and the plugin cannot
//! carry on past a refusal.

mod emit;
mod log;
mod reject;
mod state;
mod state_flat;
pub(crate) mod timers;

use wasmtime::component::{HasSelf, Linker};

use super::instance_state::InstanceState;
use crate::wit::{Imports, types};

/// Adds Weir's interfaces (the imports of world `operator-timers`, a
/// superset of the other worlds', `flat-state` included) to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    Imports::add_to_linker::<InstanceState, HasSelf<InstanceState>>(linker, |s| s)
}

impl types::Host for InstanceState {}

/// A key or value in a trace line: its text, escaped, cut at 48 characters.
pub(super) fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.escape_debug().take(48).collect();
    if text.escape_debug().nth(48).is_some() {
        out.push('…');
    }
    format!("\"{out}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyed::value::readable;

    #[test]
    fn a_traced_row_value_is_the_json_of_its_fields() {
        let mut v = vec![weir_flat::state::ROW_VALUE];
        weir_flat::row::RowWriter::new(&mut v).f64("a", 1.5);
        assert_eq!(shown(&readable(&v)), r#""{\"a\":1.5}""#);
        assert_eq!(shown(&readable(b"7")), r#""7""#);
        assert_eq!(shown(&v[..2]), "\"\u{fffd}\\u{5}\"");
    }
}
