//! Screenshots of an attempt (spec §1.12): after a step, the app is let
//! settle (`idle {700, 3000}`) and pictured into
//! `<case id>/NN-<slug>.png` under the run directory, and the step names
//! the file. The host's own camera (a grid slot's `screenshot` hook: `xcrun
//! simctl io … screenshot`, `adb exec-out screencap`) wins over the app's
//! `screenshot {path}` command, since whoever set it up chose it; with
//! neither, no picture is taken and nothing fails.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use argus_proto::run::StepStatus;
use serde_json::json;
use tracing::warn;

use super::{Attempt, Device};

/// Why a camera took no picture: its own error (a hook that failed, timed
/// out or did not start), kept whole.
pub type CameraError = Box<dyn std::error::Error + Send + Sync>;

/// A way to picture a device's screen that is not the app's own.
pub trait Camera: Send + Sync {
    /// Writes a picture of the screen to `file`.
    fn screenshot<'a>(&'a self, file: &'a Path) -> Pin<Box<dyn Future<Output = Result<(), CameraError>> + Send + 'a>>;
}

/// When an attempt's steps are pictured, and where the pictures go.
#[derive(Clone)]
pub struct Pictures {
    /// The run directory the pictures' paths are relative to.
    pub root: PathBuf,
    /// After every `app.*` or macro step that passed or failed (lynkeus'
    /// `--screenshots`), rather than only after a failed step.
    pub every_step: bool,
    pub camera: Option<Arc<dyn Camera>>,
    /// When the attempt's film started: each step then records its place in
    /// it (`videoS`, seconds to the step's end).
    pub film_started: Option<Instant>,
}

impl Pictures {
    /// Whether a step that ended `status` is pictured.
    pub fn wants(&self, status: StepStatus, app_or_macro: bool) -> bool {
        match status {
            StepStatus::Failed => true,
            StepStatus::Passed => self.every_step && app_or_macro,
            StepStatus::Skipped | StepStatus::Unsupported => false,
        }
    }
}

/// How long the app may take to settle before its picture, as lynkeus waits.
const SETTLE: (u64, u64) = (700, 3000);
/// How long the app's `screenshot` may take: a frozen app must not hold a
/// failed attempt for a whole call timeout more.
const SCREENSHOT_CALL: std::time::Duration = std::time::Duration::from_secs(5);

impl<D: Device> Attempt<'_, D> {
    /// Pictures the screen into `path` (relative to the run directory);
    /// the path when a picture was written.
    pub(super) async fn picture(&self, pictures: &Pictures, path: String) -> Option<String> {
        let file = pictures.root.join(&path);
        let has_command = self.device.hello().is_some_and(|h| h.has_command("screenshot"));
        if pictures.camera.is_none() && !has_command {
            return None;
        }
        if let Some(folder) = file.parent()
            && let Err(error) = std::fs::create_dir_all(folder)
        {
            warn!(folder = %folder.display(), %error, "cannot make the folder of a screenshot");
            return None;
        }
        let settled = self.idle(SETTLE.0, SETTLE.1).await.is_ok();
        let taken = match &pictures.camera {
            Some(camera) => camera.screenshot(&file).await,
            // An app that does not answer `idle` (frozen, gone) is not asked
            // for a picture either: the host's camera can still take one.
            None if !settled => return None,
            None => {
                let params = json!({ "path": file.display().to_string() });
                self.call("screenshot", Some(params), SCREENSHOT_CALL)
                    .await
                    .map(drop)
                    .map_err(|e| CameraError::from(e.message))
            }
        };
        match taken {
            Ok(()) if file.is_file() => Some(path),
            Ok(()) => {
                warn!(file = %file.display(), "the screenshot left no file");
                None
            }
            Err(error) => {
                warn!(%error, "no screenshot");
                None
            }
        }
    }
}
