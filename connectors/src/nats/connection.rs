//! A connection to a NATS server, with the runtime that drives it: the
//! connectors' threads are plain threads, and each connector owns one
//! single-worker runtime on which the client's I/O (pings, reconnects)
//! runs all the time, not only while a connector waits on it.
//!
//! Invariant: a URL is shown in messages without its credentials
//! ([`shown`]).

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use async_nats::ServerAddr;
use async_nats::jetstream;

/// How long the first connection attempt may take before the connector
/// gives up (later reconnects retry forever, with backoff).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client connected to a NATS server, and its runtime.
pub(super) struct Connection {
    runtime: tokio::runtime::Runtime,
    /// The client's JetStream context.
    pub(super) jetstream: jetstream::Context,
    /// The server as messages show it.
    pub(super) server: String,
    /// The server's version, as it announced it (`2.15.1`).
    pub(super) version: String,
}

/// Checks that `url` is a NATS server URL (`nats://host:port`, or
/// `host:port`), for the job file's checks.
pub(super) fn check_url(url: &str) -> Result<(), String> {
    let addr = ServerAddr::from_str(url).map_err(|e| {
        format!(
            "`url` = {:?} is not a NATS server URL ({e}); use e.g. \"nats://127.0.0.1:4222\"",
            shown(url)
        )
    })?;
    match addr.into_inner().scheme() {
        "nats" | "tls" => Ok(()),
        scheme => Err(format!(
            "`url` = {:?}: scheme {scheme}:// is not supported; use nats:// or tls://",
            shown(url)
        )),
    }
}

/// `url` without a user's password or token.
pub(super) fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => url.to_owned(),
        },
        None => match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_owned(),
        },
    }
}

impl Connection {
    /// Connects to `url`, with `name` (the connector's id) as the client's
    /// name on the server and in the log of connection events.
    /// The message of an error says what failed, in one line.
    pub(super) fn open(url: &str, name: &str) -> Result<Connection, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("nats-{name}"))
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the NATS client's runtime: {e}"))?;
        let server = shown(url);
        let options = async_nats::ConnectOptions::new()
            .name(format!("weir {name}"))
            .connection_timeout(CONNECT_TIMEOUT)
            .reconnect_delay_callback(reconnect_delay)
            .event_callback({
                let (name, server) = (name.to_owned(), server.clone());
                move |event| {
                    log_event(&name, &server, &event);
                    async {}
                }
            });
        let connected = runtime.block_on(options.connect(url));
        let client = connected.map_err(|e| {
            format!("cannot connect to {server}: {e}; is nats-server running there (with -js)?")
        })?;
        let version = client.server_info().version;
        // The context starts a task of its own.
        let jetstream = {
            let _inside = runtime.enter();
            jetstream::new(client)
        };
        Ok(Connection {
            runtime,
            jetstream,
            server,
            version,
        })
    }

    /// Runs `future` to completion on the connection's runtime.
    pub(super) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs `future` in the background on the connection's runtime.
    pub(super) fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.spawn(future)
    }
}

/// The release Weir's tests run, as `scripts/services.sh` installs it.
pub(super) const TESTED_VERSION: &str = "2.15.1";

/// Whether a server of `version` serves a consumer with a subject filter
/// that starts at a sequence (the restore of a filtered source) at a few
/// hundred messages a second: 2.9 and older (measured with 2.9.10, Debian
/// 12's; 2.15.1 reads the same restore at full speed).
pub(super) fn slow_filtered_start(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) < (2, 10),
        _ => false,
    }
}

/// Logs a connection event of connector `name`: losing the server is a
/// warning, getting it back a notice.
fn log_event(name: &str, server: &str, event: &async_nats::Event) {
    use async_nats::Event;
    match event {
        Event::Disconnected => {
            tracing::warn!("`{name}`: lost the connection to {server}; reconnecting")
        }
        Event::Connected => tracing::info!("`{name}`: connected to {server}"),
        Event::ServerError(_) | Event::ClientError(_) | Event::SlowConsumer(_) => {
            tracing::warn!("`{name}`: {server}: {event}")
        }
        _ => tracing::debug!("`{name}`: {server}: {event}"),
    }
}

/// The wait before reconnect attempt `attempts`: 100 ms doubling to 5 s.
fn reconnect_delay(attempts: usize) -> Duration {
    let exp = attempts.saturating_sub(1).min(6) as u32;
    Duration::from_millis(100 << exp).min(Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_shown_without_credentials() {
        check_url("nats://127.0.0.1:4222").unwrap();
        check_url("127.0.0.1:4222").unwrap();
        let err = check_url("http://x:1").unwrap_err();
        assert!(
            err.contains("not a NATS server URL") || err.contains("not supported"),
            "{err}"
        );
        assert_eq!(shown("nats://u:secret@h:1"), "nats://***@h:1");
        assert_eq!(shown("u:secret@h:1"), "***@h:1");
        assert_eq!(shown("nats://h:1"), "nats://h:1");
    }

    #[test]
    fn servers_before_2_10_are_slow_at_filtered_starts() {
        for slow in ["2.9.10", "2.9.25", "2.2.0", "1.4.1"] {
            assert!(slow_filtered_start(slow), "{slow}");
        }
        for fast in ["2.10.0", "2.15.1", "2.15.1-beta.1", "3.0.0", "", "dev"] {
            assert!(!slow_filtered_start(fast), "{fast}");
        }
    }

    #[test]
    fn reconnects_back_off_to_five_seconds() {
        assert_eq!(reconnect_delay(1), Duration::from_millis(100));
        assert_eq!(reconnect_delay(2), Duration::from_millis(200));
        assert_eq!(reconnect_delay(50), Duration::from_secs(5));
    }
}
