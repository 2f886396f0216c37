//! A private S3-compatible object store ([`S3`]): SeaweedFS's all-in-one
//! `weed mini` (master, volume server, filer and S3 gateway in one
//! process). `scripts/services.sh s3-run DIR PORT` pins its ports and
//! flags, puts the credentials it requires in its environment and becomes
//! the process, so a SIGKILL of the child is a crash of the server. The
//! tests check objects through the `object_store` crate, on a small tokio
//! runtime of the server's own.

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::io::Write;

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use tokio::runtime::Runtime;

use super::*;

/// The region clients sign their requests for (the server accepts any).
const REGION: &str = "us-east-1";

/// How long a start may take until the bucket is served: well under a
/// second on an idle machine, ~5 s when the volume server's first
/// heartbeat is refused (it retries only then).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The ports `weed mini` listens on for S3 port `port` (as `s3_ports` in
/// `scripts/services.sh`): `port` and the next four (its master, volume
/// server, filer and admin server), and each one's gRPC port, 10000 above.
fn ports(port: u16) -> impl Iterator<Item = u16> {
    (0..5).flat_map(move |i| [port + i, port + 10_000 + i])
}

/// The gRPC sockets `weed mini` on S3 port `port` makes at fixed places
/// under /tmp (`/tmp/seaweedfs-<server>-grpc-<gRPC port>.sock`, whatever
/// its folder) and removes only when stopped cleanly.
fn grpc_sockets(port: u16) -> Vec<PathBuf> {
    let servers = ["s3", "master", "volume", "filer", "admin"];
    (servers.iter().zip(port + 10_000..))
        .map(|(server, grpc)| PathBuf::from(format!("/tmp/seaweedfs-{server}-grpc-{grpc}.sock")))
        .collect()
}

/// An S3 port in 20000-22699 whose [`ports`] were all free a moment ago
/// (bound and released). Their gRPC ports (30000-32703) stay below Linux's
/// ephemeral range (32768-), where outgoing connections and the other
/// servers' ports ([`free_port`]) are.
fn free_port_block() -> u16 {
    let random = RandomState::new();
    for attempt in 0u32..200 {
        let port = 20_000 + (random.hash_one(attempt) % 2_700) as u16;
        let bound: Result<Vec<TcpListener>, _> = ports(port)
            .map(|p| TcpListener::bind(("127.0.0.1", p)))
            .collect();
        if bound.is_ok() {
            return port;
        }
    }
    panic!(
        "found no free S3 port in 20000-22699 whose next four ports and their gRPC ports (+10000) are free too"
    );
}

/// `GET path` on 127.0.0.1:`port` over HTTP/1.0 (one answer, the
/// connection then closed, never chunked), its body as JSON; an error
/// saying what failed.
fn get_json(port: u16, path: &str) -> Result<Value, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let url = format!("http://{addr}{path}");
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        .map_err(|e| format!("GET {url}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")
        .map_err(|e| format!("GET {url}: {e}"))?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .map_err(|e| format!("GET {url}: {e}"))?;
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    serde_json::from_str(body).map_err(|e| format!("GET {url}: not JSON ({e}): {raw:?}"))
}

/// A private S3 endpoint, `http://127.0.0.1:PORT`, with one bucket
/// (`weir-os`) that requires signed requests with its credentials. Its
/// folder, in memory (`/dev/shm`) when there is one, holds `data/` (the
/// objects, the filer's metadata), `s3.port`, its Unix sockets and
/// `s3.log`; it also listens on the next four ports
/// and on each of the five + 10000 (gRPC), all on 127.0.0.1 only. Killed
/// when dropped; a watchdog kills it when the test process ends without
/// dropping it. Its bucket name and credentials are `scripts/services.sh`'s
/// `S3_BUCKET`, `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY`.
pub struct S3 {
    port: u16,
    bucket: String,
    access_key_id: String,
    secret_access_key: String,
    /// The client of the current start (its port), with the credentials.
    store: Option<AmazonS3>,
    runtime: Runtime,
    process: ServerProcess,
}

