//! A job in a temporary folder ([`JobDir`]): its job file and inputs, the
//! `weir` commands on it, runs stopped by signals and crashes at observed
//! points (committed output, never a guessed time), and its output files.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::{Outcome, Weir};
use crate::pipeline::{XorShift, multiset};
use crate::running::Running;
use crate::servers::PrivateServer;
use crate::text::assert_lacks;
use crate::wait::{PATIENCE, wait_until};

/// A job file and its inputs in a temporary folder, and the `weir` commands
/// on them.
pub struct JobDir {
    dir: tempfile::TempDir,
    weir: Weir,
    /// Environment variables every `weir` command of the folder gets.
    env: Vec<(String, String)>,
}

impl JobDir {
    /// Writes `job` (where `{plugins}` stands for the folder of the built
    /// plugin components) and `files` (paths in it, folders made) into a
    /// new temporary folder.
    pub fn new(weir: Weir, job: impl Display, files: &[(&str, &str)]) -> Self {
        let j = JobDir {
            dir: tempfile::tempdir().unwrap(),
            weir,
            env: Vec::new(),
        };
        j.write_job(job);
        for (name, text) in files {
            let path = j.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        j
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The job's state folder: its `[checkpoint] dir`, by default
    /// `state/<name>` ([`weir::config::default_state_dir`]).
    pub fn state_dir(&self) -> PathBuf {
        let text = std::fs::read_to_string(self.path().join("job.toml")).unwrap();
        let job: toml::Table = text.parse().unwrap();
        let dir = job.get("checkpoint").and_then(|c| c.get("dir"));
        match dir.and_then(toml::Value::as_str) {
            Some(dir) => self.path().join(dir),
            None => {
                let name = job["name"].as_str().expect("the job's name");
                self.path()
                    .join(weir::config::default_state_dir(name).unwrap())
            }
        }
    }

    /// Replaces the job file with `job` (`{plugins}` as in [`JobDir::new`]).
    pub fn write_job(&self, job: impl Display) {
        let plugin_dir = crate::repo_root().join("plugins/target");
        let job = job
            .to_string()
            .replace("{plugins}", plugin_dir.to_str().unwrap());
        std::fs::write(self.path().join("job.toml"), job).unwrap();
    }

    /// `weir VERB job.toml ARGS`, to adjust before running or spawning it.
    pub fn command(&self, verb: &str, args: &[&str]) -> Command {
        self.command_of(&[verb], args)
    }

    /// `weir WORDS... job.toml ARGS` (a verb with a subcommand:
    /// `deadletter ls`).
    pub fn command_of(&self, words: &[&str], args: &[&str]) -> Command {
        let mut c = self.weir.command(words);
        c.arg(self.path().join("job.toml")).args(args);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Runs `weir VERB job.toml ARGS` to the end.
    pub fn weir(&self, verb: &str, args: &[&str]) -> Outcome {
        Outcome::of(&mut self.command(verb, args))
    }

    /// The folder, with the environment variables `env` added to every
    /// `weir` command run in it (a server's credentials and address:
    /// [`crate::servers::S3::env`]).
    pub fn with_env<K: Into<String>>(mut self, env: impl IntoIterator<Item = (K, String)>) -> Self {
        self.env.extend(env.into_iter().map(|(k, v)| (k.into(), v)));
        self
    }

    /// Runs the job to the end with `args`.
    pub fn run(&self, args: &[&str]) -> Outcome {
        Outcome::of(&mut self.command("run", args))
    }

    /// Runs the job and asserts it succeeded; returns stderr.
    pub fn run_ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.success(), "weir run failed: {}", out.stderr);
        out.stderr
    }

    /// `weir validate job.toml`.
    pub fn validate(&self) -> Outcome {
        self.weir("validate", &[])
    }

    /// `weir VERB state ARGS`: a command on the job's state folder
    /// (`checkpoints`, `state`, `swap`).
    pub fn on_state(&self, verb: &str, args: &[&str]) -> Outcome {
        let mut c = self.weir.command([verb]);
        c.arg(self.state_dir()).args(args);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        Outcome::of(&mut c)
    }

    /// `weir checkpoints state ARGS`, asserted to succeed; returns stdout.
    pub fn checkpoints(&self, args: &[&str]) -> String {
        let out = self.on_state("checkpoints", args);
        assert!(out.success(), "weir checkpoints: {}", out.stderr);
        out.stdout
    }

    /// `weir run job.toml ARGS` spawned and watched: its stderr read line
    /// by line, stdout discarded.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let mut c = self.command("run", args);
        c.stdout(Stdio::null());
        Running::spawn(c)
    }

