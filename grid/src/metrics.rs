//! Prometheus metrics, served at `/metrics` on the coordinator's HTTP port.
//! Counters and histograms are recorded by the owner task as things happen;
//! gauges (queue depth per run, leases, devices by state) are read from the
//! owner task at each scrape, so they are never stale.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of what [`Metrics::render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub component: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabel {
    pub run: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub platform: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    pub command: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// What the owner task knows at a scrape.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Pending attempts per run that is going.
    pub queued: Vec<(String, i64)>,
    pub leases: i64,
    /// Devices per state: idle, busy, quarantined, disconnected, …
    pub devices: Vec<(String, i64)>,
}

pub struct Metrics {
    registry: Registry,
    queue_depth: Family<RunLabel, Gauge>,
    leases_active: Gauge,
    devices: Family<StateLabel, Gauge>,
    pub leases_granted: Counter,
    pub attempt_seconds: Family<AttemptLabels, Histogram>,
    pub retries: Family<KindLabel, Counter>,
    lease_to_first_call: Histogram,
    pub sessions_started: Counter,
    sessions_ended: Family<KindLabel, Counter>,
    webdriver_seconds: Family<CommandLabels, Histogram>,
    pub live_screens: Counter,
    pub live_screen_bytes: Counter,
    /// Gauges are reset and set as one step at each scrape.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("argus");
        let queue_depth = Family::<RunLabel, Gauge>::default();
        registry.register("queue_depth", "Attempts waiting for a device, per run", queue_depth.clone());
        let leases_active = Gauge::default();
        registry.register("leases_active", "Leases held by devices now", leases_active.clone());
        let devices = Family::<StateLabel, Gauge>::default();
        registry.register("devices", "Devices by state", devices.clone());
        let leases_granted = Counter::default();
        registry.register("leases_granted", "Leases committed and sent", leases_granted.clone());
        let attempt_seconds = Family::<AttemptLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.25, 2.0, 12))
        });
        registry.register("attempt_duration_seconds", "Attempts by platform and result", attempt_seconds.clone());
        let retries = Family::<KindLabel, Counter>::default();
        registry.register(
            "retries",
            "Attempts run again: `retry` after a failure, `infrastructure` after the device or worker failed",
            retries.clone(),
        );
        let lease_to_first_call = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "lease_to_first_call_seconds",
            "From a lease's grant to the worker's first call to the app: the grid's overhead per attempt",
            lease_to_first_call.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        registry.register("build_info", "The running build: always 1, labelled with its version", build.clone());
        build
            .get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").into(), component: "coordinator".into() })
            .set(1);
        let sessions_started = Counter::default();
        registry.register(
            "webdriver_sessions_started",
            "WebDriver sessions granted a device",
            sessions_started.clone(),
        );
        let sessions_ended = Family::<KindLabel, Counter>::default();
        registry.register(
            "webdriver_sessions_ended",
            "WebDriver sessions ended: `client` by DELETE, `grid` by the idle timeout or a lost worker",
            sessions_ended.clone(),
        );
        let webdriver_seconds = Family::<CommandLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register(
            "webdriver_command_duration_seconds",
            "WebDriver commands by command and outcome (`ok` or the W3C error)",
            webdriver_seconds.clone(),
        );
        let live_screens = Counter::default();
        registry.register(
            "live_screens",
            "Screens workers sent for the live view (only while someone watches)",
            live_screens.clone(),
        );
        let live_screen_bytes = Counter::default();
        registry.register("live_screen_bytes", "Encoded bytes of the live view's screens", live_screen_bytes.clone());
        Self {
            live_screens,
            live_screen_bytes,
            lease_to_first_call,
            sessions_started,
            sessions_ended,
            webdriver_seconds,
            registry,
            queue_depth,
            leases_active,
            devices,
            leases_granted,
            attempt_seconds,
            retries,
            scrape: Mutex::new(()),
        }
    }
}

impl Metrics {
    pub fn retried(&self, kind: &str) {
        self.retries.get_or_create(&KindLabel { kind: kind.to_owned() }).inc();
    }

    pub fn lease_to_first_call(&self, us: i64) {
        if us > 0 {
            self.lease_to_first_call.observe(us as f64 / 1e6);
        }
    }

    pub fn sessions_ended(&self, kind: &str) {
        self.sessions_ended.get_or_create(&KindLabel { kind: kind.to_owned() }).inc();
    }

    pub fn webdriver_command(&self, command: &str, outcome: &str, seconds: f64) {
        let labels = CommandLabels { command: command.to_owned(), outcome: outcome.to_owned() };
        self.webdriver_seconds.get_or_create(&labels).observe(seconds);
    }

    pub fn attempt(&self, platform: &str, result: &str, ms: i64) {
        let labels = AttemptLabels { platform: platform.to_owned(), result: result.to_owned() };
        self.attempt_seconds.get_or_create(&labels).observe(ms as f64 / 1000.0);
    }

    /// The text exposition format, with the gauges from `snapshot`.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        let _scrape = self.scrape.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.queue_depth.clear();
        for (run, depth) in &snapshot.queued {
            self.queue_depth.get_or_create(&RunLabel { run: run.clone() }).set(*depth);
        }
        self.leases_active.set(snapshot.leases);
        self.devices.clear();
        for (state, count) in &snapshot.devices {
            self.devices.get_or_create(&StateLabel { state: state.clone() }).set(*count);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_come_from_the_snapshot_and_runs_that_ended_drop_out() {
        let metrics = Metrics::default();
        metrics.leases_granted.inc();
        metrics.retried("infrastructure");
        metrics.attempt("ios", "passed", 1500);
        let snapshot = Snapshot {
            queued: vec![("r1".into(), 7)],
            leases: 3,
            devices: vec![("idle".into(), 2), ("quarantined".into(), 1)],
        };
        let text = metrics.render(&snapshot);
        for line in [
            r#"argus_queue_depth{run="r1"} 7"#,
            "argus_leases_active 3",
            r#"argus_devices{state="quarantined"} 1"#,
            "argus_leases_granted_total 1",
            r#"argus_retries_total{kind="infrastructure"} 1"#,
            r#"argus_attempt_duration_seconds_count{platform="ios",result="passed"} 1"#,
            concat!(r#"argus_build_info{version=""#, env!("CARGO_PKG_VERSION"), r#"",component="coordinator"} 1"#),
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        let text = metrics.render(&Snapshot::default());
        assert!(!text.contains(r#"run="r1""#), "{text}");
    }
}
