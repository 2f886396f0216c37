//! The data path: flat [`Batch`]es of [`Record`]s, the flat
//! [`StateChanges`] instances hand to checkpoints, key-group
//! [`partition`]ing, every message of a running job ([`protocol`]), barrier
//! [`align`]ment (and overtaking: unaligned checkpoints, their
//! [`inflight`] data and the barriers' `priority` path), the aligned-input loop shared by operator instances and
//! sinks (`input`), event-time progress ([`watermark`]), partitioned sends
//! (`output`) and cancellation (`cancel`). This folder imports only the WIT bindings; the thread bodies
//! that drive it are in `tasks`.

pub mod align;
pub mod batch;
pub(crate) mod cancel;
pub mod changes;
pub(crate) mod frame;
pub mod inflight;
pub(crate) mod input;
pub(crate) mod output;
pub mod partition;
pub(crate) mod priority;
pub mod protocol;
pub mod record;
pub mod watermark;

pub use batch::Batch;
pub use changes::StateChanges;
pub use record::Record;