    /// [`JobDir::spawn`] with stdin a pipe to feed ([`Running::send`]).
    pub fn spawn_fed(&self, args: &[&str]) -> Running {
        let mut c = self.command("run", args);
        c.stdin(Stdio::piped()).stdout(Stdio::null());
        Running::spawn(c)
    }

    /// [`JobDir::spawn_fed`] with stdout read line by line too
    /// ([`Running::next_printed`]).
    pub fn spawn_printing(&self, args: &[&str]) -> Running {
        let mut c = self.command("run", args);
        c.stdin(Stdio::piped()).stdout(Stdio::piped());
        Running::spawn(c)
    }

    /// Runs the job (`-v`) and, once a checkpoint of it completed, stops
    /// `server` as a crash for `outage` and starts it again; asserts that
    /// the run succeeded and returns its stderr.
    pub fn run_through_an_outage(
        &self,
        server: &mut impl PrivateServer,
        outage: Duration,
    ) -> String {
        let mut run = self.spawn(&["-v"]);
        run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
        server.stop();
        std::thread::sleep(outage);
        server.restart();
        let (status, stderr) = run.wait();
        assert!(status.success(), "{stderr}");
        stderr
    }

    /// The size in bytes of a file in the folder; 0 when it does not exist.
    pub fn size(&self, file: &str) -> u64 {
        std::fs::metadata(self.path().join(file)).map_or(0, |m| m.len())
    }

    /// Waits until the file `output` is larger than `than` bytes, which for
    /// a file sink's output means a checkpoint was committed (its visible
    /// file grows only then), and returns true; returns false when `child`
    /// exits first. Panics after [`PATIENCE`].
    pub fn wait_for_output(&self, child: &mut Child, output: &str, than: u64) -> bool {
        wait_until(
            &format!("`{output}` to grow past {than} bytes"),
            PATIENCE,
            || {
                if self.size(output) > than {
                    Some(true)
                } else {
                    child.try_wait().unwrap().map(|_| false)
                }
            },
        )
    }

