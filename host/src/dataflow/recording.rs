//! Recorded input: every call an operator instance made into its plugin
//! in one checkpoint epoch, with what each call emitted, so that the epoch
//! can be run again from the checkpoint before it (`weir replay`) or given
//! to another plugin (`weir shadow`).
//!
//! An epoch's recording is a sequence of [`Step`]s: a call ([`Call`]: a
//! batch processed, the watermark advanced with the event-time timers it
//! fired, the processing-time timers fired, `on-checkpoint`, `finish`),
//! the processing time the plugin saw during it (`processing-time` returns
//! one value per call while an instance records), and the batches the
//! call emitted, per output port. The batch of a `Process` step is the one
//! the plugin was given: rows already written as JSON text for a plugin
//! that reads text, bad records a replay found already left out.
//!
//! Encoding (the `recordings` table of the checkpoint store,
//! `docs/checkpoints.md`): per step a tag byte (1 process, 2 watermark, 3
//! processing-time timers, 4 on-checkpoint, 5 finish), the call's time (an
//! `i64`), the call's fields (process: the input port, a `u32`, then the
//! batch as a `frame`; watermark: the `i64` watermark; on-checkpoint: the
//! `u64` id), then per output batch the tag `0x80`, the output port and the
//! batch as a frame. Integers little-endian. No header: the concatenation
//! of two recordings is the recording of their steps in order.
//!
//! Invariant: [`decode`] of what a [`Recorder`] wrote gives back every
//! step, in order, with its outputs in the order they were recorded.

use std::io::Read;

use crate::dataflow::batch::Batch;
use crate::dataflow::frame::{self, FrameError};

const PROCESS: u8 = 1;
const WATERMARK: u8 = 2;
const TIMERS: u8 = 3;
const CHECKPOINT: u8 = 4;
const FINISH: u8 = 5;
const OUTPUT: u8 = 0x80;

/// One call into the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `process` of `batch` on input `port`.
    Process {
        /// The input port.
        port: u32,
        /// The records, as the plugin got them.
        batch: Batch,
    },
    /// The watermark advanced to `.0`: the event-time timers it covers
    /// fired.
    Watermark(i64),
    /// The processing-time timers due at the step's time fired.
    Timers,
    /// `on-checkpoint` of checkpoint `.0`.
    Checkpoint(u64),
    /// `finish`, at the end of input.
    Finish,
}

impl Call {
    /// The call as a report names it.
    pub fn name(&self) -> &'static str {
        match self {
            Call::Process { .. } => "process",
            Call::Watermark(_) => "watermark",
            Call::Timers => "processing-time timers",
            Call::Checkpoint(_) => "on-checkpoint",
            Call::Finish => "finish",
        }
    }
}

/// A recorded call and what it emitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What `processing-time` returned during the call (Unix ms).
    pub time: i64,
    /// The call.
    pub call: Call,
    /// The non-empty batches it emitted, with their output ports, in port
    /// order.
    pub outputs: Vec<(u32, Batch)>,
}

/// Records an instance's calls of one epoch, encoded as they happen.
#[derive(Debug, Default)]
pub struct Recorder {
    bytes: Vec<u8>,
}

impl Recorder {
    /// Records `process` of `batch` on input `port` at `time`.
    pub fn process(&mut self, time: i64, port: u32, batch: &Batch) {
        self.head(PROCESS, time);
        self.bytes.extend_from_slice(&port.to_le_bytes());
        frame::write(&mut self.bytes, batch).expect("writing to a Vec");
    }

    /// Records the watermark's advance to `watermark` at `time`.
    pub fn watermark(&mut self, time: i64, watermark: i64) {
        self.head(WATERMARK, time);
        self.bytes.extend_from_slice(&watermark.to_le_bytes());
    }

    /// Records the firing of the processing-time timers due at `time`.
    pub fn timers(&mut self, time: i64) {
        self.head(TIMERS, time);
    }

    /// Records `on-checkpoint(id)` at `time`.
    pub fn checkpoint(&mut self, time: i64, id: u64) {
        self.head(CHECKPOINT, time);
        self.bytes.extend_from_slice(&id.to_le_bytes());
    }

    /// Records `finish` at `time`.
    pub fn finish(&mut self, time: i64) {
        self.head(FINISH, time);
    }

    /// Records `batch`, emitted on output `port` by the last call.
    pub fn output(&mut self, port: u32, batch: &Batch) {
        self.bytes.push(OUTPUT);
        self.bytes.extend_from_slice(&port.to_le_bytes());
        frame::write(&mut self.bytes, batch).expect("writing to a Vec");
    }

    fn head(&mut self, tag: u8, time: i64) {
        self.bytes.push(tag);
        self.bytes.extend_from_slice(&time.to_le_bytes());
    }

    /// Bytes recorded so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Ends the epoch: its encoding, leaving the recorder empty.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.bytes)
    }

    /// Drops what was recorded.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }
}

/// Why a recording could not be decoded (a damaged store).
#[derive(Debug, thiserror::Error)]
#[error("a recording is damaged: {0}")]
pub struct BadRecording(String);

