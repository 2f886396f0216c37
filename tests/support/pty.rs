//! A command run with its stderr on a pseudo-terminal, as a person at a
//! terminal runs `weir` ([`on_pty`]), and what that terminal shows
//! afterwards ([`Screen`]): the bytes replayed with the cursor movements
//! and erases a progress display uses, so a test sees which lines stayed on
//! the screen.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, ExitStatus, Stdio};

/// Columns of the pseudo-terminal.
pub const COLUMNS: usize = 200;
/// Rows of the pseudo-terminal.
pub const ROWS: usize = 100;

/// What a command run by [`on_pty`] left.
#[derive(Debug)]
pub struct PtyRun {
    /// How it exited.
    pub status: ExitStatus,
    /// Every byte it wrote to stderr (the terminal turns `\n` into `\r\n`).
    pub output: Vec<u8>,
}

impl PtyRun {
    /// The output as text, escapes included.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }

    /// The terminal's screen at the end.
    pub fn screen(&self) -> Screen {
        Screen::of(&self.output)
    }
}

fn check(what: &str, rc: libc::c_int) -> libc::c_int {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
    rc
}

/// A new pseudo-terminal of [`COLUMNS`] x [`ROWS`]: its controller and its
/// terminal end, both closed on exec.
fn open_pty() -> (File, OwnedFd) {
    // SAFETY: plain libc calls on descriptors this function owns; every
    // return value is checked, and each descriptor is wrapped once.
    unsafe {
        let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
        let master = check("posix_openpt", libc::posix_openpt(flags));
        let master_file = File::from_raw_fd(master);
        check("grantpt", libc::grantpt(master));
        check("unlockpt", libc::unlockpt(master));
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let slave = check("open pty", libc::open(name.as_ptr(), flags));
        let size = libc::winsize {
            ws_row: ROWS as u16,
            ws_col: COLUMNS as u16,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        check(
            "TIOCSWINSZ",
            libc::ioctl(slave, libc::TIOCSWINSZ, &size as *const libc::winsize),
        );
        (master_file, OwnedFd::from_raw_fd(slave))
    }
}

/// Runs `cmd` to the end with stderr on a new pseudo-terminal (`TERM=xterm`),
/// stdin and stdout on `/dev/null`, and returns everything it wrote there.
pub fn on_pty(cmd: &mut Command) -> PtyRun {
    let (mut master, slave) = open_pty();
    let mut child = cmd
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    // The command holds the terminal end until its stderr is replaced; once
    // no process has it open, reading the controller fails (EIO): the end.
    cmd.stderr(Stdio::null());
    let mut output = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => output.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) => panic!("reading the pty: {e}"),
        }
    }
    let status = child.wait().unwrap();
    PtyRun { status, output }
}

/// A terminal's screen (and scrollback) after replaying some output:
/// printable characters with automatic wrap at [`COLUMNS`], `\r`, `\n`,
/// and the CSI sequences for cursor movement (`A`, `B`, `C`, `D`, `G`),
/// erasing (`K`, `J`) and graphic rendition (`m`, counted, not drawn).
#[derive(Debug, Default)]
pub struct Screen {
    lines: Vec<Vec<char>>,
    row: usize,
    col: usize,
    /// The cursor is past the last column: the next character wraps.
    wrap: bool,
    /// Lowest row reached, to know which rows have scrolled off.
    bottom: usize,
    /// How many graphic rendition (colour) sequences were seen.
    pub sgr: usize,
}