impl S3 {
    /// Starts a server on a free block of ports and waits until it serves
    /// its bucket; panics with the end of its log when it does not.
    pub fn start() -> S3 {
        if let Err(e) = weed_bin() {
            not_installed(S3::NAME, &e);
        }
        let setting = |name| script_setting(name).unwrap_or_else(|e| panic!("{e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("building a tokio runtime for the S3 client");
        let mut s3 = S3 {
            port: 0,
            bucket: setting("S3_BUCKET"),
            access_key_id: setting("S3_ACCESS_KEY_ID"),
            secret_access_key: setting("S3_SECRET_ACCESS_KEY"),
            store: None,
            runtime,
            process: ServerProcess::new_in("s3", folder_parent()),
        };
        s3.start_on_a_free_port();
        s3
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bucket: `weir-os`.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// `s3://weir-os/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The environment a `weir` process needs to reach the server: the
    /// credentials, the region, the endpoint and plain HTTP allowed.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
    }

    /// The client of the bucket, signing with the server's credentials; its
    /// requests run with [`S3::block_on`].
    pub fn store(&self) -> &AmazonS3 {
        self.store.as_ref().expect("the S3 server has been started")
    }

    /// A client of the bucket that signs with other credentials.
    pub fn store_with(&self, access_key_id: &str, secret_access_key: &str) -> AmazonS3 {
        // Requests are retried twice within 5 s: a 5xx, or no connection.
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
            },
            max_retries: 2,
            retry_timeout: Duration::from_secs(5),
        };
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region(REGION)
            .with_bucket_name(&self.bucket)
            .with_access_key_id(access_key_id)
            .with_secret_access_key(secret_access_key)
            .with_retry(retry)
            .build()
            .unwrap_or_else(|e| panic!("an S3 client of {}: {e}", self.endpoint()))
    }

    /// Runs `future` (requests of [`S3::store`]) to its end on the
    /// server's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The keys of every object under the folder `prefix` (`out` holds
    /// `out/a` and `out/b/c`, not `output`; empty: the whole bucket),
    /// sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let prefix = (!prefix.is_empty()).then(|| object_path(prefix));
        let listing = self.store().list(prefix.as_ref()).try_collect::<Vec<_>>();
        let objects = self.block_on(listing).unwrap_or_else(|e| {
            panic!(
                "listing {}: {e}",
                self.url(prefix.as_ref().map_or("", |p| p.as_ref()))
            )
        });
        let mut keys: Vec<String> = objects.into_iter().map(|o| o.location.into()).collect();
        keys.sort();
        keys
    }

    /// The bytes of object `key`; `None` when there is none.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let got = self.block_on(async {
            match self.store().get(&object_path(key)).await {
                Ok(object) => object.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        let bytes = got.unwrap_or_else(|e| panic!("reading {}: {e}", self.url(key)));
        bytes.map(|b| b.to_vec())
    }

    /// Writes object `key` (replacing one there).
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let payload = PutPayload::from(bytes.to_vec());
        self.block_on(self.store().put(&object_path(key), payload))
            .unwrap_or_else(|e| panic!("writing {}: {e}", self.url(key)));
    }

    /// Deletes object `key` (nothing when there is none).
    pub fn delete(&self, key: &str) {
        self.block_on(self.store().delete(&object_path(key)))
            .unwrap_or_else(|e| panic!("deleting {}: {e}", self.url(key)));
    }

    /// Polls until the server serves its bucket: its master knows the
    /// volume server and every volume it holds (until then, after a
    /// restart, reads fail), and a signed listing of the bucket succeeds
    /// (the bucket exists, the credentials are required and accepted); an
    /// error when the process ends or [`READY_TIMEOUT`] passes.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let why = match self.volumes_known() {
                Ok(()) => match self.block_on(self.store().list_with_delimiter(None)) {
                    Ok(_) => return Ok(()),
                    Err(e) => format!("listing bucket {}: {e}", self.bucket),
                },
                Err(e) => e,
            };
            if let Some(how) = self.process.exited() {
                return Err(format!(
                    "it exited ({how}) before serving bucket {} on port {}",
                    self.bucket, self.port
                ));
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "it did not serve bucket {} on port {} within {READY_TIMEOUT:?}; last: {why}",
                    self.bucket, self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the master (port + 1) lists the volume server (port + 2)
    /// with as many volumes as the volume server holds, and the volume
    /// server has room to write.
    fn volumes_known(&self) -> Result<(), String> {
        let volume_server = format!("127.0.0.1:{}", self.port + 2);
        let status = get_json(self.port + 2, "/status")?;
        room_to_write(&status)?;
        let held = items(&status["Volumes"]).count() as u64;
        let topology = get_json(self.port + 1, "/dir/status")?;
        let node = items(&topology["Topology"]["DataCenters"])
            .flat_map(|dc| items(&dc["Racks"]))
            .flat_map(|rack| items(&rack["DataNodes"]))
            .find(|node| node["Url"] == volume_server.as_str());
        if let Some(node) = node
            && node["Volumes"].as_u64() == Some(0)
            && node["Max"].as_u64() == Some(0)
        {
            return Err(format!(
                "the volume server may hold no volume (its disk: {})",
                status["DiskStatuses"]
            ));
        }
        match node.and_then(|node| node["Volumes"].as_u64()) {
            Some(known) if known == held => Ok(()),
            Some(known) => Err(format!(
                "the master knows {known} of the volume server's {held} volumes"
            )),
            None => Err(format!(
                "the master does not know the volume server {volume_server} yet"
            )),
        }
    }
}

