//! The file connector (`type = "file"`): a file source read in the format
//! `lines`, `jsonl` or `csv` and resumed by seeking ([`source`]), and the
//! transactional file sink ([`sink`]) with its I/O thread (`io`), or, with
//! `delivery = "at-least-once"`, the appending one (`append`).

mod append;
mod io;
pub mod sink;
pub mod source;

pub use sink::{FileSinkConfig, SINK};
pub use source::{FileSourceConfig, SOURCE};
