//! The in-flight data of an unaligned checkpoint: the batches an instance
//! received after it took checkpoint `n`'s snapshot, on channels that had
//! not yet delivered barrier `n`, up to that barrier (see
//! [`crate::dataflow::align`], "Overtaking"). They are processed after the
//! snapshot, so their effect is not in the instance's state of `n`; the
//! checkpoint stores them, and a restore of `n` replays them to the
//! instance before any new input.
//!
//! Encoding (the `inflight` table of the checkpoint store,
//! `docs/checkpoints.md`): a sequence of frames, one per batch in the order
//! the instance received them, each the batch's input port (a little-endian
//! `u32`) followed by the batch as a `frame` (the lengths of its data and
//! spans, then both). No header: the concatenation of two encodings is the
//! encoding of their frames in order, and an empty buffer holds no batch.
//!
//! Invariant: [`decode`] of [`InFlight::encode`] gives back every
//! `(port, batch)` pushed, in push order.

use std::io::Read;

use crate::dataflow::batch::Batch;
use crate::dataflow::frame::{self, FrameError};

/// Batches recorded for one checkpoint, with their input ports, in
/// arrival order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InFlight {
    frames: Vec<(u32, Batch)>,
    bytes: usize,
}

impl InFlight {
    /// Records `batch`, received on input port `port`.
    pub fn push(&mut self, port: u32, batch: Batch) {
        let (data, spans) = batch.parts();
        self.bytes += 12 + data.len() + spans.len();
        self.frames.push((port, batch));
    }

    /// Whether no batch was recorded.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Bytes of the encoding.
    pub fn encoded_len(&self) -> usize {
        self.bytes
    }

    /// The recorded batches, in arrival order.
    pub fn frames(&self) -> &[(u32, Batch)] {
        &self.frames
    }

    /// The recorded batches, in arrival order, taken.
    pub fn into_frames(self) -> Vec<(u32, Batch)> {
        self.frames
    }

    /// The encoding described in the [module documentation](self).
    ///
    /// ```
    /// use weir::Batch;
    /// use weir::dataflow::inflight::{InFlight, decode};
    /// let mut b = Batch::new();
    /// b.push(Some(b"k"), b"v", Some(1));
    /// let mut f = InFlight::default();
    /// f.push(1, b.clone());
    /// let bytes = f.encode();
    /// assert_eq!(bytes.len(), f.encoded_len());
    /// assert_eq!(decode(&bytes).unwrap(), [(1, b)]);
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes);
        for (port, batch) in &self.frames {
            out.extend_from_slice(&port.to_le_bytes());
            frame::write(&mut out, batch).expect("writing to a Vec");
        }
        out
    }
}

/// Why in-flight data could not be decoded (a damaged store).
#[derive(Debug, thiserror::Error)]
#[error("in-flight data is damaged: {0}")]
pub struct BadInFlight(String);

/// The `(input port, batch)` frames of an encoding, in their order.
pub fn decode(mut bytes: &[u8]) -> Result<Vec<(u32, Batch)>, BadInFlight> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut port = [0u8; 4];
        bytes
            .read_exact(&mut port)
            .map_err(|_| BadInFlight("a frame is cut in its port".into()))?;
        let batch = match frame::read(&mut bytes) {
            Ok(Some(batch)) => batch,
            Ok(None) => return Err(BadInFlight("a frame has a port and no batch".into())),
            Err(FrameError::Io(_)) => return Err(BadInFlight("a frame is cut".into())),
            Err(e @ (FrameError::Spans(_) | FrameError::Checksum)) => {
                return Err(BadInFlight(e.to_string()));
            }
        };
        out.push((u32::from_le_bytes(port), batch));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: &[&str]) -> Batch {
        let mut b = Batch::new();
        for v in values {
            b.push(Some(v.as_bytes()), v.as_bytes(), Some(v.len() as i64));
        }
        b
    }

    #[test]
    fn frames_come_back_in_order_and_encodings_concatenate() {
        let mut f = InFlight::default();
        assert!(f.encode().is_empty() && f.is_empty());
        f.push(0, batch(&["a", "bb"]));
        f.push(2, batch(&[]));
        f.push(1, batch(&["ccc"]));
        let bytes = f.encode();
        assert_eq!(bytes.len(), f.encoded_len());
        assert_eq!(decode(&bytes).unwrap(), f.frames());
        let mut twice = bytes.clone();
        twice.extend_from_slice(&bytes);
        let back = decode(&twice).unwrap();
        assert_eq!(back.len(), 6);
        assert_eq!(&back[3..], f.frames());
        assert!(decode(&[]).unwrap().is_empty());
    }

    #[test]
    fn damaged_encodings_are_refused() {
        let mut f = InFlight::default();
        f.push(0, batch(&["a"]));
        let bytes = f.encode();
        for cut in [1, 4, 6, bytes.len() - 1] {
            let e = decode(&bytes[..cut]).unwrap_err().to_string();
            assert!(e.contains("damaged"), "{cut}: {e}");
        }
        let mut bad = bytes.clone();
        bad[4] = 0; // the data length: now the span points outside
        assert!(decode(&bad).is_err());
    }
}
