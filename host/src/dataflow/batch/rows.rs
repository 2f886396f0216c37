//! The rows of a [`Batch`]: whether it has any, and what its reader gets
//! of them (JSON text, or the rows checked once; those the host wrote are
//! not checked again).

use super::{BadSpans, Batch, Encoding, SPAN_BYTES};

impl Batch {
    /// Whether a record's value is a row ([`Encoding::Row`]).
    pub fn has_rows(&self) -> bool {
        self.may_have_rows && (self.spans.chunks_exact(SPAN_BYTES)).any(weir_flat::is_row)
    }

    /// The batch as its reader sees it: every row written as the JSON
    /// object of its fields (as `serde_json` writes it), everything else as
    /// it is; `self` itself when it has no row. Called by each sink and
    /// operator instance on the batches it receives, so a plugin's rows
    /// are checked and encoded once, on the reader's thread, not on the
    /// thread of the plugin that wrote them. An error names the first
    /// value marked a row that is none (a bug in the plugin that emitted
    /// it).
    ///
    /// ```
    /// use weir::dataflow::batch::{Batch, Encoding, Range, Span};
    /// let mut row = Vec::new();
    /// weir_flat::row::RowWriter::new(&mut row).str("w", "a").u64("n", 2);
    /// let span = Span { value: Range { offset: 0, len: row.len() as u32 }, encoding: Encoding::Row, ..Span::default() };
    /// let b = Batch::from_parts(row, span.encode().to_vec()).unwrap().rows_as_text().unwrap();
    /// assert_eq!(b.get(0).value, br#"{"w":"a","n":2}"#);
    /// assert_eq!(b.get(0).encoding, Encoding::Bytes);
    /// let bad = Span { value: Range { offset: 0, len: 1 }, ..span };
    /// assert!(Batch::from_parts(vec![9], bad.encode().to_vec()).unwrap().rows_as_text().is_err());
    /// ```
    pub fn rows_as_text(mut self) -> Result<Batch, BadSpans> {
        if !self.has_rows() {
            return Ok(self);
        }
        let mut data = Vec::with_capacity(self.data.len() * 2);
        weir_flat::row::batch_as_json(&self.data, &mut self.spans, &mut data)?;
        self.data = data;
        self.may_have_rows = false;
        self.unchecked_rows = false;
        Ok(self)
    }

    /// Checks every row of the batch ([`weir_flat::row::check`]), for a
    /// reader that reads rows as they are; an error names the first value
    /// marked a row that is none. Rows the host wrote are not checked.
    ///
    /// ```
    /// use weir::dataflow::batch::{Batch, Encoding, Range, SPAN_BYTES, Span};
    /// let row = |len| Span { value: Range { offset: 0, len }, encoding: Encoding::Row, ..Span::default() };
    /// let spans = [row(3).encode(), row(2).encode()].concat();
    /// let b = Batch::from_parts(vec![2, 1, b'b'], spans[..SPAN_BYTES].to_vec()).unwrap();
    /// assert!(b.check_rows().is_ok());
    /// let b = Batch::from_parts(vec![9, 0], spans[SPAN_BYTES..].to_vec()).unwrap();
    /// assert_eq!(b.check_rows().unwrap_err().to_string(), "record 0 of a flat batch: the row's field at byte 0 has unknown type 9");
    /// ```
    pub fn check_rows(&self) -> Result<(), BadSpans> {
        if !self.unchecked_rows {
            return Ok(());
        }
        for (index, r) in self.iter().enumerate() {
            if r.encoding == Encoding::Row {
                weir_flat::row::check(r.value).map_err(|error| BadSpans::Row { index, error })?;
            }
        }
        Ok(())
    }
}
