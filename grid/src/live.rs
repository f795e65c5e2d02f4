//! The coordinator's part of the live view: the latest screen of every
//! device as its worker sends it, and whether anyone watches.
//!
//! Screens never pass through the owner task: they are a view, not a
//! decision, and a busy fleet must not queue them before results. Workers
//! send them only while someone watches: each read of the live screens
//! counts as watching for [`WATCH_GRACE`]; [`LiveScreens::expire`] ends it
//! after that, and every worker link is told both ways (`Watch`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::metrics::counter::Counter;

use argus_proto::grpc::{self, LiveScreen};
use serde::Serialize;
use tokio::sync::watch;

use crate::time::now_ms;

/// How long one read of the live screens counts as someone watching.
pub const WATCH_GRACE_MS: i64 = 5_000;
/// Trace lines kept per device.
pub const TRACE_LINES: usize = 100;

/// The latest screen of each device, by `worker/slot`.
pub struct LiveScreens {
    devices: Mutex<HashMap<String, DeviceLive>>,
    watched_until_ms: AtomicI64,
    watching: watch::Sender<bool>,
    /// What workers sent for the live view: messages and encoded bytes
    /// (the coordinator's `argus_live_screens_total` and
    /// `argus_live_screen_bytes_total`).
    received: Counter,
    received_bytes: Counter,
}

impl Default for LiveScreens {
    fn default() -> Self {
        Self::counted(&crate::metrics::Metrics::default())
    }
}

/// What a device shows, as its worker last said, and its recent trace.
#[derive(Debug, Clone, Default)]
pub struct DeviceLive {
    pub screen: LiveScreen,
    pub trace: VecDeque<String>,
    /// When it arrived (coordinator clock, epoch ms).
    pub received_ms: i64,
}