    /// Starts the job with `args`, sends it SIGINT (as Ctrl-C does) once it
    /// has committed output to the file `output`, and waits for it to exit.
    pub fn run_interrupted(&self, args: &[&str], output: &str) -> Outcome {
        let mut child = self
            .command("run", args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if self.wait_for_output(&mut child, output, 0) {
            signal(&child, "-INT");
        }
        child.wait_with_output().unwrap().into()
    }

    /// Starts the job and kills it with SIGKILL at an observed point: once
    /// the run has committed new output to the file `output` (a checkpoint
    /// of this run is complete), plus a random `jitter` (ms) so that the
    /// kill lands anywhere in the checkpoints that follow. Returns false,
    /// asserting that the run succeeded, when it finishes on its own first.
    pub fn kill_after_output(&self, output: &str, jitter: (u64, u64), rng: &mut XorShift) -> bool {
        let mut run = self.spawn(&[]);
        let before = self.size(output);
        let grew = self.wait_for_output(&mut run.child, output, before);
        let kill_at = Instant::now() + Duration::from_millis(rng.range(jitter.0, jitter.1));
        let finished = grew
            && wait_until("the moment to kill", PATIENCE, || {
                match run.child.try_wait().unwrap() {
                    Some(_) => Some(true),
                    None => (Instant::now() >= kill_at).then_some(false),
                }
            });
        if !grew || finished {
            let (status, stderr) = run.wait();
            assert!(
                status.success(),
                "a run between kills failed: {status}: {stderr}"
            );
            return false;
        }
        run.kill(); // SIGKILL
        true
    }

    /// Runs the job killed as [`JobDir::kill_after_output`] does, `kills`
    /// times in a row or until a run finishes on its own, asserts that at
    /// least two kills landed mid-job, then runs it to the end (when no run
    /// finished on its own) and asserts that it resumed from a checkpoint;
    /// returns how many runs were killed.
    pub fn run_through_kills(
        &self,
        kills: usize,
        output: &str,
        jitter: (u64, u64),
        rng: &mut XorShift,
    ) -> usize {
        let mut killed = 0;
        while killed < kills && self.kill_after_output(output, jitter, rng) {
            killed += 1;
        }
        assert!(
            killed >= 2,
            "only {killed} runs were killed mid-job; the input is too small to test crashes"
        );
        if killed == kills {
            self.assert_resumes();
        }
        killed
    }

    /// Waits until `file` holds `text`.
    pub fn wait_for_text(&self, file: &str, text: &str) {
        wait_until(&format!("`{text}` in {file}"), PATIENCE, || {
            std::fs::read_to_string(self.path().join(file))
                .ok()
                .filter(|out| out.contains(text))
        });
    }

    /// Runs the job and SIGKILLs it at a random moment (0 to 400 ms, from
    /// `rng`) after a checkpoint of the run completed; false when the run
    /// finished first.
    pub fn kill_after_a_checkpoint(&self, rng: &mut XorShift) -> bool {
        self.kill_after_a_checkpoint_of(&[], rng)
    }

    /// [`kill_after_a_checkpoint`](Self::kill_after_a_checkpoint) of `weir
    /// run job.toml -v ARGS`.
    pub fn kill_after_a_checkpoint_of(&self, args: &[&str], rng: &mut XorShift) -> bool {
        let mut run = self.spawn(&[&["-v"], args].concat());
        run.wait_for_line("a checkpoint", |l| l.contains("complete in"));
        let until = Instant::now() + Duration::from_millis(rng.range(0, 400));
        while Instant::now() < until && run.child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        if run.child.try_wait().unwrap().is_some() {
            return false;
        }
        run.kill();
        true
    }

    /// Runs the job SIGKILLed `kills` times, each at a random moment (0 to
    /// 400 ms, from `seed`) after a checkpoint of that run completed, for
    /// jobs whose output is outside the folder (a server); then runs it to
    /// its end and asserts that the last run restored a checkpoint;
    /// returns how many runs were killed (fewer than `kills` when a run
    /// finished first).
    pub fn run_through_kills_after_checkpoints(&self, kills: usize, seed: u64) -> usize {
        self.through_kills_after_checkpoints(kills, seed).0
    }

    /// [`run_through_kills_after_checkpoints`](Self::run_through_kills_after_checkpoints),
    /// also returning the stderr of the run that ended the job.
    pub fn through_kills_after_checkpoints(&self, kills: usize, seed: u64) -> (usize, String) {
        let mut rng = XorShift(seed);
        let mut killed = 0;
        while killed < kills && self.kill_after_a_checkpoint(&mut rng) {
            killed += 1;
        }
        let stderr = self.assert_resumes();
        assert_lacks(&stderr, "panicked");
        (killed, stderr)
    }

    /// Runs the job to its end and asserts that it succeeded and resumed
    /// from a checkpoint; returns its stderr.
    pub fn assert_resumes(&self) -> String {
        let stderr = self.run_ok(&[]);
        assert!(
            stderr.contains("resumed from checkpoint"),
            "the last run did not restore: {stderr}"
        );
        stderr
    }

    /// The lines of an output file as a multiset.
    pub fn lines(&self, file: &str) -> BTreeMap<String, usize> {
        multiset(&self.read_so_far(file))
    }

    /// The text of a file in the folder so far: empty while it does not
    /// exist (an output before its first commit).
    pub fn read_so_far(&self, file: &str) -> String {
        std::fs::read_to_string(self.path().join(file)).unwrap_or_default()
    }

    /// The text of a file in the folder.
    pub fn read(&self, file: &str) -> String {
        let path = self.path().join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// Runs each job of `cases` in a new folder with `files` and asserts that
/// it fails with one line on stderr holding each of the job's needles
/// ([`Outcome::assert_one_line_error`]).
pub fn assert_one_line_errors<'a, J: Display>(
    weir: Weir,
    files: &[(&str, &str)],
    cases: impl IntoIterator<Item = (J, Vec<&'a str>)>,
) {
    for (job, needles) in cases {
        let j = JobDir::new(weir, job, files);
        j.run(&[]).assert_one_line_error(&needles);
    }
}

/// The names of the entries of the folder `dir` that `keep` accepts,
/// sorted.
pub fn names_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| keep(n))
        .collect();
    names.sort();
    names
}

/// Sends `signal` (`-INT`, `-TERM`) to `child` with `kill`.
pub fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {}", child.id());
}
