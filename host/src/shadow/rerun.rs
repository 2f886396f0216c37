//! Running recorded steps on an instance: each call made again as the
//! instance thread made it (`threads/instance.rs`), with the plugin's
//! clock pinned to the step's time, and what each call emitted collected
//! instead of sent anywhere.

use std::time::Duration;

use serde::Serialize;

use crate::dataflow::batch::Batch;
use crate::dataflow::recording::{Call, Step};
use crate::keyed::timers::Domain;
use crate::wasm::{InstanceError, OperatorInstance};

/// What one instance did on the steps it was given.
#[derive(Debug, Default)]
pub(super) struct Run {
    /// Per step given, the non-empty batches emitted, with their ports, in
    /// port order; steps after a trap are missing.
    pub outputs: Vec<Vec<(u32, Batch)>>,
    /// What went wrong, in step order.
    pub errors: Vec<StepError>,
    /// Records given to `process`.
    pub records_in: u64,
    /// CPU time of this thread in the plugin's calls.
    pub cpu: Duration,
    /// The most linear memory the instance had.
    pub peak_memory: usize,
    /// Per step, the host calls it made, when traced.
    pub host_calls: Vec<Vec<String>>,
}

/// A call that failed or records the plugin refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepError {
    /// The instance.
    pub instance: u32,
    /// The checkpoint whose epoch the step is in.
    pub epoch: u64,
    /// The step's index in its epoch's recording.
    pub step: usize,
    /// The call (`process`, `on-checkpoint`, ...).
    pub call: &'static str,
    /// What went wrong.
    pub kind: Failure,
    /// The message.
    pub message: String,
}

/// How a call went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Failure {
    /// The plugin trapped: the instance is lost, later steps do not run.
    Trap,
    /// The plugin returned an error.
    Error,
    /// The plugin refused records (`reject`).
    Rejected,
}

impl Failure {
    /// As reports write it: `trap`, `error`, `rejected`.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Trap => "trap",
            Failure::Error => "error",
            Failure::Rejected => "rejected",
        }
    }
}

/// Where a step is: its instance, epoch and index.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    pub instance: u32,
    pub epoch: u64,
    pub step: usize,
}

impl Run {
    /// Makes `step` again on `instance`; false once the instance trapped
    /// (it must not be called again).
    pub(super) fn step(&mut self, instance: &mut OperatorInstance, step: &Step, at: At) -> bool {
        instance.pin_clock(Some(step.time));
        let started = thread_cpu();
        let result = match &step.call {
            Call::Process { port, batch } => self.process(instance, *port, batch, step, at),
            Call::Watermark(w) => {
                instance.set_watermark(*w);
                instance.fire_timers(Domain::EventTime, *w).map(drop)
            }
            Call::Timers => instance
                .fire_timers(Domain::ProcessingTime, step.time)
                .map(drop),
            Call::Checkpoint(id) => instance.on_checkpoint(*id),
            Call::Finish => instance.finish(),
        };
        self.cpu += thread_cpu().saturating_sub(started);
        self.host_calls.push(instance.take_host_calls());
        self.peak_memory = self.peak_memory.max(instance.memory_used());
        let mut emitted = Vec::new();
        for port in 0..instance.output_ports() as u32 {
            let batch = instance.take_output_batch(port);
            if !batch.is_empty() {
                emitted.push((port, batch));
            }
        }
        let Err(error) = result else {
            self.outputs.push(emitted);
            return true;
        };
        let trapped = !matches!(error, InstanceError::Returned { .. });
        self.errors.push(StepError {
            instance: at.instance,
            epoch: at.epoch,
            step: at.step,
            call: step.call.name(),
            kind: if trapped {
                Failure::Trap
            } else {
                Failure::Error
            },
            message: error.to_string(),
        });
        if !trapped {
            self.outputs.push(emitted);
        }
        !trapped
    }

    /// `process` of a recorded batch, given as this plugin reads it (rows
    /// or their JSON text).
    fn process(
        &mut self,
        instance: &mut OperatorInstance,
        port: u32,
        batch: &Batch,
        step: &Step,
        at: At,
    ) -> Result<(), InstanceError> {
        self.records_in += batch.len() as u64;
        // The batch as the recorded plugin got it: rows that one read as
        // rows, this one may read as text (the recording checked them).
        let converted;
        let batch = match !instance.reads_rows() && batch.has_rows() {
            true => {
                converted = batch.clone().rows_as_text();
                converted.as_ref().unwrap_or(batch)
            }
            false => batch,
        };
        instance.process_batch(port, batch)?;
        for (_, error) in instance.take_rejected(batch) {
            self.errors.push(StepError {
                instance: at.instance,
                epoch: at.epoch,
                step: at.step,
                call: step.call.name(),
                kind: Failure::Rejected,
                message: error.to_string(),
            });
        }
        Ok(())
    }
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant
    // every Linux has.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    match ok {
        true => Duration::new(t.tv_sec as u64, t.tv_nsec as u32),
        false => Duration::ZERO,
    }
}
