//! Device slots: what each driver port serves, read from flags or a
//! `worker.toml`, and the hook commands a slot runs around each attempt.
//!
//! ```toml
//! coordinator = "http://coordinator:7171"
//! name = "mac-mini-1"
//!
//! [[slot]]
//! name = "iphone-15"
//! port = 8123
//! platform = "ios"
//! udid = "5D1C…"
//! labels = { os = "17" }
//! hooks.before = "xcrun simctl launch --terminate-running-process {udid} com.example.shop"
//! hooks.on_failure = "xcrun simctl io {udid} screenshot /tmp/{case}-{attempt}.png"
//! ```
//!
//! Hooks run with `sh -c`. What they are about reaches them in the
//! environment: `ARGUS_PORT`, `ARGUS_BRIDGE`, `ARGUS_UDID`, `ARGUS_SERIAL`,
//! `ARGUS_SLOT`, `ARGUS_PLATFORM`, `ARGUS_CASE` and `ARGUS_ATTEMPT`. The
//! placeholders `{port}` … `{attempt}` stand for `"${ARGUS_PORT}"` …: a
//! quoted reference the shell expands, never text it parses, because a case
//! id is whatever a case file says (`x$(touch pwned)` runs nothing). A
//! `before` hook that fails makes the attempt an infrastructure failure (it
//! runs again elsewhere); `after` and `on_failure` failures are logged.
//! `screenshot` and `record` take pictures and films (see [`crate::camera`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// How long a hook may take.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hooks {
    pub before: Option<String>,
    pub after: Option<String>,
    pub on_failure: Option<String>,
    /// Pictures the screen into `{file}` after a failed step
    /// (`xcrun simctl io {udid} screenshot {file}`); without it the app's
    /// own `screenshot` command is used when it has one.
    pub screenshot: Option<String>,
    /// Films the attempt into `{file}`, stopped with SIGINT
    /// (`xcrun simctl io {udid} recordVideo --force {file}`).
    pub record: Option<String>,
    /// Runs for the attempt; what it prints is kept as the attempt's
    /// device log (`adb -s {serial} logcat -v threadtime`).
    pub log: Option<String>,
}

/// One device: a driver port and the app that dials it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    #[serde(default)]
    pub name: String,
    pub port: u16,
    #[serde(default = "default_platform")]
    pub platform: String,
    /// The address the app dials: 127.0.0.1 (iOS simulator) or 10.0.2.2
    /// (Android emulator). Derived from the platform when left out.
    #[serde(default)]
    pub bridge: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The simulator's UDID, for hooks.
    pub udid: Option<String>,
    /// The emulator's serial (`emulator-5554`), for hooks.
    pub serial: Option<String>,
    #[serde(default)]
    pub hooks: Hooks,
    /// Keep a record of each step (its screen's named elements, requests,
    /// events): what "since it last passed" compares. `false` keeps none.
    #[serde(default = "yes")]
    pub observe: bool,
}

fn yes() -> bool {
    true
}

fn default_platform() -> String {
    "ios".into()
}

fn bridge_for(platform: &str) -> &'static str {
    if platform == "android" { "10.0.2.2" } else { "127.0.0.1" }
}

impl SlotConfig {
    /// A slot for `port`, named after it, with the bridge its platform dials.
    pub fn for_port(port: u16, platform: &str) -> Self {
        Self {
            name: port.to_string(),
            port,
            platform: platform.into(),
            bridge: bridge_for(platform).into(),
            labels: BTreeMap::new(),
            udid: None,
            serial: None,
            hooks: Hooks::default(),
            observe: true,
        }
    }

    /// What a hook of this slot is told about an attempt: each placeholder
    /// and the environment variable that carries its value.
    pub fn placeholders(&self, case: &str, attempt: u32) -> Vec<Placeholder> {
        let value = |name, env, value: String| Placeholder { name, env, value };
        vec![
            value("{port}", "ARGUS_PORT", self.port.to_string()),
            value("{bridge}", "ARGUS_BRIDGE", self.bridge.clone()),
            value("{udid}", "ARGUS_UDID", self.udid.clone().unwrap_or_default()),
            value("{serial}", "ARGUS_SERIAL", self.serial.clone().unwrap_or_default()),
            value("{slot}", "ARGUS_SLOT", self.name.clone()),
            value("{platform}", "ARGUS_PLATFORM", self.platform.clone()),
            value("{case}", "ARGUS_CASE", case.to_owned()),
            value("{attempt}", "ARGUS_ATTEMPT", attempt.to_string()),
        ]
    }
}

