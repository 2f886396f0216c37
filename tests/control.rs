//! The control socket `weir.sock` of a running job: owner-only whatever the
//! umask, and bounded: a flood and idle clients cost the job little, idle
//! clients are shed for new ones, and it keeps running and taking swaps.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

use weir_tests::cli::Weir;
use weir_tests::job_dir::{JobDir, names_in, signal};
use weir_tests::job_file::Checkpoint;
use weir_tests::jobs::count_words;
use weir_tests::plugins;
use weir_tests::text::assert_has;
use weir_tests::wait::{PATIENCE, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_weir");
const WEIR: Weir = Weir::new(BIN);

/// A job that runs for about 20 s: 4000 words at 200 per second.
fn slow_job() -> JobDir {
    let words: String = (0..4000).map(|i| format!("w{}\n", i % 40)).collect();
    let job = count_words("control", Checkpoint::every("100ms"), 200, 1);
    JobDir::new(WEIR, job, &[("words.txt", &words)])
}

/// Waits until the job listens on its control socket.
fn wait_for_socket(j: &JobDir) {
    let sock = j.state_dir().join(weir::run::CONTROL_SOCKET);
    wait_until("the control socket", PATIENCE, || {
        sock.exists().then_some(())
    });
}

/// One line read from `conn`.
fn answer(conn: &UnixStream) -> String {
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).unwrap();
    line
}

/// A swap to word-count-v2 succeeds, then the job stops cleanly on SIGINT.
fn swap_then_stop(j: &JobDir, child: Child) {
    let out = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    assert!(
        out.success() && out.stdout.contains("now runs the new plugin"),
        "{}",
        out.stderr
    );
    signal(&child, "-INT");
    let run = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
}

#[test]
fn the_socket_is_owner_only_whatever_the_umask_and_kept_from_a_second_run() {
    let j = slow_job();
    let child = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" run \"$1\" --progress-every 0"])
        .arg(BIN)
        .arg(j.path().join("job.toml"))
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_socket(&j);
    let meta = std::fs::metadata(j.state_dir().join(weir::run::CONTROL_SOCKET)).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "mode {:o}",
        meta.permissions().mode()
    );
    // Nothing but the socket was left beside it (the private folder it was
    // bound in is gone).
    let hidden = names_in(&j.state_dir(), |n| n.starts_with('.'));
    assert!(hidden.is_empty(), "{hidden:?}");
    // A second run on the same state dir is refused and leaves the
    // socket of the first in place.
    let second = j.run(&[]);
    assert!(!second.success());
    assert_has(&second.stderr, "another `weir run` is running on");
    // The socket renamed into place still reaches the job.
    swap_then_stop(&j, child);
}

/// VmRSS of process `pid`, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn twenty_idle_clients_do_not_block_a_swap_and_floods_are_cut_off() {
    let j = slow_job();
    let child = j
        .command("run", &["--progress-every", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_socket(&j);
    let sock = j.state_dir().join(weir::run::CONTROL_SOCKET);

    // Twenty idle clients, five times what the job serves at once: each
    // new connection sheds the oldest idle one, so a swap still gets
    // through while they are held (well within the read timeout), and the
    // connection it shed says so. The last ones are cut off at the timeout.
    let max = weir::run::MAX_CONNECTIONS;
    let idle: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let swapped = j.on_state("swap", &[&format!("count={}", plugins::WORD_COUNT_V2)]);
    assert!(
        swapped.success() && swapped.stdout.contains("now runs the new plugin"),
        "{}",
        swapped.stderr
    );
    for (i, conn) in idle.iter().enumerate() {
        let cut = answer(conn);
        let why = if i <= idle.len() - max {
            "closed without a request"
        } else {
            "no complete request line"
        };
        assert!(
            cut.contains("\"ok\":false") && cut.contains(why),
            "{i}: {cut}"
        );
    }

    // 300 MB without a newline: the job reads a few KiB and hangs up.
    let before = rss_kb(child.id());
    let mut flood = UnixStream::connect(&sock).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 300 << 20 {
        match flood.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    let grown = rss_kb(child.id()).saturating_sub(before);
    assert!(sent < 16 << 20, "the job read {sent} bytes of one request");
    assert!(grown < 1024, "the job grew by {grown} kB");
    let cut = answer(&flood);
    assert_has(
        &cut,
        &format!("longer than {} bytes", weir::run::MAX_REQUEST),
    );

    signal(&child, "-INT");
    let run = child.wait_with_output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}
