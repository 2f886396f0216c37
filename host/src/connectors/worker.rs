//! A sink's worker thread: the slow steps of a checkpoint (fsyncs,
//! renames, deliveries to a server), done off the sink thread so that it
//! keeps writing the next epoch meanwhile.
//!
//! Invariant: requests run one at a time in the order they were sent, so
//! every effect happens in the same order as if the sink thread did the
//! steps inline; closing the worker waits for every request sent.

use std::path::Path;
use std::thread::JoinHandle;

use crossbeam_channel::{Sender, unbounded};

use crate::connectors::sink::SinkError;

/// The worker thread of one sink, running requests of type `R`.
pub(crate) struct Worker<R> {
    /// Where the sink sends its requests; `None` once closed.
    requests: Option<Sender<R>>,
    thread: Option<JoinHandle<()>>,
    /// The sink's id and what it writes, for messages.
    sink: String,
    place: String,
}

impl<R: Send + 'static> Worker<R> {
    /// Starts the worker of sink `sink`, which writes `place` (a path, for
    /// messages), running `perform` on each request.
    pub(crate) fn start(
        sink: &str,
        place: &Path,
        mut perform: impl FnMut(R) + Send + 'static,
    ) -> Self {
        let (requests, rx) = unbounded::<R>();
        let thread = std::thread::Builder::new()
            .name(format!("sink-io-{sink}"))
            .spawn(move || rx.into_iter().for_each(&mut perform))
            .expect("spawning a sink's worker thread");
        Worker {
            requests: Some(requests),
            thread: Some(thread),
            sink: sink.to_owned(),
            place: place.display().to_string(),
        }
    }

    /// Queues `request` after those sent before.
    pub(crate) fn send(&self, request: R) -> Result<(), SinkError> {
        let sent = self.requests.as_ref().map(|r| r.send(request).is_ok());
        if sent == Some(true) {
            return Ok(());
        }
        Err(self.error("the sink's worker thread stopped"))
    }

    /// Waits until every request sent so far has run, then ends the thread.
    pub(crate) fn close(&mut self) -> Result<(), SinkError> {
        drop(self.requests.take());
        match self.thread.take().map(JoinHandle::join) {
            Some(Err(_)) => Err(self.error("the sink's worker thread panicked")),
            _ => Ok(()),
        }
    }

    fn error(&self, message: &str) -> SinkError {
        SinkError::Io {
            sink: self.sink.clone(),
            path: self.place.clone(),
            error: std::io::Error::other(message.to_owned()),
        }
    }
}

impl<R> Drop for Worker<R> {
    /// Finishes the requested steps (a crash would not, and recovery
    /// handles that).
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_run_in_order_and_close_waits_for_them() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut worker = Worker::start("s", Path::new("p"), move |n: u32| tx.send(n).unwrap());
        for n in 0..100 {
            worker.send(n).unwrap();
        }
        worker.close().unwrap();
        assert_eq!(
            rx.try_iter().collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        assert!(worker.send(1).unwrap_err().to_string().contains("stopped"));
    }

    #[test]
    fn a_panicking_worker_is_an_error_at_close() {
        let mut worker = Worker::start("s", Path::new("p"), |()| panic!("boom"));
        worker.send(()).unwrap();
        let err = worker.close().unwrap_err().to_string();
        assert!(
            err.contains("sink `s`") && err.contains("panicked"),
            "{err}"
        );
    }
}
