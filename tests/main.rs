//! Weir's integration tests, one binary (`cargo test -p weir-cli --test
//! integration`): each module is a file of this folder and runs the real
//! `weir` binary, with the plugins `build.rs` builds and the helpers of
//! `support/` (the crate `weir-tests`). Run one area with a filter, e.g.
//! `cargo test -p weir-cli --test integration kafka::`.

// The command line.
mod cli_errors;
mod cli_inspect;
mod cli_new;
mod cli_output;
mod cli_run;
mod cli_state;
mod control;
mod dashboard;

// Plugins: the example operators, the SDKs, the sandbox, the guest languages.
mod compile_cache;
mod conformance;
mod flat_state;
mod nowasi;
mod plugins;
mod ports;
mod python_sdk;
mod sandbox;

// Jobs: checkpoints, restores, rescaling, hot swap, event time, bad records
// and their replay.
mod bad_records;
mod changes;
mod event_time;
mod hot_swap;
mod large_state;
mod object_store;
mod pipelines;
mod reconcile_streaming;
mod replay;
mod rescale;
mod restart;
mod restore;
mod shadow;
mod unaligned;

// Connectors against private servers, and when each sink's output is visible.
mod delivery;
mod kafka;
mod nats;
mod postgres_cdc;
mod postgres_jobs;
mod postgres_sink;
mod s3_server;
mod schemas;
mod workers;

// Crashes at named steps of the checkpoint protocol (WEIR_FAILPOINTS), per
// sink, and during a live swap and a rescale.
mod failpoints;

// The structure ARCHITECTURE.md promises, checked on the source tree.
mod layout;

// The soak tier (`scripts/soak.sh`; every test is ignored by `cargo test`).
mod soak;
