//! A slot's device log: its `log` hook runs for the whole attempt and
//! what it prints (stdout and stderr) is kept as the attempt's
//! `device.log`, shipped with its screenshots and films.
//!
//! ```toml
//! hooks.log = "xcrun simctl spawn {udid} log stream --style compact --predicate 'process == \"Shop\"'"
//! hooks.log = "adb -s {serial} logcat -v threadtime"
//! ```
//!
//! A flood is bounded: the first [`HEAD_BYTES`] and the last
//! [`TAIL_BYTES`] are kept, with a line that says how much between them was
//! left out. An attempt ends at its first failure, so its tail holds what
//! the device said around it. The command is stopped with SIGINT when the
//! attempt ends (then killed), in a process group of its own.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tracing::warn;

use crate::slots::{HookError, Placeholder, hook_command};

/// What of the log's start is kept.
pub const HEAD_BYTES: usize = 32 * 1024;
/// What of its end is kept.
pub const TAIL_BYTES: usize = 224 * 1024;
/// How long a stopped log command may take to end.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The bounded copy of what a log command printed.
#[derive(Debug, Default)]
pub struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    left_out: u64,
}

impl Kept {
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(TAIL_BYTES);
        if over > 0 {
            self.tail.drain(..over);
            self.left_out += over as u64;
        }
    }

    /// The log as kept: its head, a line that says what was left out, its
    /// tail from its first whole line.
    pub fn text(&self) -> Vec<u8> {
        let mut text = self.head.clone();
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.left_out == 0 {
            text.extend_from_slice(&tail);
            return text;
        }
        let from = tail.iter().position(|b| *b == b'\n').map_or(0, |n| n + 1);
        let dropped = self.left_out + from as u64;
        if !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(format!("… {dropped} bytes of the device log left out …\n").as_bytes());
        text.extend_from_slice(&tail[from..]);
        text
    }
}

/// A log command running for an attempt.
pub struct DeviceLog {
    child: tokio::process::Child,
    reading: tokio::task::JoinHandle<Kept>,
    file: PathBuf,
}

impl DeviceLog {
    /// Starts `command`, keeping what it prints for `file`.
    pub fn start(command: &str, placeholders: &[Placeholder], file: PathBuf) -> Result<Self, HookError> {
        let mut child = hook_command(command, placeholders)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| HookError::NotStarted {
                which: "log".into(),
                command: command.to_owned(),
                error: e.to_string(),
            })?;
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        // Ends when both pipes close: the command ended, or was stopped.
        #[allow(clippy::disallowed_methods)] // Awaited by `stop`, which every attempt reaches.
        let reading = tokio::spawn(async move {
            let mut kept = Kept::default();
            let (mut out, mut err) = (stdout.map(Reader::new), stderr.map(Reader::new));
            loop {
                let piece = tokio::select! {
                    piece = next(&mut out) => piece,
                    piece = next(&mut err) => piece,
                    else => break,
                };
                match piece {
                    Some(bytes) => kept.push(&bytes),
                    None if out.is_none() && err.is_none() => break,
                    None => {}
                }
            }
            kept
        });
        Ok(Self { child, reading, file })
    }

    /// The log of attempt `attempt` of `case_id`, kept under `root`; none,
    /// said in the log, when its command cannot start.
    pub fn of_attempt(
        command: &str,
        placeholders: &[Placeholder],
        root: &Path,
        case_id: &str,
        attempt: u32,
    ) -> Option<Self> {
        let path = argus_proto::artifacts::log_path(case_id, attempt);
        crate::camera::start_in(root, &path, "the attempt's device log is not kept", |file| {
            Self::start(command, placeholders, file)
        })
    }

    /// Stops the command and writes what it printed; whether the file was
    /// written.
    pub async fn stop(mut self) -> bool {
        let pid = self.child.id();
        crate::slots::stop_group(&mut self.child, STOP_WAIT).await;
        // What it started in its group goes too: their pipes close with them.
        if let Some(pid) = pid {
            crate::slots::signal_group("-KILL", pid).await;
        }
        let kept = match tokio::time::timeout(STOP_WAIT, &mut self.reading).await {
            Ok(Ok(kept)) => kept,
            _ => {
                self.reading.abort();
                warn!(file = %self.file.display(), "the log hook's output did not close; its log is left out");
                return false;
            }
        };
        let written = async {
            tokio::fs::create_dir_all(self.file.parent().unwrap_or(Path::new("."))).await?;
            tokio::fs::write(&self.file, kept.text()).await
        };
        match written.await {
            Ok(()) => true,
            Err(error) => {
                warn!(file = %self.file.display(), %error, "cannot write the device log");
                false
            }
        }
    }
}

/// A pipe read in pieces.
struct Reader<R> {
    inner: R,
    buffer: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    fn new(inner: R) -> Self {
        Self { inner, buffer: vec![0; 16 * 1024] }
    }
}

/// The next piece of a pipe; `None` once it closed (and it is let go).
async fn next<R: AsyncRead + Unpin>(reader: &mut Option<Reader<R>>) -> Option<Vec<u8>> {
    let Some(r) = reader.as_mut() else { return std::future::pending().await };
    match r.inner.read(&mut r.buffer).await {
        Ok(0) | Err(_) => {
            *reader = None;
            None
        }
        Ok(n) => Some(r.buffer[..n].to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_keeps_its_head_and_its_tail_and_says_what_went() {
        let mut kept = Kept::default();
        kept.push(b"first line\n");
        for n in 0..100_000 {
            kept.push(format!("line {n}\n").as_bytes());
        }
        let text = String::from_utf8(kept.text()).unwrap();
        assert!(text.len() <= HEAD_BYTES + TAIL_BYTES + 100, "{}", text.len());
        assert!(text.starts_with("first line\nline 0\n"));
        assert!(text.ends_with("line 99999\n"));
        assert!(text.contains(" bytes of the device log left out …\nline "), "cut at a whole line");
        let mut small = Kept::default();
        small.push(b"a\nb\n");
        assert_eq!(small.text(), b"a\nb\n");
    }
}
