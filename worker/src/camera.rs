//! A slot's screenshots and films, from its `screenshot` and `record` hook
//! commands, and the files of an attempt shipped to the coordinator.
//!
//! ```toml
//! hooks.screenshot = "xcrun simctl io {udid} screenshot {file}"
//! hooks.record = "xcrun simctl io {udid} recordVideo --force {file}"
//! ```
//!
//! `{file}` (`ARGUS_FILE`) is where the picture or film must be written. A
//! `record` command runs for the whole attempt and is stopped with SIGINT,
//! as `recordVideo` and `screenrecord` expect; it then has 10 s to finish
//! its file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::{Duration, Instant};

use argus_cases::runner::{Camera, CameraError};
use argus_proto::grpc::{self, worker_message};
use argus_proto::run::RunCase;
use tokio::sync::mpsc;
use tracing::warn;

use crate::slots::{HookError, Placeholder, hook_command, run_hook_within};

/// How long a screenshot may take: a failed attempt waits for it.
pub const SCREENSHOT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a stopped recorder may take to finish its file.
const RECORD_FINISH: Duration = Duration::from_secs(10);
/// The size of the pieces a file travels in.
const CHUNK: usize = 256 * 1024;

fn with_file(placeholders: &[Placeholder], file: &Path) -> Vec<Placeholder> {
    let mut all = placeholders.to_vec();
    all.push(Placeholder { name: "{file}", env: "ARGUS_FILE", value: file.display().to_string() });
    all
}

/// Starts what writes an attempt's file at `path` under `root` (its folder
/// made first); none, said in the log as `what`, when it cannot.
pub fn start_in<T>(
    root: &Path,
    path: &str,
    what: &str,
    start: impl FnOnce(PathBuf) -> Result<T, HookError>,
) -> Option<T> {
    let started = argus_proto::artifacts::join(root, path).map_err(|bad| bad.to_string()).and_then(|file| {
        std::fs::create_dir_all(file.parent().unwrap_or(root)).map_err(|e| e.to_string())?;
        start(file).map_err(|e| e.to_string())
    });
    started.inspect_err(|error| warn!(%error, "{what}")).ok()
}

/// The slot's `screenshot` hook as the runner's camera.
pub struct HookCamera {
    pub command: String,
    pub placeholders: Vec<Placeholder>,
}

impl Camera for HookCamera {
    fn screenshot<'a>(&'a self, file: &'a Path) -> Pin<Box<dyn Future<Output = Result<(), CameraError>> + Send + 'a>> {
        let placeholders = with_file(&self.placeholders, file);
        Box::pin(async move {
            run_hook_within("screenshot", &self.command, &placeholders, SCREENSHOT_TIMEOUT)
                .await
                .map_err(CameraError::from)
        })
    }
}

/// A film being recorded by the slot's `record` hook.
pub struct Recording {
    child: tokio::process::Child,
    pub file: PathBuf,
    pub started: Instant,
}

impl Recording {
    /// Starts `command` in a process group of its own, writing to `file`.
    pub fn start(command: &str, placeholders: &[Placeholder], file: PathBuf) -> Result<Self, HookError> {
        let child = hook_command(command, &with_file(placeholders, &file))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| HookError::NotStarted {
                which: "record".into(),
                command: command.to_owned(),
                error: e.to_string(),
            })?;
        Ok(Self { child, file, started: Instant::now() })
    }

    /// Films attempt `attempt` of `case_id` into its place under `root`;
    /// none, said in the log, when the recorder cannot start.
    pub fn of_attempt(
        command: &str,
        placeholders: &[Placeholder],
        root: &Path,
        case_id: &str,
        attempt: u32,
    ) -> Option<Self> {
        let path = argus_proto::artifacts::video_path(case_id, attempt);
        start_in(root, &path, "the attempt is not filmed", |file| Self::start(command, placeholders, file))
    }

    /// Stops the recorder (SIGINT to its group, SIGKILL when it does not
    /// end in time); whether it left its file.
    pub async fn stop(mut self) -> bool {
        if !crate::slots::stop_group(&mut self.child, RECORD_FINISH).await {
            warn!(file = %self.file.display(), "the record hook did not end within 10 s of SIGINT; killed");
        }
        self.file.is_file()
    }
}

