//! A private PostgreSQL server ([`Postgres`]).

use super::*;

/// A private PostgreSQL: data in `DIR/pg`, log in `DIR/pg.log`, its Unix
/// socket in `DIR/sock`; user `postgres`, trusted, database `postgres`.
/// As root, initdb and the server run as user `postgres`.
pub struct Postgres {
    port: u16,
    /// The folder of initdb, pg_ctl and psql.
    bin: PathBuf,
    as_postgres: bool,
    running: bool,
    // Dropped in this order, after `Drop::drop` stopped the server.
    _watchdog: Watchdog,
    dir: TempDir,
}

impl Postgres {
    /// Creates a cluster and starts it on a free port; panics (with its
    /// log) when it cannot.
    pub fn start() -> Postgres {
        let bin = pg_bindir().unwrap_or_else(|| {
            not_installed(Postgres::NAME, "no /usr/lib/postgresql/*/bin/initdb")
        });
        let dir = server_dir("weir-pg-", None);
        fs::create_dir(dir.path().join("sock")).unwrap();
        let as_postgres = is_root();
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .output();
            match chown {
                Ok(out) if out.status.success() => {}
                Ok(out) => not_installed(
                    "PostgreSQL",
                    &format!(
                        "chown to user postgres: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                ),
                Err(e) => panic!("running chown: {e}"),
            }
        }
        let pg_ctl = bin.join("pg_ctl");
        let mut stop: Vec<&Path> = Vec::new();
        if as_postgres {
            stop.extend(["runuser", "-u", "postgres", "--"].map(Path::new));
        }
        stop.push(&pg_ctl);
        let watchdog = Watchdog::spawn(
            dir.path(),
            "d=$1; shift; if [ -e \"$d/pg/postmaster.pid\" ]; then \"$@\" -D \"$d/pg\" -m immediate stop; fi; set -- \"$d\"",
            &stop,
        );
        let mut pg = Postgres {
            port: 0,
            bin,
            as_postgres,
            running: false,
            _watchdog: watchdog,
            dir,
        };

        let log = pg.dir.path().join("initdb.log");
        let out = File::create(&log).unwrap();
        let status = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.dir.path().join("pg"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => failed_to_start("PostgreSQL", &format!("initdb: {s}"), &log),
            Err(e) => failed_to_start("PostgreSQL", &format!("running initdb: {e}"), &log),
        }
        pg.start_on_a_free_port();
        pg
    }

    /// `bin/<program>`, run as user postgres when the tests run as root.
    fn command(&self, program: &str) -> Command {
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"])
                .arg(self.bin.join(program));
            cmd
        } else {
            Command::new(self.bin.join(program))
        };
        // A folder user postgres can enter (the tests' may be under /root).
        cmd.current_dir(self.dir.path()).stdin(Stdio::null());
        cmd
    }

    /// The server's program `name` (`pg_recvlogical`, `psql`...), from
    /// the folder of its initdb.
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs `sql` with psql (one `-c`: several statements run in one
    /// transaction) and returns its output, unaligned and tuples only
    /// (`1|a` a row, rows a line each), trimmed; panics with psql's stderr
    /// when it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.try_psql(sql)
            .unwrap_or_else(|e| panic!("psql -c {sql:?} on {}: {e}", self.url()))
    }

    /// As [`Postgres::psql`], with psql's stderr as the error.
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        let psql = self.bin.join("psql");
        let psql = if psql.is_file() {
            psql
        } else {
            PathBuf::from("psql")
        };
        let out = Command::new(&psql)
            .args([
                "-X",
                "-A",
                "-t",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                &self.url(),
                "-c",
                sql,
            ])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", psql.display()));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

/// Its folder holds `pg/` (the data), `pg.log` and `sock/`; a stop is
/// `pg_ctl -m immediate stop`, after which committed transactions survive.
impl PrivateServer for Postgres {
    const NAME: &'static str = "PostgreSQL";

    fn port(&self) -> u16 {
        self.port
    }

    fn set_port(&mut self, port: u16) {
        self.port = port;
    }

    fn spawn(&mut self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c wal_level=logical",
            self.port,
            self.dir.path().join("sock").display()
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("pg"))
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "30", "start", "-o", &options])
            .output()
            .map_err(|e| format!("running pg_ctl: {e}"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            return Err(format!("pg_ctl start: {}: {}", out.status, said.trim()));
        }
        self.running = true;
        Ok(())
    }

    fn stop(&mut self) {
        if !std::mem::replace(&mut self.running, false) {
            return;
        }
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("pg"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "pg_ctl stop: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("running pg_ctl stop: {e}"),
        }
    }

    /// Whether the server was started and not stopped since.
    fn is_running(&self) -> bool {
        self.running
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("pg.log")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with initdb and pg_ctl,
/// else the folder of the pg_ctl on PATH.
fn pg_bindir() -> Option<PathBuf> {
    let complete =
        |dir: &Path| is_executable(&dir.join("initdb")) && is_executable(&dir.join("pg_ctl"));
    let newest = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: Vec<u32> = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|n| n.parse().ok())
                .collect::<Option<_>>()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| complete(bin))
        .max();
    if let Some((_, bin)) = newest {
        return Some(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter_map(|dir| fs::canonicalize(dir.join("pg_ctl")).ok())
        .filter_map(|pg_ctl| pg_ctl.parent().map(Path::to_path_buf))
        .find(|dir| complete(dir))
}