impl LiveScreens {
    /// Counting what arrives in `metrics`.
    pub fn counted(metrics: &crate::metrics::Metrics) -> Self {
        Self {
            devices: Mutex::default(),
            watched_until_ms: AtomicI64::new(0),
            watching: watch::Sender::new(false),
            received: metrics.live_screens.clone(),
            received_bytes: metrics.live_screen_bytes.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DeviceLive>> {
        self.devices.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A screen `worker` sent for one of its slots.
    pub fn arrived(&self, worker: &str, mut screen: LiveScreen) {
        self.received.inc();
        self.received_bytes.inc_by(prost::Message::encoded_len(&screen) as u64);
        let id = format!("{worker}/{}", screen.slot);
        let mut devices = self.lock();
        let device = devices.entry(id).or_default();
        device.trace.extend(screen.trace.drain(..));
        let extra = device.trace.len().saturating_sub(TRACE_LINES);
        device.trace.drain(..extra);
        device.screen = screen;
        device.received_ms = now_ms();
    }

    /// The worker's link ended: its devices show nothing live.
    pub fn worker_gone(&self, worker: &str) {
        let prefix = format!("{worker}/");
        self.lock().retain(|id, _| !id.starts_with(&prefix));
    }

    /// Someone reads the live screens: workers send them for a while.
    pub fn watched(&self) {
        self.watched_until_ms.store(now_ms() + WATCH_GRACE_MS, Ordering::Relaxed);
        self.watching.send_if_modified(|on| !std::mem::replace(on, true));
    }

    /// Ends the watching once nobody read for [`WATCH_GRACE_MS`].
    pub fn expire(&self) {
        if now_ms() > self.watched_until_ms.load(Ordering::Relaxed) {
            self.watching.send_if_modified(|on| std::mem::replace(on, false));
        }
    }

    /// Whether someone watches, as it changes: what each worker link tells
    /// its worker.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.watching.subscribe()
    }

    /// Every device's live state.
    pub fn all(&self) -> Vec<(String, DeviceLive)> {
        let mut all: Vec<_> = self.lock().iter().map(|(id, d)| (id.clone(), d.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub fn device(&self, id: &str) -> Option<DeviceLive> {
        self.lock().get(id).cloned()
    }
}

/// A device's screen as the dashboard draws it (`/api/v1/fleet/screens`).
#[derive(Debug, Clone, Serialize)]
pub struct ScreenView {
    pub device: String,
    pub run_id: Option<String>,
    pub case_id: Option<String>,
    pub attempt: Option<u32>,
    pub step_index: Option<u32>,
    pub step: Option<String>,
    pub route: String,
    pub window: [f32; 2],
    pub busy: bool,
    pub elements: Vec<ElementView>,
    /// When the app was read, on the worker's clock (epoch ms).
    pub read_ms: i64,
    pub received_ms: i64,
    pub trace: Vec<String>,
}

/// An element as the drawing needs it.
#[derive(Debug, Clone, Serialize)]
pub struct ElementView {
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub test_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hidden: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub covered: bool,
    /// x, y, width, height in points; absent when the record kept none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<[f32; 4]>,
}

impl From<&grpc::ObservedElement> for ElementView {
    fn from(e: &grpc::ObservedElement) -> Self {
        Self {
            kind: e.kind.clone(),
            test_id: e.test_id.clone(),
            text: e.text.clone(),
            value: e.value.clone(),
            disabled: e.disabled,
            hidden: e.hidden.clone(),
            covered: e.covered,
            frame: e.frame.map(|f| [f.x, f.y, f.w, f.h]),
        }
    }
}

impl ScreenView {
    /// `trace`: how many of the newest trace lines to carry.
    pub fn of(device: &str, live: &DeviceLive, trace: usize) -> Self {
        let s = &live.screen;
        let some = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        let running = !s.run_id.is_empty();
        Self {
            device: device.to_owned(),
            run_id: some(&s.run_id),
            case_id: some(&s.case_id),
            attempt: running.then_some(s.attempt),
            step_index: (running && !s.step.is_empty()).then_some(s.step_index),
            step: some(&s.step).filter(|_| running),
            route: s.route.clone(),
            window: [s.window_w, s.window_h],
            busy: s.busy,
            elements: s.elements.iter().map(ElementView::from).collect(),
            read_ms: s.read_unix_ms,
            received_ms: live.received_ms,
            trace: live.trace.iter().skip(live.trace.len().saturating_sub(trace)).cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screens_are_kept_per_device_with_a_bounded_trace() {
        let live = LiveScreens::default();
        for n in 0..150 {
            let screen = LiveScreen {
                slot: "a".into(),
                route: format!("R{n}"),
                trace: vec![format!("line {n}")],
                ..Default::default()
            };
            live.arrived("w1", screen);
        }
        live.arrived("w2", LiveScreen { slot: "a".into(), route: "Other".into(), ..Default::default() });
        let one = live.device("w1/a").expect("kept");
        assert_eq!(one.screen.route, "R149");
        assert_eq!(one.trace.len(), TRACE_LINES);
        assert_eq!(one.trace.front().map(String::as_str), Some("line 50"));
        assert_eq!(ScreenView::of("w1/a", &one, 3).trace, ["line 147", "line 148", "line 149"]);
        live.worker_gone("w1");
        assert_eq!(live.all().iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["w2/a"]);
        assert_eq!(live.received.get(), 151);
    }

    #[test]
    fn watching_starts_with_a_read_and_ends_after_the_grace() {
        let live = LiveScreens::default();
        let mut told = live.subscribe();
        assert!(!*told.borrow_and_update());
        live.watched();
        assert!(told.has_changed().unwrap() && *told.borrow_and_update());
        live.watched();
        assert!(!told.has_changed().unwrap(), "told once");
        live.expire();
        assert!(*told.borrow(), "still within the grace");
        live.watched_until_ms.store(now_ms() - 1, Ordering::Relaxed);
        live.expire();
        assert!(told.has_changed().unwrap() && !*told.borrow_and_update());
    }
}
