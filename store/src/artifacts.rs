//! Where a run's screenshots and films are kept, under the paths its
//! `cases.jsonl` names (`<case id>/01-app-login.png`): a folder per run in a
//! directory, behind one trait so that an object store can take its place.
//!
//! Files arrive from workers in pieces on their link (the coordinator's
//! assembler) and from `lynkeus report push`; the dashboard, its API and `argus run --out`
//! read them back. Every path is checked before it touches the filesystem,
//! and every file is written whole or not at all.

use std::path::PathBuf;
use std::sync::Arc;

use argus_proto::artifacts::{MAX_FILE_BYTES, join};

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{0}")]
    BadPath(String),
    #[error("{path}: {size} bytes is more than the {limit} a file may have")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
}

/// Keeps and returns a run's files.
#[tonic::async_trait]
pub trait ArtifactStore: Send + Sync + 'static {
    /// Keeps `bytes` as `path` of `run_id`, replacing what was there.
    async fn put(&self, run_id: &str, path: &str, bytes: Vec<u8>) -> Result<(), ArtifactError>;
    /// The file, or `None` when there is none.
    async fn get(&self, run_id: &str, path: &str) -> Result<Option<Vec<u8>>, ArtifactError>;
    /// Removes every file of `run_id` (retention); nothing to remove is fine.
    async fn remove_run(&self, run_id: &str) -> Result<(), ArtifactError>;
}

pub type Artifacts = Arc<dyn ArtifactStore>;

/// A run id as a folder name: what the store made it (a UUID), and never a
/// path of its own.
fn run_folder(run_id: &str) -> Result<&str, ArtifactError> {
    if run_id.is_empty() || run_id.len() > 128 || !run_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ArtifactError::BadPath(format!("{run_id:?} is not a run id")));
    }
    Ok(run_id)
}

/// Files in `root/<run id>/<path>`.
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store in `root`, made if it is not there; the error names the folder.
    pub fn open(root: PathBuf) -> Result<Self, ArtifactError> {
        std::fs::create_dir_all(&root).map_err(|error| ArtifactError::Io {
            path: format!("cannot make the artifacts folder {}", root.display()),
            error,
        })?;
        Ok(Self { root })
    }

    fn file(&self, run_id: &str, path: &str) -> Result<PathBuf, ArtifactError> {
        join(&self.root.join(run_folder(run_id)?), path).map_err(|bad| ArtifactError::BadPath(bad.to_string()))
    }
}

#[tonic::async_trait]
impl ArtifactStore for DirStore {
    async fn put(&self, run_id: &str, path: &str, bytes: Vec<u8>) -> Result<(), ArtifactError> {
        let file = self.file(run_id, path)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(ArtifactError::TooLarge { path: path.into(), size: bytes.len() as u64, limit: MAX_FILE_BYTES });
        }
        let io = |error| ArtifactError::Io { path: path.into(), error };
        if let Some(folder) = file.parent() {
            tokio::fs::create_dir_all(folder).await.map_err(io)?;
        }
        // Whole or not at all: a reader never sees half a picture.
        let partial = file.with_extension(format!("partial-{}", uuid::Uuid::new_v4()));
        tokio::fs::write(&partial, &bytes).await.map_err(io)?;
        tokio::fs::rename(&partial, &file).await.map_err(io)
    }

    async fn get(&self, run_id: &str, path: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        let file = self.file(run_id, path)?;
        match tokio::fs::read(&file).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(ArtifactError::Io { path: path.into(), error }),
        }
    }

    async fn remove_run(&self, run_id: &str) -> Result<(), ArtifactError> {
        let folder = self.root.join(run_folder(run_id)?);
        match tokio::fs::remove_dir_all(&folder).await {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(ArtifactError::Io { path: folder.display().to_string(), error })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_paths_and_run_ids_touch_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::open(dir.path().join("store")).unwrap();
        for (run, path) in [("r-1", "../escape.png"), ("../r", "a.png"), ("r/1", "a.png"), ("r-1", "/etc/x")] {
            assert!(
                matches!(store.put(run, path, b"x".to_vec()).await, Err(ArtifactError::BadPath(_))),
                "{run} {path}"
            );
        }
        assert!(!dir.path().join("escape.png").exists());
    }
}
