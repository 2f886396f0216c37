//! Sources and sinks: what a job reads and where it writes.

pub mod sink;
pub mod source;