/// Where an attempt's screenshots and film are written, shipped from, and
/// removed with it. The folder is made only when a file is written into it
/// (the runner's pictures and the recorder make their folders): most
/// attempts take no picture, and a `mkdir` and `rmdir` for every attempt
/// had been an eighth of the grid's CPU at 500 devices.
pub(crate) struct AttemptFiles {
    root: PathBuf,
}

impl AttemptFiles {
    pub(crate) fn new() -> Self {
        Self { root: std::env::temp_dir().join(format!("argus-attempt-{:016x}", rand::random::<u64>())) }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for AttemptFiles {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.root) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                warn!(folder = %self.root.display(), %error, "cannot remove an attempt's files");
            }
            _ => {}
        }
    }
}

/// Sends the files `attempt` names, from `root`, up the link in pieces.
/// A file that cannot be read is left out of the attempt's line rather than
/// named without its bytes.
pub async fn ship(
    out: &mpsc::Sender<grpc::WorkerMessage>,
    lease: &grpc::Lease,
    root: &Path,
    attempt: &mut RunCase,
) -> Result<(), mpsc::error::SendError<grpc::WorkerMessage>> {
    for path in argus_proto::artifacts::files_of(attempt) {
        let bytes = match argus_proto::artifacts::join(root, &path) {
            Ok(file) => tokio::fs::read(&file).await.map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        let bytes = match bytes {
            Ok(bytes) if (bytes.len() as u64) <= argus_proto::artifacts::MAX_FILE_BYTES => bytes,
            Ok(bytes) => {
                warn!(%path, size = bytes.len(), "a file of the attempt is too large to keep; left out");
                argus_proto::artifacts::forget(attempt, &path);
                continue;
            }
            Err(error) => {
                warn!(%path, %error, "a file the attempt names cannot be read; left out");
                argus_proto::artifacts::forget(attempt, &path);
                continue;
            }
        };
        // An empty file is still one (last) piece.
        let pieces = bytes.len().div_ceil(CHUNK).max(1);
        for index in 0..pieces {
            let data = bytes[(index * CHUNK).min(bytes.len())..((index + 1) * CHUNK).min(bytes.len())].to_vec();
            out.send(chunk(lease, &path, data, index + 1 == pieces)).await?;
        }
    }
    Ok(())
}

fn chunk(lease: &grpc::Lease, path: &str, data: Vec<u8>, last: bool) -> grpc::WorkerMessage {
    let piece = grpc::ArtifactChunk {
        lease_id: lease.lease_id.clone(),
        run_id: lease.run_id.clone(),
        path: path.to_owned(),
        data,
        last,
    };
    grpc::WorkerMessage { kind: Some(worker_message::Kind::Artifact(piece)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempts_folder_is_made_by_what_writes_in_it_and_goes_with_it() {
        let files = AttemptFiles::new();
        let root = files.root().to_owned();
        assert!(!root.exists(), "nothing is made before a file is written");
        drop(files);
        let files = AttemptFiles::new();
        let root = files.root().to_owned();
        std::fs::create_dir_all(root.join("screenshots")).unwrap();
        std::fs::write(root.join("screenshots/1.png"), b"png").unwrap();
        drop(files);
        assert!(!root.exists(), "removed with its files");
    }

    #[tokio::test]
    async fn a_recorder_is_stopped_with_sigint_and_finishes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("video.mp4");
        // Writes its file only when interrupted, as recordVideo does.
        let command = "trap 'printf film > {file}; exit 0' INT; while :; do sleep 0.05; done";
        let recording = Recording::start(command, &[], file.clone()).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(recording.stop().await, "the file was written on SIGINT");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "film");
    }
}
