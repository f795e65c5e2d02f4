//! The project's fixtures process (spec §1.11): started once per run with
//! `sh -c`, one JSON line out per request and one JSON line back.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::shell::project_command;
use crate::config::FixturesConfig;

const STDERR_TAIL: usize = 3;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{command}: {message}")]
pub struct FixturesError {
    pub command: String,
    pub message: String,
}

struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    stderr_reader: tokio::task::JoinHandle<()>,
}

pub struct Fixtures {
    config: FixturesConfig,
    process: tokio::sync::Mutex<Option<Process>>,
}

impl Fixtures {
    pub fn new(config: FixturesConfig) -> Self {
        Self { config, process: tokio::sync::Mutex::new(None) }
    }

    /// Sends `{"command", "params", "env"}` and reads the answer. An answer
    /// with `"ok": false` is an error.
    pub async fn request(&self, command: &str, params: &Map<String, Value>) -> Result<Value, FixturesError> {
        let fail = |message: String| FixturesError { command: command.to_owned(), message };
        let mut guard = self.process.lock().await;
        if guard.is_none() {
            *guard = Some(self.start().map_err(fail)?);
        }
        let process = guard.as_mut().expect("started above");
        let line = json!({"command": command, "params": params, "env": env_of(params)}).to_string() + "\n";
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let exchange = async {
            process.stdin.write_all(line.as_bytes()).await?;
            process.stdin.flush().await?;
            // Only lines that start with `{` are answers; the rest is chatter.
            while let Some(line) = process.stdout.next_line().await? {
                if line.trim_start().starts_with('{') {
                    return Ok(Some(line));
                }
            }
            Ok::<_, std::io::Error>(None)
        };
        let answer = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => {
                return Err(fail(format!("the fixtures command did not answer within {} ms", self.config.timeout_ms)));
            }
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None) | Err(_)) => {
                let _ = process.child.wait().await;
                let _ = tokio::time::timeout(Duration::from_secs(1), &mut process.stderr_reader).await;
                let tail: Vec<String> = process.stderr.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
                *guard = None;
                return Err(fail(format!("the fixtures command ended: {}", tail.join(" · "))));
            }
        };
        let answer: Value = serde_json::from_str(&answer)
            .map_err(|e| fail(format!("the fixtures command answered a line that is not JSON: {e}")))?;
        if answer.get("ok") == Some(&Value::Bool(false)) {
            let why = ["error", "message"]
                .iter()
                .find_map(|k| answer.get(*k).and_then(Value::as_str))
                .unwrap_or("ok=false")
                .to_owned();
            return Err(fail(why));
        }
        Ok(answer)
    }

    /// `lynkeus.describe`: the fixtures the server serves, when it says.
    pub async fn describe(&self) -> Result<Option<Vec<String>>, FixturesError> {
        let answer = match self.request("lynkeus.describe", &Map::new()).await {
            Ok(answer) => answer,
            // A server that does not describe itself turns the check off.
            Err(e) if !e.message.starts_with("the fixtures command") => return Ok(None),
            Err(e) => return Err(e),
        };
        let commands = answer
            .get("commands")
            .and_then(Value::as_array)
            .and_then(|list| list.iter().map(|c| c.as_str().map(str::to_owned)).collect::<Option<Vec<String>>>());
        Ok(commands)
    }

    /// Ends the process: stdin closed, then killed if it lingers.
    pub async fn close(&self) {
        if let Some(mut process) = self.process.lock().await.take() {
            drop(process.stdin);
            if tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await.is_err() {
                let _ = process.child.kill().await;
            }
        }
    }

    fn start(&self) -> Result<Process, String> {
        let mut command = project_command(&self.config.command);
        command
            .envs(&self.config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        #[cfg(unix)]
        command.process_group(0);
        let mut child =
            command.spawn().map_err(|e| format!("cannot start the fixtures command `{}`: {e}", self.config.command))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        let mut errors = BufReader::new(child.stderr.take().expect("piped")).lines();
        let stderr_reader = argus_proto::task::spawn("fixtures stderr", async move {
            while let Ok(Some(line)) = errors.next_line().await {
                tracing::debug!(target: "fixtures", "{line}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
        Ok(Process { child, stdin, stdout, stderr, stderr_reader })
    }
}

/// `params` as environment variables: `userId` → `USER_ID`, values as
/// strings (objects and lists as JSON), nulls left out.
pub fn env_of(params: &Map<String, Value>) -> Map<String, Value> {
    params
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (upper_snake(k), Value::String(value))
        })
        .collect()
}

fn upper_snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for c in name.chars() {
        if previous_lower && c.is_ascii_uppercase() {
            out.push('_');
        }
        previous_lower = c.is_ascii_lowercase();
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keys_and_values() {
        let params = json!({"userId": "u_1", "tags": ["a"], "n": null, "points": 25});
        assert_eq!(
            Value::Object(env_of(params.as_object().unwrap())),
            json!({"USER_ID": "u_1", "TAGS": "[\"a\"]", "POINTS": "25"})
        );
    }

    fn fixtures(script: &str) -> Fixtures {
        Fixtures::new(FixturesConfig { command: script.into(), cwd: None, env: Default::default(), timeout_ms: 2_000 })
    }

    #[tokio::test]
    async fn one_line_out_one_line_back() {
        let f = fixtures(
            r#"while read line; do echo "chatter"; case "$line" in *describe*) echo '{"commands":["create_user"]}';; *nope*) echo '{"ok":false,"error":"no user u_9"}';; *) echo '{"ok":true,"user_id":"u_1"}';; esac; done"#,
        );
        assert_eq!(f.describe().await.unwrap(), Some(vec!["create_user".to_owned()]));
        let answer = f.request("create_user", json!({"name": "Ana"}).as_object().unwrap()).await.unwrap();
        assert_eq!(answer, json!({"ok": true, "user_id": "u_1"}));
        let err = f.request("nope", &Map::new()).await.unwrap_err();
        assert_eq!(err.to_string(), "nope: no user u_9");
        f.close().await;
    }

    #[tokio::test]
    async fn a_fixtures_command_that_dies_is_named_with_its_last_words() {
        let f = fixtures("echo 'cannot reach the database' >&2; echo 'giving up' >&2; exit 3");
        let err = f.request("create_user", &Map::new()).await.unwrap_err();
        assert_eq!(err.to_string(), "create_user: the fixtures command ended: cannot reach the database · giving up");
    }

    #[tokio::test]
    async fn a_silent_fixtures_command_times_out() {
        let f = Fixtures::new(FixturesConfig {
            command: "sleep 5".into(),
            cwd: None,
            env: Default::default(),
            timeout_ms: 200,
        });
        let err = f.request("create_user", &Map::new()).await.unwrap_err();
        assert_eq!(err.to_string(), "create_user: the fixtures command did not answer within 200 ms");
        f.close().await;
    }
}
