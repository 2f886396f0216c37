//! The `weir` command line's library: everything `weir` shows a person and
//! nothing the runtime needs. The binary (`main.rs`) parses arguments, sets
//! up logging and signals, and calls the runtime (`weir::run::run`) and
//! these modules.
#![warn(missing_docs)]

pub mod dashboard;
pub mod deadletter;
pub mod event_time;
pub mod http;
pub mod inspect;
pub mod output;
pub mod progress;
pub mod prometheus;
pub mod scaffold;
pub mod shadow;
pub mod stored;
pub mod workers;
