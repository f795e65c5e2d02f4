//! Screenshots and films of an attempt: where they go in a run directory,
//! and which paths a receiver accepts.
//!
//! lynkeus names them relative to the run directory, under `<case id>/`
//! (spec §1.12: `home/01-app-login.png`, `home/video.mp4`), and
//! `NN-<slug>.png` for the picture after step NN. A case id is whatever a
//! case file says, so it is made into one safe path segment first; a later
//! attempt of the same case gets a folder of its own, so that a retry does
//! not overwrite the picture of the failure that caused it.

use std::path::{Path, PathBuf};

/// The largest file a receiver keeps (a film of a long attempt fits).
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The folder of an attempt's files: `<case id>/`, or
/// `<case id>/attempt-N/` for attempt N > 1.
pub fn attempt_dir(case_id: &str, attempt: u32) -> String {
    let case = segment(case_id);
    if attempt <= 1 { case } else { format!("{case}/attempt-{attempt}") }
}

/// The picture after step `index` (0-based) labelled `label`:
/// `<attempt dir>/NN-<slug>.png`, NN the 1-based position on two digits.
pub fn screenshot_path(case_id: &str, attempt: u32, index: usize, label: &str) -> String {
    format!("{}/{:02}-{}.png", attempt_dir(case_id, attempt), index + 1, slug(label))
}

/// The film of an attempt: `<attempt dir>/video.mp4`.
pub fn video_path(case_id: &str, attempt: u32) -> String {
    format!("{}/video.mp4", attempt_dir(case_id, attempt))
}

/// The device's log during an attempt (the slot's `log` hook):
/// `<attempt dir>/device.log`, named by the attempt's `log` field.
pub fn log_path(case_id: &str, attempt: u32) -> String {
    format!("{}/device.log", attempt_dir(case_id, attempt))
}

/// The key of an attempt's record that names its device log.
pub const LOG_KEY: &str = "log";
/// The key of an attempt's record that lists the app's crashes during it:
/// `[{step, message, route, stack}]`.
pub const CRASHES_KEY: &str = "crashes";

/// lynkeus' slug of a step label: lower-cased, every run of characters
/// other than `a-z0-9` made one `-`, cut to 48 characters, with a leading
/// or trailing `-` trimmed.
pub fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let cut: String = out.chars().take(48).collect();
    let trimmed = cut.trim_matches('-');
    if trimmed.is_empty() { "step".into() } else { trimmed.into() }
}

/// A case id as one path segment: `/`, `\`, control characters and NUL
/// become `_`, and a name the filesystem reads as a folder of its own
/// (`.`, `..`, empty) is prefixed.
fn segment(id: &str) -> String {
    let cleaned: String = id.chars().map(|c| if c == '/' || c == '\\' || c.is_control() { '_' } else { c }).collect();
    match cleaned.as_str() {
        "" | "." | ".." => format!("_{cleaned}"),
        _ => cleaned,
    }
}

/// The files an attempt names, each once: its film first, then its
/// screenshots, in the order lynkeus pushes them (spec §4.1).
pub fn files_of(attempt: &crate::run::RunCase) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    let log = attempt.extra.get(LOG_KEY).and_then(|v| v.as_str()).map(str::to_owned);
    for path in
        attempt.video.iter().chain(log.as_ref()).chain(attempt.steps.iter().filter_map(|s| s.screenshot.as_ref()))
    {
        if !paths.contains(path) {
            paths.push(path.clone());
        }
    }
    paths
}

/// Removes `path` from the attempt: a file that was not kept is not named.
pub fn forget(attempt: &mut crate::run::RunCase, path: &str) {
    if attempt.video.as_deref() == Some(path) {
        attempt.video = None;
    }
    if attempt.extra.get(LOG_KEY).and_then(|v| v.as_str()) == Some(path) {
        attempt.extra.remove(LOG_KEY);
    }
    for step in &mut attempt.steps {
        if step.screenshot.as_deref() == Some(path) {
            step.screenshot = None;
        }
    }
}

/// Checks a path a sender named, relative to a run directory: not empty,
/// not absolute, no `.` or `..`, no empty or control-character segment, at
/// most 1,024 bytes. The error says what is wrong with it.
pub fn check_relative(path: &str) -> Result<(), BadPath> {
    if path.is_empty() {
        return Err(BadPath::Empty);
    }
    if path.len() > 1024 {
        return Err(BadPath::TooLong(path.len()));
    }
    if path.starts_with('/') || path.contains('\\') {
        return Err(BadPath::NotRelative(path.to_owned()));
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." || part.chars().any(char::is_control) {
            return Err(BadPath::BadPart(path.to_owned()));
        }
    }
    Ok(())
}

/// What is wrong with a file path a sender named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPath {
    #[error("an empty file path")]
    Empty,
    #[error("the file path is {0} bytes long; at most 1024")]
    TooLong(usize),
    #[error("{0:?} is not a relative path with / between its parts")]
    NotRelative(String),
    #[error("{0:?} has a part that is empty, . or .., or holds a control character")]
    BadPart(String),
}

/// `root` joined with a checked relative `path`.
pub fn join(root: &Path, path: &str) -> Result<PathBuf, BadPath> {
    check_relative(path)?;
    Ok(root.join(path))
}

/// The content type of an artifact, from its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().map(str::to_ascii_lowercase).as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("mp4") => "video/mp4",
        Some("mov") => "video/quicktime",
        Some("webm") => "video/webm",
        Some("json") => "application/json",
        Some("log" | "txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_lynkeus_names_them() {
        assert_eq!(screenshot_path("home", 1, 0, "app.login"), "home/01-app-login.png");
        assert_eq!(
            screenshot_path("home", 2, 11, "app.see: Welcome back!"),
            "home/attempt-2/12-app-see-welcome-back.png"
        );
        assert_eq!(video_path("home", 1), "home/video.mp4");
        assert_eq!(slug(&"x".repeat(60)), "x".repeat(48));
        assert_eq!(slug("--"), "step");
    }

    #[test]
    fn a_hostile_case_id_stays_one_folder() {
        assert_eq!(attempt_dir("../../etc/passwd", 1), ".._.._etc_passwd");
        assert_eq!(attempt_dir("..", 1), "_..");
        assert_eq!(attempt_dir("a\nb", 3), "a_b/attempt-3");
        for id in ["../../x", "..", ".", "", "/abs", "a\\b", "x$(rm -rf ~)"] {
            let path = screenshot_path(id, 1, 0, "s");
            assert_eq!(check_relative(&path), Ok(()), "{id:?} gave {path:?}");
        }
    }

    #[test]
    fn received_paths_are_checked() {
        assert_eq!(check_relative("home/01-a.png"), Ok(()));
        for bad in ["", "/etc/passwd", "a/../../b", "./a", "a//b", "a\\b", "a/\u{0}"] {
            assert!(check_relative(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(join(Path::new("/r"), "../x").is_err());
        assert_eq!(join(Path::new("/r"), "a/b.png").unwrap(), Path::new("/r/a/b.png"));
    }
}
