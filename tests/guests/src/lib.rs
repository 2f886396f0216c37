//! What the adversarial guests have in common. Each guest is one file of
//! `examples/`, built to its own component (`plugins/target/<name>.wasm`, by
//! `scripts/build-plugins.sh`), and misbehaves in one hook; the ports it
//! declares, its configuration, passing records through and counters in
//! host state are here.

pub use weir_sdk;

use weir_sdk::{Context, OperatorInfo, Record, Result};

/// `name` at `version`, with one input port `in` and one output port `out`.
pub fn info(name: impl Into<String>, version: &str) -> OperatorInfo {
    OperatorInfo::new(name, version).input("in").output("out")
}

/// Emits every record of `batch`, unchanged, on output port 0.
pub fn pass(ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    ctx.emit_all(0, batch);
    Ok(())
}

/// The little-endian `u64` in host state under `key`: 0 when there is none
/// or it is not 8 bytes long.
pub fn count(ctx: &Context, key: &[u8]) -> u64 {
    ctx.get(key)
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or_default()))
}

/// Stores `n` in host state under `key`, as a little-endian `u64`.
pub fn set_count(ctx: &mut Context, key: &[u8], n: u64) {
    ctx.put(key, &n.to_le_bytes());
}

/// Declares the guest's configuration, the struct `$name`, for
/// `OpenContext::config_as`: each field may be left out of the JSON, and
/// then has the value after its `=`.
#[macro_export]
macro_rules! config {
    (struct $name:ident { $($field:ident: $ty:ty = $default:expr),* $(,)? }) => {
        #[derive(::serde::Deserialize)]
        #[serde(default)]
        struct $name {
            $($field: $ty),*
        }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $default),*
                }
            }
        }
    };
}

/// Declares the configuration `$config` of the guest `$op` (its fields as
/// in [`config!`]), implements `Operator` for `$op`: `describe` gives
/// [`info`]`($name, "1.0.0")`, `open` reads the configuration as `$c` and
/// returns `$open`, and the other methods are the ones written after that;
/// and exports the guest.
#[macro_export]
macro_rules! configured_guest {
    (
        $op:ident $name:literal,
        config $config:ident { $($field:ident: $ty:ty = $default:expr),* $(,)? },
        open |$c:ident| $open:expr;
        $($methods:tt)*
    ) => {
        $crate::config! {
            struct $config { $($field: $ty = $default),* }
        }

        impl $crate::weir_sdk::Operator for $op {
            fn describe() -> $crate::weir_sdk::OperatorInfo {
                $crate::info($name, "1.0.0")
            }

            fn open(ctx: &$crate::weir_sdk::OpenContext) -> $crate::weir_sdk::Result<Self> {
                let $c: $config = ctx.config_as()?;
                Ok($open)
            }

            $($methods)*
        }

        $crate::weir_sdk::export!($op);
    };
}

/// Declares and exports the guest `$op`, a unit struct (a guest that keeps
/// nothing in its own memory): `describe` returns `$info`, `open` ignores
/// the configuration, `process` calls the function `process` (by default
/// [`pass`]), and `restore` the function `restore` (by default the SDK's).
#[macro_export]
macro_rules! unit_guest {
    (
        $op:ident,
        $info:expr
        $(, process = $process:path)?
        $(, restore = $restore:path)?
        $(,)?
    ) => {
        /// The guest.
        pub struct $op;

        impl $crate::weir_sdk::Operator for $op {
            fn describe() -> $crate::weir_sdk::OperatorInfo {
                $info
            }

            fn open(_ctx: &$crate::weir_sdk::OpenContext) -> $crate::weir_sdk::Result<Self> {
                Ok($op)
            }

            fn process(
                &mut self,
                ctx: &mut $crate::weir_sdk::Context,
                _port: u32,
                batch: ::std::vec::Vec<$crate::weir_sdk::Record>,
            ) -> $crate::weir_sdk::Result<()> {
                let process = $crate::unit_guest!(@process $($process)?);
                process(ctx, batch)
            }

            $(
                fn restore(
                    &mut self,
                    ctx: &mut $crate::weir_sdk::Context,
                    state_version: u32,
                    bytes: &[u8],
                ) -> $crate::weir_sdk::Result<()> {
                    $restore(ctx, state_version, bytes)
                }
            )?
        }

        $crate::weir_sdk::export!($op);
    };
    (@process) => {
        $crate::pass
    };
    (@process $process:path) => {
        $process
    };
}
