//! The data path: flat [`Batch`]es of [`Record`]s, key-group
//! [`partition`]ing, every message of a running job ([`protocol`]), barrier
//! [`align`]ment (and overtaking: unaligned checkpoints, their
//! [`inflight`] data and the barriers' `priority` path), the aligned-input loop shared by operator instances and
//! sinks (`input`), event-time progress ([`watermark`]), partitioned sends
//! (`output`), cancellation (`cancel`) and where records came from
//! ([`provenance`]) and why one could not be handled ([`bad_kind`]). This
//! folder imports only the WIT
//! bindings and the state changes an acknowledgement carries
//! ([`crate::keyed::changes`]); the thread bodies that drive it are in
//! `threads`.

pub mod align;
pub mod bad_kind;
pub mod batch;
pub(crate) mod cancel;
pub(crate) mod frame;
pub mod inflight;
pub(crate) mod input;
pub(crate) mod output;
pub mod partition;
pub(crate) mod priority;
pub mod protocol;
pub mod provenance;
pub mod record;
pub mod recording;
pub mod watermark;

pub use batch::Batch;
pub use record::Record;
