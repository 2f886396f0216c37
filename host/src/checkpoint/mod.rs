//! Checkpoint decisions and the state they capture: the [`coordinator`]
//! (when to trigger, when a checkpoint is complete) and an instance's
//! host-owned [`state`] (`KeyedState`) and [`timers`]. The durable side is in
//! [`crate::store`].

pub mod coordinator;
pub mod state;
pub mod timers;