/// One value a hook is told: `{case}` in its command, `ARGUS_CASE` in its
/// environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Placeholder {
    pub name: &'static str,
    pub env: &'static str,
    pub value: String,
}

/// `worker.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerFile {
    pub coordinator: Option<String>,
    pub name: Option<String>,
    pub driver_host: Option<String>,
    #[serde(default, rename = "slot")]
    pub slots: Vec<SlotConfig>,
}

impl WorkerFile {
    pub fn load(path: &Path) -> Result<Self, SlotsError> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|error| SlotsError::Unreadable { file: shown.clone(), error })?;
        Self::parse(&text, &shown)
    }

    /// Parses and checks a worker file; `shown` names it in errors.
    pub fn parse(text: &str, shown: &str) -> Result<Self, SlotsError> {
        let mut file: WorkerFile =
            toml::from_str(text).map_err(|error| SlotsError::Invalid { file: shown.to_owned(), error })?;
        check_slots(&mut file.slots, shown)?;
        Ok(file)
    }
}

/// What is wrong with a worker file or its slots, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum SlotsError {
    #[error("{file}: {error}")]
    Unreadable { file: String, error: std::io::Error },
    #[error("{file}: {error}")]
    Invalid { file: String, error: toml::de::Error },
    #[error("{file}: port {port} is given to two slots; each app must dial its own port")]
    PortTwice { file: String, port: u16 },
}

/// Why a hook failed; the command is quoted as written, without its values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    #[error("the {which} hook `{command}` did not finish within {seconds} s")]
    TimedOut { which: String, command: String, seconds: u64 },
    #[error("the {which} hook `{command}` could not start: {error}")]
    NotStarted { which: String, command: String, error: String },
    #[error("the {which} hook `{command}` exited with {code}: {last_line}")]
    Failed { which: String, command: String, code: i32, last_line: String },
}

/// Checks the slots a file gave (`shown` names it): each port once; a
/// slot's name defaults to its port and its bridge to its platform's.
pub fn check_slots(slots: &mut [SlotConfig], shown: &str) -> Result<(), SlotsError> {
    let mut ports = std::collections::HashSet::new();
    for slot in slots {
        if !ports.insert(slot.port) {
            return Err(SlotsError::PortTwice { file: shown.to_owned(), port: slot.port });
        }
        if slot.name.is_empty() {
            slot.name = slot.port.to_string();
        }
        if slot.bridge.is_empty() {
            slot.bridge = bridge_for(&slot.platform).into();
        }
    }
    Ok(())
}

/// `sh -c` of a hook's command: its values in the environment, each
/// placeholder replaced by a quoted reference to its variable.
pub fn hook_command(command: &str, placeholders: &[Placeholder]) -> tokio::process::Command {
    let mut script = command.to_owned();
    let mut child = tokio::process::Command::new("sh");
    for placeholder in placeholders {
        script = script.replace(placeholder.name, &format!("\"${{{}}}\"", placeholder.env));
        child.env(placeholder.env, &placeholder.value);
    }
    child.arg("-c").arg(script);
    child
}

/// Stops a hook that runs in a process group of its own (`record`, `log`):
/// SIGINT to the group, as recorders expect, then SIGKILL to the group
/// when it has not ended within `wait`; whether it ended by itself.
pub async fn stop_group(child: &mut tokio::process::Child, wait: Duration) -> bool {
    let pid = child.id();
    if let Some(pid) = pid {
        signal_group("-INT", pid).await;
    }
    if tokio::time::timeout(wait, child.wait()).await.is_ok() {
        return true;
    }
    if let Some(pid) = pid {
        signal_group("-KILL", pid).await;
    }
    let _ = child.kill().await;
    false
}

