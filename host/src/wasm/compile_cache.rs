//! An on-disk cache of compiled components, so that a large plugin (a Python
//! or JavaScript component is 10–20 MB and takes seconds to compile) is
//! compiled once per machine, not once per `weir` process.
//!
//! An entry is the output of [`Engine::precompile_component`], stored under
//! a name made of the sha256 of the `.wasm` bytes and a hash of the engine's
//! configuration and wasmtime version
//! ([`Engine::precompile_compatibility_hash`]), so a plugin compiled with
//! fuel metering, or by another wasmtime, is a different entry.
//!
//! Where: `$WEIR_CACHE_DIR`, else `$XDG_CACHE_HOME/weir`, else
//! `~/.cache/weir`. `WEIR_CACHE_DIR=off` (or an empty value) disables it.
//!
//! [`compile`] says, in a [`NOTICE`](crate::NOTICE), that a component of
//! [`ANNOUNCED_SIZE`] or more is being compiled, before it starts, so a
//! first run of a large plugin is not silent for seconds.
//!
//! Invariants:
//! - The cache never makes loading fail: an unreadable, corrupt, truncated
//!   or incompatible entry is compiled again (and rewritten), and a cache
//!   folder that cannot be written just means no caching.
//! - An entry is used only for the component and engine it was made from,
//!   and only if its checksum matches: each file starts with a magic line,
//!   the sha256 of the `.wasm` bytes it was compiled from, the engine key,
//!   and a sha256 over those and the artifact that follows. All are checked
//!   before the artifact is handed to wasmtime (deserializing trusts its
//!   input), so an entry copied or renamed over another one (a well-formed
//!   entry of a different plugin) is compiled again, never run.
//! - Entries are written to a temporary file and renamed into place, so a
//!   concurrent reader sees a whole entry or none.
//! - At most [`MAX_ENTRIES`] entries are kept: writing one more removes the
//!   least recently written.

use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of every entry: format name and version.
const MAGIC: &[u8; 8] = b"WEIRCC2\n";
/// Bytes of each sha256 in an entry's header.
const SHA: usize = 32;
/// Extension of entry files.
const EXT: &str = "cwasm";
/// Most entries kept in one cache folder.
pub const MAX_ENTRIES: usize = 64;

/// Where the cache lives, from the environment: `None` when disabled.
///
/// ```
/// // WEIR_CACHE_DIR wins; "off" disables.
/// let dir = weir::wasm::compile_cache::dir_from(Some("/tmp/c".into()), None, None);
/// assert_eq!(dir.unwrap(), std::path::Path::new("/tmp/c"));
/// assert!(weir::wasm::compile_cache::dir_from(Some("off".into()), None, None).is_none());
/// ```
pub fn dir_from(
    weir_cache_dir: Option<std::ffi::OsString>,
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(d) = weir_cache_dir {
        if d.is_empty() || d == "off" {
            return None;
        }
        return Some(PathBuf::from(d));
    }
    if let Some(x) = xdg_cache_home.filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("weir"));
    }
    home.filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache").join("weir"))
}

/// The cache folder this process uses (read once from the environment).
pub fn default_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        dir_from(
            std::env::var_os("WEIR_CACHE_DIR"),
            std::env::var_os("XDG_CACHE_HOME"),
            std::env::var_os("HOME"),
        )
    })
    .as_deref()
}

/// How a component was obtained by [`CompileCache::compile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded from a valid cache entry.
    Hit,
    /// Compiled, and the entry written.
    Compiled,
    /// Compiled; an entry existed but was corrupt or incompatible, and was
    /// replaced.
    Replaced,
    /// Compiled; the entry could not be written (the message says why).
    NotStored,
}

/// A cache of compiled components in one folder.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

/// A `Hasher` that feeds sha256, so the engine hash is stable across
/// processes (std's `DefaultHasher` promises no such thing).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        unreachable!("read with finalize")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Lower-case hex of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of the engine's compatibility hash: what an entry compiled by
/// `engine` records, and (its first 8 bytes) part of the entry's name.
fn engine_sha(engine: &Engine) -> [u8; SHA] {
    let mut h = ShaHasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    h.0.finalize().into()
}

/// What an entry must have been made from to be used.
struct Origin {
    /// sha256 of the `.wasm` bytes.
    wasm: [u8; SHA],
    /// [`engine_sha`] of the engine.
    engine: [u8; SHA],
}

impl Origin {
    fn of(engine: &Engine, wasm: &[u8]) -> Self {
        Origin {
            wasm: Sha256::digest(wasm).into(),
            engine: engine_sha(engine),
        }
    }

