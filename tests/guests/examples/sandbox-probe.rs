//! Test fixture (sandbox): reports what the sandbox lets it see, and calls
//! imports at the wrong time or with oversized arguments on request.
//!
//! Config `{"mode": ...}`:
//! - `"report"` (default): writes a line to stdout and to stderr and emits
//!   one JSON record per batch describing its environment: wall clock,
//!   whether the monotonic clock advanced over a 20 ms sleep, a hash with
//!   std's randomly keyed hasher, environment variables, arguments, and
//!   whether the file system is visible;
//! - `"emit-in-open"`, `"emit-in-restore"`: emits where it must not;
//! - `"write-in-snapshot"`: writes state in `snapshot`;
//! - `"big-read"`: stores a value of `kib` KiB, then asks for it `copies`
//!   times in one `get-many`;
//! - `"big-key"`: stores a value under a key of `kib` KiB;
//! - `"state-bomb"`: stores `kib` KiB values under new keys without end;
//! - `"exit"`: calls `std::process::exit(3)` (`wasi:cli/exit`);
//! - `"odd-error"`: returns an error whose message has newlines, terminal
//!   escapes and is `kib` KiB long; `"odd-log"` logs such a message.

use serde::Deserialize;
use weir_sdk::bindings::weir::operator::{emit as raw_emit, state as raw_state};
use weir_sdk::{Context, Error, LogLevel, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct Probe {
    c: Config,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Config {
    mode: String,
    kib: usize,
    copies: usize,
}

fn odd_text(kib: usize) -> String {
    let mut s = String::from("first line\nsecond line \u{1b}[31mred\u{1b}[0m\r\n");
    while s.len() < kib << 10 {
        s.push_str("padding ");
    }
    s
}

impl Operator for Probe {
    fn describe() -> OperatorInfo {
        weir_guests::info("sandbox-probe", "1.0.0")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        if c.mode == "emit-in-open" {
            raw_emit::emit(0, &Record::new("from open"));
        }
        Ok(Probe { c })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        match self.c.mode.as_str() {
            "big-read" => {
                ctx.put(b"big", &vec![7u8; self.c.kib << 10]);
                ctx.flush();
                let keys = vec![b"big".to_vec(); self.c.copies];
                let got = raw_state::get_many(&keys);
                ctx.emit(0, Record::new(got.len().to_string()));
            }
            "big-key" => raw_state::put(&vec![b'k'; self.c.kib << 10], b"v"),
            "state-bomb" => {
                for i in 0u64.. {
                    raw_state::put(&i.to_le_bytes(), &vec![1u8; self.c.kib << 10]);
                }
            }
            "exit" => std::process::exit(3),
            "odd-error" => return Err(Error::Other(odd_text(self.c.kib))),
            "odd-log" => ctx.log(LogLevel::Warn, &odd_text(self.c.kib)),
            _ => {
                use std::hash::BuildHasher;
                println!("probe stdout: {} records", batch.len());
                eprintln!("probe stderr: hello");
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let start = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_millis(20));
                let slept_ns = start.elapsed().as_nanos() as u64;
                let hash = std::collections::hash_map::RandomState::new().hash_one(42u64);
                let report = serde_json::json!({
                    "wall_secs": wall,
                    "slept_ns": slept_ns,
                    "hash": hash.to_string(),
                    "env": std::env::vars().count(),
                    "args": std::env::args().count(),
                    "root_dir": std::fs::read_dir("/").is_ok(),
                    "cwd_file": std::fs::File::open("Cargo.toml").is_ok(),
                });
                ctx.emit(0, Record::json(&report));
            }
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Vec<u8> {
        if self.c.mode == "write-in-snapshot" {
            raw_state::put(b"late", b"write");
        }
        Vec::new()
    }

    fn restore(&mut self, ctx: &mut Context, _state_version: u32, _bytes: &[u8]) -> Result<()> {
        if self.c.mode == "emit-in-restore" {
            ctx.emit(0, Record::new("from restore"));
        }
        Ok(())
    }
}

weir_sdk::export!(Probe);