/// Sends `signal` to process group `pid`: the `kill` command, not a signal
/// call (the crate forbids unsafe code; this runs once per attempt).
pub async fn signal_group(signal: &str, pid: u32) {
    let _ = tokio::process::Command::new("kill")
        .args([signal, "--", &format!("-{pid}")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await;
}

/// Runs a hook: its values in the environment, each placeholder replaced by
/// a quoted reference to its variable. Errors quote the command as written,
/// without the values.
pub async fn run_hook(which: &str, command: &str, placeholders: &[Placeholder]) -> Result<(), HookError> {
    run_hook_within(which, command, placeholders, HOOK_TIMEOUT).await
}

/// [`run_hook`] with a time limit of its own.
pub async fn run_hook_within(
    which: &str,
    command: &str,
    placeholders: &[Placeholder],
    limit: Duration,
) -> Result<(), HookError> {
    let (which, line) = (which.to_owned(), command.to_owned());
    let child = hook_command(command, placeholders).stdin(std::process::Stdio::null()).kill_on_drop(true).output();
    let started = std::time::Instant::now();
    let ran = tokio::time::timeout(limit, child).await;
    crate::metrics::hook(&which, started.elapsed());
    match ran {
        Err(_) => Err(HookError::TimedOut { which, command: line, seconds: limit.as_secs() }),
        Ok(Err(e)) => Err(HookError::NotStarted { which, command: line, error: e.to_string() }),
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last_line = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_owned();
            Err(HookError::Failed { which, command: line, code: output.status.code().unwrap_or(-1), last_line })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
coordinator = "http://coordinator:7171"
name = "mac-mini-1"

[[slot]]
name = "iphone-15"
port = 8123
udid = "5D1C"
labels = { os = "17" }
hooks.before = "echo {udid} {port}"

[[slot]]
port = 8124
platform = "android"
serial = "emulator-5554"
"#;

    #[test]
    fn the_example_worker_file_in_deploy_is_one_a_worker_takes() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/worker.toml");
        let file = WorkerFile::load(&path).unwrap();
        assert_eq!(file.slots.len(), 2);
        assert_eq!(file.slots[0].labels["model"], "iPhone 15");
        assert!(file.slots[0].hooks.before.as_deref().unwrap().contains("SIMCTL_CHILD_LYNKEUS_PORT={port}"));
        assert!(file.slots[0].hooks.screenshot.is_some() && file.slots[0].hooks.record.is_some());
    }

    #[test]
    fn a_worker_file_with_slots_labels_and_hooks() {
        let file = WorkerFile::parse(FILE, "worker.toml").unwrap();
        assert_eq!(file.coordinator.as_deref(), Some("http://coordinator:7171"));
        assert_eq!(file.slots[0].name, "iphone-15");
        assert_eq!(file.slots[0].bridge, "127.0.0.1");
        assert_eq!(file.slots[0].labels["os"], "17");
        assert_eq!(file.slots[1].name, "8124");
        assert_eq!(file.slots[1].bridge, "10.0.2.2", "an emulator reaches the host at 10.0.2.2");
    }

    #[test]
    fn bad_worker_files_are_refused_with_the_reason() {
        let twice = "[[slot]]\nport = 8123\n[[slot]]\nport = 8123\n";
        assert_eq!(
            WorkerFile::parse(twice, "w.toml").unwrap_err().to_string(),
            "w.toml: port 8123 is given to two slots; each app must dial its own port"
        );
        let unknown = WorkerFile::parse("[[slot]]\nport = 8123\ncolour = \"red\"\n", "w.toml").unwrap_err().to_string();
        assert!(unknown.starts_with("w.toml: ") && unknown.contains("colour"), "{unknown}");
    }

    #[tokio::test]
    async fn hooks_get_their_placeholders_and_report_failure() {
        let slot = WorkerFile::parse(FILE, "worker.toml").unwrap().slots.remove(0);
        let out = std::env::temp_dir().join(format!("argus-hook-{}", std::process::id()));
        let command = format!("echo {{udid}}-{{port}}-{{case}}-{{attempt}} > {}", out.display());
        run_hook("before", &command, &slot.placeholders("login", 2)).await.unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "5D1C-8123-login-2");
        let _ = std::fs::remove_file(out);
        let err = run_hook("before", "echo 'no such simulator' >&2; exit 4", &[]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "the before hook `echo 'no such simulator' >&2; exit 4` exited with 4: no such simulator"
        );
    }

    #[tokio::test]
    async fn a_hostile_case_id_reaches_a_hook_as_text_and_runs_nothing() {
        let slot = WorkerFile::parse(FILE, "worker.toml").unwrap().slots.remove(0);
        let dir = std::env::temp_dir().join(format!("argus-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pwned = dir.join("pwned");
        let case = format!("x$(touch {}); `touch {}` it's \"[a=1]\" *", pwned.display(), pwned.display());
        let out = dir.join("out");
        let placeholders = slot.placeholders(&case, 1);
        // A placeholder on its own, inside other text, and the variable itself.
        let command = format!(
            "printf '%s\\n' {{case}} > {out}; printf '%s\\n' pre-{{case}}-post >> {out}; printf '%s\\n' \"$ARGUS_CASE\" >> {out}",
            out = out.display()
        );
        run_hook("before", &command, &placeholders).await.unwrap();
        let written = std::fs::read_to_string(&out).unwrap();
        assert_eq!(written, format!("{case}\npre-{case}-post\n{case}\n"));
        assert!(!pwned.exists(), "the case id ran a command");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
