//! File sources whose records are decoded into JSON records, or rows when
//! flat, one at a time (Avro object container files, `avro_file`;
//! length-delimited Protobuf messages, `proto_file`): the batch loop, the count of records read and
//! what the parser says of places and bad records, around each format's
//! own reading ([`RecordFile`]).
//!
//! Invariant: `records` counts every record read, bad ones included, and
//! the offset is the format's for that count ([`RecordFile::offset`]), so
//! a restore there reads exactly the records not yet returned.

use serde_json::Value;

use crate::connectors::format::LineParser;
use crate::connectors::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use crate::dataflow::Batch;
use crate::schemas::Written;

/// One format's reading of a file, a record at a time.
pub trait RecordFile: Send {
    /// Decodes the next record, number `number` of the file, into `out`
    /// (as a row when flat, else as JSON; it says which): `None` at the
    /// file's end, `Some(Err(why))` for a record that does not decode (a
    /// bad record); `Err` when the file is damaged.
    fn next(
        &mut self,
        number: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<Result<Written, String>>, SourceError>;

    /// The bytes of the record read last, as read (what a bad record's
    /// dead letter holds); empty when the format hands out records
    /// decoded only.
    fn raw(&self) -> &[u8];

    /// The offset after the first `records` records.
    fn offset(&self, records: u64) -> Value;
}

/// A source reader of a file of decoded records.
pub struct DecodedFile<F> {
    file: F,
    parser: LineParser,
    /// Records read so far.
    records: u64,
    /// The record read last.
    decoded: Vec<u8>,
    /// Whether every record was read.
    ended: bool,
}

impl<F: RecordFile> DecodedFile<F> {
    /// Reads `file` past its first `records` records, placing records and
    /// bad ones with `parser`.
    pub fn new(file: F, parser: LineParser, records: u64) -> Self {
        DecodedFile {
            file,
            parser,
            records,
            decoded: Vec::new(),
            ended: false,
        }
    }
}

impl<F: RecordFile> SourceReader for DecodedFile<F> {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        if self.ended {
            return Ok(None);
        }
        let mut batch = Batch::with_capacity(max.min(4096), 0);
        let mut read = 0;
        while read < max && batch.data_bytes() < MAX_BATCH_BYTES {
            self.decoded.clear();
            let Some(decoded) = self.file.next(self.records + 1, &mut self.decoded)? else {
                self.ended = true;
                break;
            };
            self.records += 1;
            read += 1;
            let decoded = decoded.map(|written| (&self.decoded[..], written));
            let raw = self.file.raw();
            (self.parser).add_decoded_record(&mut batch, decoded, raw, self.records);
        }
        Ok(match (batch.is_empty(), self.ended) {
            (true, true) => None,
            _ => Some(batch),
        })
    }

    fn offset(&self) -> Value {
        self.file.offset(self.records)
    }

    fn place(&self) -> Option<String> {
        self.parser.place()
    }

    fn skipped(&self) -> u64 {
        self.parser.skipped
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.parser.bad)
    }
}
