//! What `weir run` shows while a job runs: a live display on a terminal
//! (records in/out, throughput, backpressure per node, the last checkpoint,
//! and, for a job with event time, each source's and operator's watermark
//! and pending timers), or a plain progress line every few seconds when
//! stderr is not a terminal.
//! While the live display is shown, everything written to stderr goes
//! through [`crate::output::stderr`], so it prints above the display.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use weir::metrics::{JobMetrics, NodeKind};

/// A running progress display; [`Progress::stop`] clears it.
pub struct Progress {
    /// Dropped to stop the thread: it wakes at once, so a job's end never
    /// waits for the display's next refresh.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `metrics` on stderr: live on a terminal, else a plain
    /// line every `plain_every`.
    pub fn start(metrics: Arc<JobMetrics>, plain_every: Duration) -> Progress {
        let (stop, stopped) = mpsc::channel();
        let live = std::io::stderr().is_terminal();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                if live {
                    run_live(&metrics, &stopped)
                } else {
                    run_plain(&metrics, &stopped, plain_every)
                }
            })
            .ok();
        Progress {
            stop: Some(stop),
            thread,
        }
    }

    /// Stops and clears the display.
    pub fn stop(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits up to `period`; true when the display is to stop (its
/// [`Progress`] stopped or dropped), which ends the wait at once.
fn stopped_within(stop: &Receiver<()>, period: Duration) -> bool {
    match stop.recv_timeout(period) {
        Err(RecvTimeoutError::Timeout) => false,
        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
    }
}

/// Previous totals, to compute rates.
struct Rates {
    at: Instant,
    last: Vec<(u64, u64, u64)>,
}

impl Rates {
    fn new(m: &JobMetrics) -> Self {
        Rates {
            at: Instant::now(),
            last: vec![(0, 0, 0); m.nodes.len()],
        }
    }

    /// One line per node: totals, rate per second, share of time blocked,
    /// and its event time ([`crate::event_time::node_status`]).
    fn lines(&mut self, m: &JobMetrics) -> Vec<String> {
        let dt = self.at.elapsed().as_secs_f64().max(1e-3);
        self.at = Instant::now();
        let (event_time, now) = (m.has_event_time(), crate::event_time::now_ms());
        let width = m.nodes.iter().map(|n| n.0.len()).max().unwrap_or(0);
        let mut out = Vec::with_capacity(m.nodes.len());
        for ((id, kind, n), last) in m.nodes.iter().zip(&mut self.last) {
            let (rin, rout, blocked) = (
                n.records_in.load(Relaxed),
                n.records_out.load(Relaxed),
                n.blocked_ns.load(Relaxed),
            );
            let rate = match kind {
                NodeKind::Source => (rout - last.1) as f64 / dt,
                _ => (rin - last.0) as f64 / dt,
            };
            let pressure = ((blocked - last.2) as f64 / 1e9 / dt * 100.0).min(100.0);
            *last = (rin, rout, blocked);
            let skipped = n.records_skipped.load(Relaxed) + n.records_bad.total();
            let counts = match kind {
                NodeKind::Source if skipped > 0 => {
                    format!("out {rout:>12}  skipped {skipped:>12}")
                }
                NodeKind::Source => format!("out {rout:>12}"),
                NodeKind::Operator => format!("in {rin:>12}  out {rout:>12}"),
                NodeKind::Sink => format!("in {rin:>12}"),
            };
            out.push(format!(
                "{:<8} {id:<width$}  {counts}  {:>10.0}/s  backpressure {pressure:>3.0}%{}",
                kind.name(),
                rate,
                crate::event_time::node_status(n, *kind, event_time, now)
            ));
        }
        out
    }
}

fn checkpoint_line(m: &JobMetrics, started: Instant) -> String {
    let c = &m.checkpoints;
    let last = c.last_id.load(Relaxed);
    let ckpt = if last == 0 {
        "no checkpoint yet".to_string()
    } else {
        format!(
            "checkpoint {last}: {} ms, alignment {} ms, {} bytes",
            c.last_duration_ms.load(Relaxed),
            c.last_alignment_ms.load(Relaxed),
            c.last_bytes.load(Relaxed)
        )
    };
    format!(
        "job `{}`  {:.1} s  {ckpt}",
        m.job,
        started.elapsed().as_secs_f64()
    )
}

fn run_live(m: &JobMetrics, stop: &Receiver<()>) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4));
    let style = ProgressStyle::with_template("{msg}").expect("a valid template");
    let header = multi.add(ProgressBar::new_spinner().with_style(style.clone()));
    let bars: Vec<ProgressBar> = m
        .nodes
        .iter()
        .map(|_| multi.add(ProgressBar::new_spinner().with_style(style.clone())))
        .collect();
    crate::output::attach(&multi);
    let (started, mut rates) = (Instant::now(), Rates::new(m));
    loop {
        header.set_message(checkpoint_line(m, started));
        for (bar, line) in bars.iter().zip(rates.lines(m)) {
            bar.set_message(format!("  {line}"));
        }
        if stopped_within(stop, Duration::from_millis(250)) {
            break;
        }
    }
    for b in bars.iter().chain([&header]) {
        b.finish_and_clear();
    }
    let _ = multi.clear();
    crate::output::detach();
}

fn run_plain(m: &JobMetrics, stop: &Receiver<()>, every: Duration) {
    let (started, mut rates) = (Instant::now(), Rates::new(m));
    while !stopped_within(stop, every) {
        let mut text = format!("progress: {}\n", checkpoint_line(m, started));
        for l in rates.lines(m) {
            text.push_str(&format!("progress:   {l}\n"));
        }
        crate::output::stderr(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's end does not wait for the display's next refresh: a stop
    /// ends a wait of an hour at once (a display that slept through its
    /// period would hold this test for that hour).
    #[test]
    fn a_stop_ends_the_wait_for_the_next_refresh() {
        let hour = Duration::from_secs(3600);
        let (stop, stopped) = mpsc::channel();
        drop(stop);
        assert!(stopped_within(&stopped, hour));
        let (stop, stopped) = mpsc::channel();
        stop.send(()).unwrap();
        assert!(stopped_within(&stopped, hour));
        let (_stop, running) = mpsc::channel();
        assert!(!stopped_within(&running, Duration::ZERO));
    }
}
