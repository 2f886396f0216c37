//! A [`Batch`] framed for a byte stream: the lengths of its data and of its
//! packed spans (two little-endian `u32`s), then both ([`Batch::parts`]);
//! a *checked* frame is followed by the CRC-32 (little-endian) of all of
//! that. A staged sink's epoch file (`connectors/staged.rs`) is a sequence
//! of checked frames; the in-flight data of an unaligned checkpoint
//! ([`crate::dataflow::inflight`]) of plain ones (the checkpoint store
//! checks the whole row).
//!
//! Invariant: [`read`] gives back exactly the batch [`write`] framed, and
//! refuses a frame whose spans point outside its data (the batch invariant
//! of [`crate::dataflow::batch`]); [`read_checked`] also refuses a frame
//! whose checksum does not match.

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
    /// A checked frame's bytes do not match its checksum.
    #[error("a frame's checksum does not match its bytes (changed on disk)")]
    Checksum,
}

/// Appends `batch` to `out` as one frame.
///
/// # Panics
/// If the batch's data or spans are 4 GiB or larger (a batch is at most a
/// few MiB).
pub(crate) fn write(out: &mut impl Write, batch: &Batch) -> io::Result<()> {
    let (data, spans) = batch.parts();
    for part in [&lengths(batch)[..], data, spans] {
        out.write_all(part)?;
    }
    Ok(())
}

/// A frame's first 8 bytes: the lengths of the batch's data and spans.
fn lengths(batch: &Batch) -> [u8; 8] {
    let (data, spans) = batch.parts();
    let len = |part: &[u8]| u32::try_from(part.len()).expect("a batch part under 4 GiB");
    let mut lengths = [0u8; 8];
    lengths[..4].copy_from_slice(&len(data).to_le_bytes());
    lengths[4..].copy_from_slice(&len(spans).to_le_bytes());
    lengths
}

/// Appends `batch` to `out` as one checked frame.
///
/// # Panics
/// As [`write`].
pub(crate) fn write_checked(out: &mut impl Write, batch: &Batch) -> io::Result<()> {
    let (data, spans) = batch.parts();
    let mut crc = crc32fast::Hasher::new();
    for part in [&lengths(batch)[..], data, spans] {
        out.write_all(part)?;
        crc.update(part);
    }
    out.write_all(&crc.finalize().to_le_bytes())
}

/// The next frame of `input`, or `None` at its end (between frames).
pub(crate) fn read(input: &mut impl Read) -> Result<Option<Batch>, FrameError> {
    let Some((_, data, spans)) = read_parts(input)? else {
        return Ok(None);
    };
    Batch::from_parts(data, spans)
        .map(Some)
        .map_err(FrameError::Spans)
}

/// The next checked frame of `input`, or `None` at its end.
pub(crate) fn read_checked(input: &mut impl Read) -> Result<Option<Batch>, FrameError> {
    let Some((lengths, data, spans)) = read_parts(input)? else {
        return Ok(None);
    };
    let mut sum = [0u8; 4];
    input.read_exact(&mut sum)?;
    let mut crc = crc32fast::Hasher::new();
    for part in [&lengths[..], &data, &spans] {
        crc.update(part);
    }
    if crc.finalize() != u32::from_le_bytes(sum) {
        return Err(FrameError::Checksum);
    }
    Batch::from_parts(data, spans)
        .map(Some)
        .map_err(FrameError::Spans)
}

/// A frame as read: its lengths, data and spans.
type Parts = ([u8; 8], Vec<u8>, Vec<u8>);

/// The next frame's parts, or `None` at the end.
fn read_parts(input: &mut impl Read) -> Result<Option<Parts>, FrameError> {
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
    Ok(Some((lengths, data, spans)))
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

    #[test]
    fn a_checked_frame_refuses_every_changed_bit() {
        let mut b = Batch::new();
        b.push(Some(b"k"), b"value", Some(7));
        let mut out = Vec::new();
        write_checked(&mut out, &b).unwrap();
        assert_eq!(read_checked(&mut out.as_slice()).unwrap(), Some(b));
        for at in 0..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[at] ^= 1 << bit;
                assert!(
                    read_checked(&mut bad.as_slice()).is_err(),
                    "bit {bit} of {at}"
                );
            }
        }
    }
}
