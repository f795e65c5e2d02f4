//! The app's health around an attempt: its memory (the headless host's
//! `memory`) before the first step and after the last, and React's render
//! time over the attempt (the agent's `profile`). Read only when the app's
//! hello lists the command, outside every step's time, and never failing
//! the attempt: a read that errs or times out leaves its part empty.

use std::time::Duration;

use argus_cases::Case;
use argus_cases::runner::Device;
use argus_proto::grpc;
use serde_json::Value;

/// How long one health read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What to read around one attempt, and what was read before it.
pub struct Health {
    memory: bool,
    profile: bool,
    start: Option<grpc::MemorySample>,
}

impl Health {
    /// What the app offers, less `profile` when the case records its own
    /// (starting it here would clear the case's recording).
    pub fn of(device: &impl Device, case: &Case) -> Self {
        let hello = device.hello();
        let has = |command: &str| hello.as_ref().is_some_and(|h| h.has_command(command));
        let case_profiles = case.all_steps().any(|s| s.verb == "app.profile");
        Self { memory: has("memory"), profile: has("profile") && !case_profiles, start: None }
    }

    /// Before the first step: the memory then, and the render recording
    /// started (the two asked at once).
    pub async fn begin(&mut self, device: &impl Device) {
        let memory = async { if self.memory { read(device, "memory", None).await } else { None } };
        let profile = async {
            match self.profile {
                true => read(device, "profile", Some(serde_json::json!({"action": "start"}))).await.is_some(),
                false => false,
            }
        };
        let (memory, profiling) = tokio::join!(memory, profile);
        self.start = memory.as_ref().and_then(memory_sample);
        self.profile = profiling;
    }

    /// After the last step: what the attempt did to the app, when anything
    /// was read (the two asked at once).
    pub async fn end(self, device: &impl Device) -> Option<grpc::AppHealth> {
        let memory = async { if self.memory { read(device, "memory", None).await } else { None } };
        let profile = async {
            match self.profile {
                true => read(device, "profile", Some(serde_json::json!({"action": "stop"}))).await,
                false => None,
            }
        };
        let (memory, profile) = tokio::join!(memory, profile);
        let (end, render) = (memory.as_ref().and_then(memory_sample), profile.as_ref().and_then(render));
        (self.start.is_some() || end.is_some() || render.is_some()).then_some(grpc::AppHealth {
            start: self.start,
            end,
            render,
        })
    }
}

async fn read(device: &impl Device, method: &str, params: Option<Value>) -> Option<Value> {
    match device.call(method, params, READ_TIMEOUT).await {
        Ok(value) => Some(value),
        Err(error) => {
            tracing::debug!(method, ?error, "the app's health read failed; the attempt goes on without it");
            None
        }
    }
}

fn number(value: &Value, key: &str) -> f64 {
    value.get(key).and_then(Value::as_f64).filter(|n| n.is_finite() && *n >= 0.0).unwrap_or(0.0)
}

fn count(value: &Value, key: &str) -> u32 {
    number(value, key).min(f64::from(u32::MAX)) as u32
}

/// `{heapUsedMb, heapTotalMb, rssMb, resets, listeners, …}`; `None` for an
/// answer without a heap.
fn memory_sample(value: &Value) -> Option<grpc::MemorySample> {
    value.get("heapUsedMb")?.as_f64()?;
    Some(grpc::MemorySample {
        heap_used_mb: number(value, "heapUsedMb"),
        heap_total_mb: number(value, "heapTotalMb"),
        rss_mb: number(value, "rssMb"),
        resets: count(value, "resets"),
        listeners: count(value, "listeners"),
    })
}

/// `{commits, ms, routes: {R: {maxMs}}}`; `None` for an answer without
/// commits, and for a recording that saw none: an app that renders outside
/// the agent's recorder (lynkeus' example app has no `auto()`) reports
/// zeros that measured nothing, and must not be charted as no rendering.
fn render(value: &Value) -> Option<grpc::RenderProfile> {
    if value.get("commits")?.as_f64()? <= 0.0 {
        return None;
    }
    let max_ms = value
        .get("routes")
        .and_then(Value::as_object)
        .map_or(0.0, |routes| routes.values().map(|r| number(r, "maxMs")).fold(0.0, f64::max));
    Some(grpc::RenderProfile { commits: count(value, "commits"), ms: number(value, "ms"), max_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_agents_answers_are_read_and_odd_ones_left_out() {
        let memory = memory_sample(&json!({"heapUsedMb": 41.5, "heapTotalMb": 60, "rssMb": 151, "resets": 3, "roots": 1, "listeners": 7, "commands": 5})).unwrap();
        assert_eq!(
            (memory.heap_used_mb, memory.heap_total_mb, memory.rss_mb, memory.resets, memory.listeners),
            (41.5, 60.0, 151.0, 3, 7)
        );
        assert_eq!(memory_sample(&json!({"rssMb": 1})), None, "no heap, no sample");
        assert_eq!(memory_sample(&json!({"heapUsedMb": "x"})), None);
        let odd = memory_sample(&json!({"heapUsedMb": 1, "rssMb": -4, "resets": 1e12})).unwrap();
        assert_eq!((odd.rss_mb, odd.resets), (0.0, u32::MAX), "negative and oversized numbers are bounded");
        let profile = render(&json!({"recording": false, "commits": 12, "ms": 30.5, "routes": {"Home": {"commits": 4, "ms": 10, "maxMs": 6.5}, "Feed": {"commits": 8, "ms": 20.5, "maxMs": 9}}})).unwrap();
        assert_eq!((profile.commits, profile.ms, profile.max_ms), (12, 30.5, 9.0));
        assert_eq!(render(&json!({"recording": true})), None, "a start's answer is no profile");
        assert_eq!(render(&json!({"commits": 0, "ms": 0, "routes": {}})), None, "no commit seen: not measured");
    }
}