/// The steps of a recording, in order.
pub fn decode(mut bytes: &[u8]) -> Result<Vec<Step>, BadRecording> {
    let mut steps: Vec<Step> = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        bytes = rest;
        if tag == OUTPUT {
            let port = u32::from_le_bytes(take(&mut bytes, "an output's port")?);
            let batch = read_batch(&mut bytes)?;
            let step = steps
                .last_mut()
                .ok_or_else(|| BadRecording("an output before any call".into()))?;
            step.outputs.push((port, batch));
            continue;
        }
        if !(PROCESS..=FINISH).contains(&tag) {
            return Err(BadRecording(format!("unknown step tag {tag}")));
        }
        let time = i64::from_le_bytes(take(&mut bytes, "a call's time")?);
        let call = match tag {
            PROCESS => {
                let port = u32::from_le_bytes(take(&mut bytes, "a batch's port")?);
                let batch = read_batch(&mut bytes)?;
                Call::Process { port, batch }
            }
            WATERMARK => Call::Watermark(i64::from_le_bytes(take(&mut bytes, "a watermark")?)),
            TIMERS => Call::Timers,
            CHECKPOINT => {
                Call::Checkpoint(u64::from_le_bytes(take(&mut bytes, "a checkpoint id")?))
            }
            _ => Call::Finish,
        };
        steps.push(Step {
            time,
            call,
            outputs: Vec::new(),
        });
    }
    Ok(steps)
}

fn take<const N: usize>(bytes: &mut &[u8], what: &str) -> Result<[u8; N], BadRecording> {
    let mut out = [0u8; N];
    bytes
        .read_exact(&mut out)
        .map_err(|_| BadRecording(format!("cut in {what}")))?;
    Ok(out)
}

fn read_batch(bytes: &mut &[u8]) -> Result<Batch, BadRecording> {
    match frame::read(bytes) {
        Ok(Some(batch)) => Ok(batch),
        Ok(None) | Err(FrameError::Io(_)) => Err(BadRecording("a batch is cut".into())),
        Err(e @ (FrameError::Spans(_) | FrameError::Checksum)) => Err(BadRecording(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: &[&str]) -> Batch {
        let mut b = Batch::new();
        for (i, v) in values.iter().enumerate() {
            let key = (i % 2 == 0).then_some(v.as_bytes());
            b.push(key, v.as_bytes(), Some(i as i64 - 1));
        }
        b
    }

    fn steps() -> Vec<Step> {
        let step = |time, call, outputs| Step {
            time,
            call,
            outputs,
        };
        vec![
            step(
                10,
                Call::Process {
                    port: 1,
                    batch: batch(&["a", "b", "c"]),
                },
                vec![(0, batch(&["x"])), (2, batch(&["y", "z"]))],
            ),
            step(-5, Call::Watermark(i64::MIN), vec![]),
            step(11, Call::Timers, vec![(0, batch(&[""]))]),
            step(
                12,
                Call::Process {
                    port: 0,
                    batch: Batch::new(),
                },
                vec![],
            ),
            step(13, Call::Checkpoint(u64::MAX), vec![(1, batch(&["c"]))]),
            step(14, Call::Finish, vec![]),
        ]
    }

    fn record(steps: &[Step]) -> Vec<u8> {
        let mut r = Recorder::default();
        for s in steps {
            match &s.call {
                Call::Process { port, batch } => r.process(s.time, *port, batch),
                Call::Watermark(w) => r.watermark(s.time, *w),
                Call::Timers => r.timers(s.time),
                Call::Checkpoint(id) => r.checkpoint(s.time, *id),
                Call::Finish => r.finish(s.time),
            }
            for (port, b) in &s.outputs {
                r.output(*port, b);
            }
        }
        let len = r.len();
        let bytes = r.take();
        assert_eq!(bytes.len(), len);
        assert!(r.is_empty());
        bytes
    }

    #[test]
    fn a_recording_decodes_to_its_steps_and_concatenations_to_both() {
        let all = steps();
        assert_eq!(decode(&record(&all)).unwrap(), all);
        let (a, b) = all.split_at(3);
        let joined = [record(a), record(b)].concat();
        assert_eq!(decode(&joined).unwrap(), all);
        assert_eq!(decode(&[]).unwrap(), []);
    }

    #[test]
    fn a_cut_recording_is_refused_or_a_prefix_of_its_steps() {
        let all = steps();
        let bytes = record(&all);
        let mut prefixes = 0;
        for cut in 0..bytes.len() {
            let Ok(got) = decode(&bytes[..cut]) else {
                continue;
            };
            prefixes += 1;
            // Whole steps, the last of them with a prefix of its outputs.
            let Some((last, whole)) = got.split_last() else {
                continue;
            };
            assert_eq!(whole, &all[..whole.len()], "cut at {cut}");
            let want = &all[whole.len()];
            assert_eq!(
                (last.time, &last.call),
                (want.time, &want.call),
                "cut at {cut}"
            );
            assert!(want.outputs.starts_with(&last.outputs), "cut at {cut}");
        }
        // One per step start and per output end: 6 steps, 4 outputs, and 0.
        assert_eq!(prefixes, 1 + 5 + 4);
        assert!(
            decode(&[9])
                .unwrap_err()
                .to_string()
                .contains("unknown step tag 9")
        );
        let e = decode(&[OUTPUT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(e.to_string().contains("an output before any call"), "{e}");
    }
}
