//! Where the coordinator keeps the runs' app builds: one file per build,
//! named by its sha256 (`sha256/<hex>`), written under `partial/` while
//! it arrives and moved into place only once its bytes match its sha256
//! and the coordinator has read what the build is itself. An upload cut
//! short leaves its partial file, which the next upload resumes.

use std::path::{Path, PathBuf};

/// The largest build taken by default (Device Farm's cap).
pub const MAX_BUILD_BYTES: u64 = 4 << 30;

#[derive(Debug)]
pub struct BuildFiles {
    dir: PathBuf,
    /// The largest build taken.
    pub max_bytes: u64,
    /// Builds being received: one upload of a build at a time, so that two
    /// never write one partial file.
    receiving: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// A build being received; let go when dropped.
pub struct Receiving<'a> {
    files: &'a BuildFiles,
    sha256: String,
}

impl Drop for Receiving<'_> {
    fn drop(&mut self) {
        self.files.receiving.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.sha256);
    }
}

impl BuildFiles {
    /// The builds folder at `dir`, made if it is not there.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir.join("sha256"))?;
        std::fs::create_dir_all(dir.join("partial"))?;
        Ok(Self { dir: dir.to_owned(), max_bytes: MAX_BUILD_BYTES, receiving: Default::default() })
    }

    /// Claims the upload of `sha256`; `None` while another upload of it runs.
    pub fn receive(&self, sha256: &str) -> Option<Receiving<'_>> {
        let fresh = self.receiving.lock().unwrap_or_else(|p| p.into_inner()).insert(sha256.to_owned());
        fresh.then(|| Receiving { files: self, sha256: sha256.to_owned() })
    }

    /// Where a kept build is.
    pub fn kept(&self, sha256: &str) -> PathBuf {
        self.dir.join("sha256").join(sha256)
    }

    /// Where a build is written while it arrives.
    pub fn partial(&self, sha256: &str) -> PathBuf {
        self.dir.join("partial").join(sha256)
    }

    /// How much of a build an upload cut short left (0 if none).
    pub fn received(&self, sha256: &str) -> u64 {
        std::fs::metadata(self.partial(sha256)).map_or(0, |m| m.len())
    }
}
