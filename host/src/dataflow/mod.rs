//! The data path: flat [`Batch`]es of [`Record`]s, key-group
//! [`partition`]ing, barrier [`align`]ment, and the thread bodies of
//! sources, operator instances and sinks ([`task`]).

pub mod align;
pub mod batch;
pub mod partition;
pub mod record;
pub(crate) mod task;

pub use batch::Batch;
pub use record::Record;
pub use task::TaskError;