    /// The checksum of an entry holding `artifact` made from `self`.
    fn checksum(&self, artifact: &[u8]) -> [u8; SHA] {
        let mut h = Sha256::new();
        h.update(self.wasm);
        h.update(self.engine);
        h.update(artifact);
        h.finalize().into()
    }

    /// The whole entry file for `artifact`.
    fn entry(&self, artifact: &[u8]) -> Vec<u8> {
        let mut file = Vec::with_capacity(MAGIC.len() + 3 * SHA + artifact.len());
        file.extend_from_slice(MAGIC);
        file.extend_from_slice(&self.wasm);
        file.extend_from_slice(&self.engine);
        file.extend_from_slice(&self.checksum(artifact));
        file.extend_from_slice(artifact);
        file
    }
}

/// Why an entry file is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unusable {
    /// Not an entry of this format, truncated, or its checksum is wrong.
    Corrupt,
    /// A well-formed entry of another component.
    OtherComponent,
    /// A well-formed entry of another engine configuration.
    OtherEngine,
}

impl CompileCache {
    /// A cache in `dir` (created when the first entry is written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CompileCache { dir: dir.into() }
    }

    /// The cache folder this process uses by default (see the module docs),
    /// or `None` when caching is off.
    pub fn from_env() -> Option<Self> {
        default_dir().map(Self::new)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file for `wasm` compiled by `engine`.
    pub fn entry_path(&self, engine: &Engine, wasm: &[u8]) -> PathBuf {
        self.path_of(&Origin::of(engine, wasm))
    }

    /// The entry file of what was made from `origin`.
    fn path_of(&self, origin: &Origin) -> PathBuf {
        let (wasm, engine) = (hex(&origin.wasm), hex(&origin.engine[..8]));
        self.dir.join(format!("{wasm}-{engine}.{EXT}"))
    }

    /// The component for `wasm`: from the cache when a valid entry exists,
    /// else compiled (and stored). Fails only when `wasm` does not compile.
    pub fn compile(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, Outcome)> {
        self.compile_with(engine, wasm, || {})
    }

    /// [`compile`](Self::compile), calling `on_miss` first when there is no
    /// usable entry, before the (slow) compilation starts.
    pub fn compile_with(
        &self,
        engine: &Engine,
        wasm: &[u8],
        on_miss: impl FnOnce(),
    ) -> wasmtime::Result<(Component, Outcome)> {
        let origin = Origin::of(engine, wasm);
        let path = self.path_of(&origin);
        let mut existed = false;
        match std::fs::read(&path) {
            Ok(file) => {
                existed = true;
                match checked_artifact(&file, &origin) {
                    Ok(artifact) => {
                        // SAFETY: the entry records that the artifact was
                        // compiled from these `.wasm` bytes by an engine with
                        // this compatibility hash, and the checksum over all
                        // three matches, so it is the bytes
                        // `precompile_component` produced for them;
                        // `deserialize` also checks the engine settings and
                        // version recorded in it.
                        match unsafe { Component::deserialize(engine, artifact) } {
                            Ok(c) => return Ok((c, Outcome::Hit)),
                            Err(e) => tracing::warn!(
                                "compile cache: {} is not usable ({e:#}); compiling again",
                                path.display()
                            ),
                        }
                    }
                    Err(why) => tracing::warn!(
                        "compile cache: {} {}; compiling again",
                        path.display(),
                        match why {
                            Unusable::Corrupt => "is corrupt",
                            Unusable::OtherComponent => "was compiled from another component",
                            Unusable::OtherEngine => "was compiled by another engine configuration",
                        }
                    ),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                "compile cache: cannot read {} ({e}); compiling again",
                path.display()
            ),
        }
        on_miss();
        let artifact = engine.precompile_component(wasm)?;
        // SAFETY: produced just now by this engine.
        let component = unsafe { Component::deserialize(engine, &artifact)? };
        let outcome = match self.store(&path, &origin.entry(&artifact)) {
            Ok(()) if existed => Outcome::Replaced,
            Ok(()) => Outcome::Compiled,
            Err(e) => {
                tracing::debug!(
                    "compile cache: cannot write {} ({e}); not caching",
                    path.display()
                );
                Outcome::NotStored
            }
        };
        Ok((component, outcome))
    }

    /// Writes an entry file atomically, then trims the folder to
    /// [`MAX_ENTRIES`].
    fn store(&self, path: &Path, entry: &[u8]) -> std::io::Result<()> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(entry)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result?;
        self.trim();
        Ok(())
    }

    /// Removes the oldest entries beyond [`MAX_ENTRIES`]. Best effort.
    fn trim(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == EXT))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if entries.len() <= MAX_ENTRIES {
            return;
        }
        entries.sort();
        let excess = entries.len() - MAX_ENTRIES;
        for (_, p) in entries.into_iter().take(excess) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The artifact of an entry file, if it is a whole entry made from `origin`.
