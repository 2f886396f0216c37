//! Running `weir` on a job in a temporary folder, with crashes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::plugins;

/// A small deterministic generator, so tests need no dependencies and can
/// print their seed.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// The seed for randomized tests: `WEIR_TEST_SEED` or a fixed default.
pub fn seed() -> u64 {
    std::env::var("WEIR_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe_f00d)
}

/// A job file and its inputs in a temporary folder.
pub struct JobDir {
    dir: tempfile::TempDir,
    weir: PathBuf,
}

impl JobDir {
    /// Writes `job` (where `{plugins}` stands for the folder of the built
    /// plugin components) and `files` into a new temporary folder.
    pub fn new(weir: &str, job: &str, files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let plugin_dir = Path::new(plugins::WORD_COUNT).parent().unwrap();
        let job = job.replace("{plugins}", plugin_dir.to_str().unwrap());
        std::fs::write(dir.path().join("job.toml"), job).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        JobDir {
            dir,
            weir: PathBuf::from(weir),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.weir);
        c.arg("run")
            .arg(self.path().join("job.toml"))
            .args(args)
            .env_remove("RUST_LOG");
        c
    }

    /// Runs the job to the end with `args`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs the job and asserts it succeeded; returns stderr.
    pub fn run_ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "weir run failed: {stderr}");
        stderr
    }

    /// Starts the job, kills it with SIGKILL after a random delay in
    /// `window`, `kills` times in a row; returns how many runs were killed
    /// before they finished on their own.
    pub fn run_killed(&self, kills: usize, window: (u64, u64), rng: &mut XorShift) -> usize {
        let mut killed = 0;
        for _ in 0..kills {
            let mut child = self
                .command(&[])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_millis(rng.range(window.0, window.1));
            loop {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if Instant::now() >= deadline {
                    child.kill().unwrap(); // SIGKILL
                    child.wait().unwrap();
                    killed += 1;
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        killed
    }

    /// The lines of an output file as a multiset.
    pub fn lines(&self, file: &str) -> BTreeMap<String, usize> {
        multiset(&std::fs::read_to_string(self.path().join(file)).unwrap_or_default())
    }
}

/// The lines of `text` as a multiset.
pub fn multiset(text: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

/// `lines` lines of 1 to 8 words `Word<N>` (N below `vocabulary`), each line
/// ending in ", done." so that the line splits into a few more words.
pub fn wordcount_input(rng: &mut XorShift, vocabulary: u64, lines: usize) -> String {
    let mut text = String::new();
    for _ in 0..lines {
        let n = rng.range(1, 9);
        let words: Vec<String> = (0..n)
            .map(|_| format!("Word{}", rng.range(0, vocabulary)))
            .collect();
        text.push_str(&words.join(" "));
        text.push_str(", done.\n");
    }
    text
}
