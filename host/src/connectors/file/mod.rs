//! The file connector (`type = "file"`): a file source read in the format
//! `lines`, `jsonl`, `csv` and the others of lines, resumed by seeking
//! ([`source`]), of length-delimited Protobuf messages (`proto_file`), or
//! of Avro object container files (`avro_file`), these two decoded a
//! record at a time (`decoded`), and the
//! transactional file sink ([`sink`]) with its I/O thread (`io`), or, with
//! `delivery = "at-least-once"`, the appending one (`append`), both
//! writing records in their format ([`records`]; CSV: `csv_out`, with
//! its settings in [`csv_layout`]).

mod append;
mod avro_file;
pub mod csv_layout;
mod csv_out;
mod decoded;
mod io;
mod proto_file;
pub mod records;
pub mod sink;
pub mod source;

pub use sink::{FileSinkConfig, SINK};
pub use source::{FileSourceConfig, SOURCE};