fn checked_artifact<'a>(file: &'a [u8], origin: &Origin) -> Result<&'a [u8], Unusable> {
    let rest = file.strip_prefix(MAGIC).ok_or(Unusable::Corrupt)?;
    if rest.len() < 3 * SHA {
        return Err(Unusable::Corrupt);
    }
    let (wasm, rest) = rest.split_at(SHA);
    let (engine, rest) = rest.split_at(SHA);
    let (sum, artifact) = rest.split_at(SHA);
    let recorded = Origin {
        wasm: wasm.try_into().expect("SHA bytes"),
        engine: engine.try_into().expect("SHA bytes"),
    };
    if recorded.checksum(artifact).as_slice() != sum {
        return Err(Unusable::Corrupt);
    }
    if recorded.wasm != origin.wasm {
        return Err(Unusable::OtherComponent);
    }
    if recorded.engine != origin.engine {
        return Err(Unusable::OtherEngine);
    }
    Ok(artifact)
}

/// Compiles `wasm` (the file `plugin`) with `engine`, through the
/// process's default cache ([`default_dir`]) when there is one. Before
/// compiling a component of [`ANNOUNCED_SIZE`] or more, says so in a
/// [`NOTICE`](crate::NOTICE).
pub fn compile(engine: &Engine, plugin: &Path, wasm: &[u8]) -> wasmtime::Result<Component> {
    let cache = CompileCache::from_env();
    let announce = || {
        if wasm.len() < ANNOUNCED_SIZE {
            return;
        }
        let what = format!(
            "compiling plugin {} ({:.1} MB), which takes a while",
            plugin.display(),
            wasm.len() as f64 / 1e6
        );
        match &cache {
            Some(c) => tracing::info!(
                target: crate::NOTICE,
                "{what}; the result is cached in {} for the next run",
                c.dir().display()
            ),
            None => tracing::info!(
                target: crate::NOTICE,
                "{what}; the compile cache is off (WEIR_CACHE_DIR), so every run compiles it"
            ),
        }
    };
    match &cache {
        Some(c) => c.compile_with(engine, wasm, announce).map(|(c, _)| c),
        None => {
            announce();
            Component::new(engine, wasm)
        }
    }
}

/// Components of at least this many bytes (Python and JavaScript ones,
/// 10–20 MB, take seconds to compile) announce their compilation.
pub const ANNOUNCED_SIZE: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(wasm: &[u8], engine: u8) -> Origin {
        Origin {
            wasm: Sha256::digest(wasm).into(),
            engine: [engine; SHA],
        }
    }

    #[test]
    fn checksum_guards_the_artifact() {
        let o = origin(b"component", 1);
        let mut file = o.entry(b"abc");
        assert_eq!(checked_artifact(&file, &o), Ok(&b"abc"[..]));
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(checked_artifact(&file, &o), Err(Unusable::Corrupt));
        assert_eq!(checked_artifact(&file[..20], &o), Err(Unusable::Corrupt));
        assert_eq!(checked_artifact(b"garbage", &o), Err(Unusable::Corrupt));
        // The header is covered too: a flipped bit in the recorded origin.
        let mut file = o.entry(b"abc");
        file[MAGIC.len()] ^= 1;
        assert_eq!(checked_artifact(&file, &o), Err(Unusable::Corrupt));
    }

    #[test]
    fn an_entry_is_used_only_for_its_component_and_engine() {
        let mine = origin(b"word-count", 1);
        let theirs = origin(b"reconcile", 1);
        let other_engine = origin(b"word-count", 2);
        let file = theirs.entry(b"reconcile's code");
        assert_eq!(
            checked_artifact(&file, &mine),
            Err(Unusable::OtherComponent)
        );
        let file = other_engine.entry(b"code");
        assert_eq!(checked_artifact(&file, &mine), Err(Unusable::OtherEngine));
    }

    #[test]
    fn dir_defaults() {
        assert_eq!(
            dir_from(None, Some("/x".into()), Some("/home/u".into())).unwrap(),
            Path::new("/x/weir")
        );
        assert_eq!(
            dir_from(None, None, Some("/home/u".into())).unwrap(),
            Path::new("/home/u/.cache/weir")
        );
        assert!(dir_from(Some("".into()), None, Some("/h".into())).is_none());
        assert!(dir_from(None, None, None).is_none());
    }
}
