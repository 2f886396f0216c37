//! A private Azure Blob Storage endpoint ([`Azurite`]): Microsoft's
//! emulator, from npm. `scripts/services.sh azure-run DIR PORT` becomes the
//! server (so a SIGKILL of the child is a crash of it); `azure-container`
//! then creates the container, with a request signed by the emulator's
//! well-known development account.

use super::*;

/// A private Azure Blob endpoint, `http://127.0.0.1:PORT/devstoreaccount1`,
/// with one container (`weir-os`) that takes only requests signed with the
/// development account's key. Its folder holds `data/` and `azure.log`.
/// Killed when dropped. Azurite saves its metadata every 5 s: a stop (a
/// SIGKILL) loses the last 5 s of writes, so tests never restart it.
pub struct Azurite {
    port: u16,
    account: String,
    key: String,
    container: String,
    process: ServerProcess,
}

impl Azurite {
    /// Starts a server on a free port with its container; panics with the
    /// end of its log when it does not start.
    pub fn start() -> Azurite {
        if let Err(e) = azurite_bin() {
            not_installed(Azurite::NAME, &e);
        }
        let setting = |name| script_setting(name).unwrap_or_else(|e| panic!("{e}"));
        let mut azurite = Azurite {
            port: 0,
            account: setting("AZURE_ACCOUNT"),
            key: setting("AZURE_ACCOUNT_KEY"),
            container: setting("AZURE_CONTAINER"),
            process: ServerProcess::new("azure"),
        };
        azurite.start_on_a_free_port();
        azurite
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1`: the account's endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{}", self.port, self.account)
    }

    /// `az://weir-os/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!("az://{}/{prefix}", self.container)
    }

    /// The environment a `weir` process needs to reach the server: the
    /// account, its key, the endpoint and plain HTTP allowed (what a user
    /// of any Azure-compatible endpoint sets).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_ACCOUNT_NAME", self.account.clone()),
            ("AZURE_STORAGE_ACCOUNT_KEY", self.key.clone()),
            ("AZURE_ENDPOINT", self.endpoint()),
            ("AZURE_ALLOW_HTTP", "true".to_owned()),
        ]
    }

    /// Waits until the port accepts connections, then creates the
    /// container (`scripts/services.sh azure-container`).
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let (port, addr) = (self.port, SocketAddr::from(([127, 0, 0, 1], self.port)));
        let accepts = || match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("port {port}: {e}")),
        };
        (self.process).wait_until_ready(START_TIMEOUT, Duration::from_millis(20), accepts)?;
        let script = crate::repo_root().join("scripts/services.sh");
        let out = Command::new("bash")
            .arg(&script)
            .args(["azure-container", &self.port.to_string(), &self.container])
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!(
                "creating container {}: {}",
                self.container,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
}

/// Azurite's blob server, as `scripts/services.sh install` puts it under
/// `$WEIR_AZURITE_HOME/<AZURITE_VERSION>` (default
/// `~/.cache/weir-azurite/...`). The script runs it; this tells a missing
/// install apart from a failed start.
fn azurite_bin() -> Result<PathBuf, String> {
    installed_bin(
        "AZURITE_VERSION",
        "WEIR_AZURITE_HOME",
        "weir-azurite",
        "node_modules/.bin/azurite-blob",
    )
}

impl PrivateServer for Azurite {
    server_process_methods!("Azurite (Azure Blob Storage)");

    fn spawn(&mut self) -> Result<(), String> {
        self.process.run_script("azure-run", self.port)?;
        let ready = self.wait_until_ready();
        self.stopped_unless_ready(ready)
    }

    /// The folder names its port (`azure.port`): start afresh.
    fn forget_port(&mut self) {
        self.stop();
        let _ = fs::remove_file(self.dir().join("azure.port"));
    }
}
