//! A [`Batch`] framed for a byte stream: the lengths of its data and of its
//! packed spans (two little-endian `u32`s), then both ([`Batch::parts`]).
//! A staged sink's epoch file (`connectors/staged.rs`) and the in-flight
//! data of an unaligned checkpoint ([`crate::dataflow::inflight`]) are
//! sequences of frames.
//!
//! Invariant: [`read`] gives back exactly the batch [`write`] framed, and
//! refuses a frame whose spans point outside its data (the batch invariant
//! of [`crate::dataflow::batch`]).

use std::io::{self, Read, Write};

use crate::dataflow::batch::{BadSpans, Batch};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Reading failed or the input ended inside a frame.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The frame's spans do not fit its data.
    #[error("{0}")]
    Spans(BadSpans),
}

/// Appends `batch` to `out` as one frame.
///
/// # Panics
/// If the batch's data or spans are 4 GiB or larger (a batch is at most a
/// few MiB).
pub(crate) fn write(out: &mut impl Write, batch: &Batch) -> io::Result<()> {
    let (data, spans) = batch.parts();
    let len = |part: &[u8]| u32::try_from(part.len()).expect("a batch part under 4 GiB");
    out.write_all(&len(data).to_le_bytes())?;
    out.write_all(&len(spans).to_le_bytes())?;
    out.write_all(data)?;
    out.write_all(spans)
}

/// The next frame of `input`, or `None` at its end (between frames).
pub(crate) fn read(input: &mut impl Read) -> Result<Option<Batch>, FrameError> {
    let mut lengths = [0u8; 8];
    if input.read(&mut lengths[..1])? == 0 {
        return Ok(None);
    }
    input.read_exact(&mut lengths[1..])?;
    let data_len = u32::from_le_bytes(lengths[..4].try_into().expect("4 bytes")) as usize;
    let spans_len = u32::from_le_bytes(lengths[4..].try_into().expect("4 bytes")) as usize;
    let mut data = vec![0; data_len];
    let mut spans = vec![0; spans_len];
    input.read_exact(&mut data)?;
    input.read_exact(&mut spans)?;
    Batch::from_parts(data, spans)
        .map(Some)
        .map_err(FrameError::Spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_refused() {
        let mut b = Batch::new();
        b.push(Some(b"k"), b"value", Some(7));
        b.push(None, b"", None);
        let mut out = Vec::new();
        write(&mut out, &b).unwrap();
        write(&mut out, &Batch::new()).unwrap();
        let mut input = out.as_slice();
        assert_eq!(read(&mut input).unwrap(), Some(b));
        assert_eq!(read(&mut input).unwrap(), Some(Batch::new()));
        assert!(read(&mut input).unwrap().is_none());
        let cut = &out[..out.len() - 20];
        assert!(matches!(read(&mut &cut[..]), Err(FrameError::Io(_))), "cut");
        let mut bad = out.clone();
        bad[0] = 0; // data length 0: the spans point outside
        assert!(matches!(
            read(&mut bad.as_slice()),
            Err(FrameError::Spans(_))
        ));
    }
}
