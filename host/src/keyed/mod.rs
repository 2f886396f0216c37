//! Live keyed state: what one operator instance holds while it runs, by
//! key, in host memory: its [`state`] (`KeyedState`, the values a plugin
//! reads and writes), its [`timers`], and the [`changes`] of its state since
//! the previous checkpoint, which a checkpoint takes; and how a state
//! [`value`] is shown. The checkpoint store ([`crate::store`]) keeps them
//! durably.

pub mod changes;
pub mod state;
pub mod timers;
pub mod value;