impl Screen {
    /// The screen after `bytes`.
    pub fn of(bytes: &[u8]) -> Screen {
        let mut s = Screen::default();
        let text = String::from_utf8_lossy(bytes);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\x1b' => match chars.next() {
                    Some('[') => {
                        let mut params = String::new();
                        let mut last = None;
                        for c in chars.by_ref() {
                            if ('\x40'..='\x7e').contains(&c) {
                                last = Some(c);
                                break;
                            }
                            params.push(c);
                        }
                        if let Some(f) = last {
                            s.csi(&params, f);
                        }
                    }
                    Some(']') => {
                        // An operating system command, to BEL or ST.
                        while let Some(c) = chars.next() {
                            if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                                break;
                            }
                        }
                    }
                    _ => {}
                },
                '\r' => s.move_to(s.row, 0),
                '\n' => s.move_to(s.row + 1, s.col),
                c if c.is_control() => {}
                c => s.put(c),
            }
        }
        s
    }

    /// The lines on the screen and above it, without trailing blanks or
    /// trailing empty lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lines
            .iter()
            .map(|l| l.iter().collect::<String>().trim_end().to_string())
            .collect();
        while out.last().is_some_and(String::is_empty) {
            out.pop();
        }
        out
    }

    fn top(&self) -> usize {
        (self.bottom + 1).saturating_sub(ROWS)
    }

    fn move_to(&mut self, row: usize, col: usize) {
        self.row = row.max(self.top());
        self.bottom = self.bottom.max(self.row);
        self.col = col.min(COLUMNS - 1);
        self.wrap = false;
    }

    fn line(&mut self) -> &mut Vec<char> {
        if self.lines.len() <= self.row {
            self.lines.resize(self.row + 1, Vec::new());
        }
        &mut self.lines[self.row]
    }

    fn put(&mut self, c: char) {
        if self.wrap {
            self.move_to(self.row + 1, 0);
        }
        let col = self.col;
        let line = self.line();
        if line.len() <= col {
            line.resize(col + 1, ' ');
        }
        line[col] = c;
        if col + 1 == COLUMNS {
            self.wrap = true;
        } else {
            self.col += 1;
        }
    }

    fn csi(&mut self, params: &str, f: char) {
        if params.starts_with('?') {
            return; // modes (cursor visibility, ...)
        }
        let n = |i: usize| -> usize {
            params
                .split(';')
                .nth(i)
                .and_then(|p| p.parse().ok())
                .unwrap_or(0)
        };
        let count = n(0).max(1);
        match f {
            'A' => self.move_to(self.row.saturating_sub(count), self.col),
            'B' => self.move_to(self.row + count, self.col),
            'C' => self.move_to(self.row, self.col + count),
            'D' => self.move_to(self.row, self.col.saturating_sub(count)),
            'G' => self.move_to(self.row, count - 1),
            'H' | 'f' => {
                let top = self.top();
                self.move_to(top + n(0).max(1) - 1, n(1).max(1) - 1);
            }
            'K' => {
                let (col, mode) = (self.col, n(0));
                let line = self.line();
                match mode {
                    0 => line.truncate(col),
                    1 => line.iter_mut().take(col + 1).for_each(|c| *c = ' '),
                    _ => line.clear(),
                }
            }
            'J' => {
                let (row, col, mode, top) = (self.row, self.col, n(0), self.top());
                match mode {
                    0 => {
                        self.line().truncate(col);
                        self.lines.truncate(row + 1);
                    }
                    1 => {}
                    _ => {
                        for l in self.lines.iter_mut().skip(top) {
                            l.clear();
                        }
                    }
                }
            }
            'm' => self.sgr += 1,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erases_and_cursor_moves_replay_like_a_terminal() {
        let s = Screen::of(b"one\r\ntwo\r\nbar 1\r\nbar 2\x1b[1A\r\x1b[2K\x1b[1B\r\x1b[2K\x1b[1Alog\r\n\x1b[31mred\x1b[0m");
        assert_eq!(s.lines(), ["one", "two", "log", "red"]);
        assert_eq!(s.sgr, 2);
        // A full line wraps only when the next character comes.
        let full = "x".repeat(COLUMNS);
        let s = Screen::of(format!("{full}{full}y\r\n\x1b[0J").as_bytes());
        assert_eq!(s.lines(), [full.clone(), full, "y".to_string()]);
    }
}