/// The weed binary `scripts/services.sh install` unpacks into
/// `$WEIR_SEAWEEDFS_HOME/<SEAWEEDFS_VERSION>` (default
/// `~/.cache/weir-seaweedfs/...`). The script runs it; this tells a missing
/// install apart from a failed start.
fn weed_bin() -> Result<PathBuf, String> {
    installed_bin(
        "SEAWEEDFS_VERSION",
        "WEIR_SEAWEEDFS_HOME",
        "weir-seaweedfs",
        "weed",
    )
}

/// Whether the disks of a volume server's `status` have room for writes:
/// `weed` marks every volume read-only below 1% free space (its
/// `minFreeSpace`, which `weed mini` does not let one set), and then every
/// write waits for a volume until its client gives up. An error naming the
/// disk otherwise.
fn room_to_write(status: &Value) -> Result<(), String> {
    for disk in items(&status["DiskStatuses"]) {
        let percent_free = disk["percent_free"].as_f64().unwrap_or(100.0);
        if percent_free < 1.0 {
            return Err(format!(
                "the disk of {} has {} MiB free ({percent_free:.2}%): weed refuses writes below 1% free",
                disk["dir"],
                disk["free"].as_u64().unwrap_or(0) >> 20
            ));
        }
    }
    Ok(())
}

/// Where the server's folder goes: `/dev/shm` (memory) when there is one,
/// so that the shared disk's free space, which `weed mini` sizes its
/// volumes by and refuses writes below 1% of ([`room_to_write`]), does not
/// decide whether tests pass; else the system's temporary folder.
fn folder_parent() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    tempfile::tempdir_in(shm).is_ok().then_some(shm)
}

/// The elements of the JSON array `v`; none when it is no array.
fn items(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// The object store's path of `key`; panics when it is no valid key (an
/// empty segment, `.` or `..`).
fn object_path(key: &str) -> Key {
    Key::parse(key).unwrap_or_else(|e| panic!("{key:?} is not an object key: {e}"))
}

/// A stop is a SIGKILL; its folder and port survive for a restart.
impl PrivateServer for S3 {
    server_process_methods!("SeaweedFS S3");

    fn pick_port() -> u16 {
        free_port_block()
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.process.run_script("s3-run", self.port)?;
        self.process.set_outside_files(grpc_sockets(self.port));
        self.store = Some(self.store_with(&self.access_key_id, &self.secret_access_key));
        let ready = self.wait_until_ready();
        self.stopped_unless_ready(ready)
    }

    /// A server that never started on its port leaves a folder that names
    /// it (`s3.port`, the master's `data/m<port+1>`): start afresh.
    fn forget_port(&mut self) {
        self.stop();
        let _ = fs::remove_file(self.dir().join("s3.port"));
        let _ = fs::remove_dir_all(self.dir().join("data"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A volume server's `/status` with one disk of `free` bytes of `all`.
    fn status(free: u64, all: u64) -> Value {
        serde_json::json!({
            "DiskStatuses": [{
                "dir": "/srv/s3/data", "all": all, "free": free,
                "percent_free": free as f64 * 100.0 / all as f64,
            }],
            "Volumes": null,
        })
    }

    #[test]
    fn a_disk_under_one_percent_free_is_named_as_why_writes_would_hang() {
        let gib = 1 << 30;
        assert_eq!(room_to_write(&status(40 * gib, 252 * gib)), Ok(()));
        assert_eq!(room_to_write(&serde_json::json!({})), Ok(()));
        let why = room_to_write(&status(2 * gib, 252 * gib)).unwrap_err();
        assert_eq!(
            why,
            "the disk of \"/srv/s3/data\" has 2048 MiB free (0.79%): weed refuses writes below 1% free"
        );
    }
}
