//! The events a webhook can be told of, as they are kept (JSON in the
//! store's `events`) and sent (Argus' JSON payload: the same object, with a
//! link to the dashboard where there is one).

use serde::{Deserialize, Serialize};

/// Which event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "run.finished")]
    RunFinished,
    #[serde(rename = "case.failing")]
    CaseFailing,
    #[serde(rename = "device.quarantined")]
    DeviceQuarantined,
    #[serde(rename = "case.muted")]
    CaseMuted,
}

impl EventKind {
    pub const ALL: [EventKind; 4] =
        [EventKind::RunFinished, EventKind::CaseFailing, EventKind::DeviceQuarantined, EventKind::CaseMuted];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunFinished => "run.finished",
            EventKind::CaseFailing => "case.failing",
            EventKind::DeviceQuarantined => "device.quarantined",
            EventKind::CaseMuted => "case.muted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// Something that happened, and when (UTC ISO 8601).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: String,
    #[serde(flatten)]
    pub happened: Happened,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum Happened {
    /// A run ended (passed, failed or cancelled).
    #[serde(rename = "run.finished")]
    RunFinished { run: RunEnded },
    /// A case failed on a branch where its last result was not a failure.
    #[serde(rename = "case.failing")]
    CaseFailing { run: RunEnded, case: FailingCase },
    /// A device was quarantined, by the coordinator or an operator.
    #[serde(rename = "device.quarantined")]
    DeviceQuarantined { device: QuarantinedDevice },
    /// A case was muted, by a person or by the auto-mute.
    #[serde(rename = "case.muted")]
    CaseMuted { mute: MutedCase },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnded {
    pub id: String,
    pub project: String,
    pub branch: Option<String>,
    pub commit: Option<String>,
    /// `passed`, `failed` or `cancelled`.
    pub result: String,
    pub cases: i64,
    pub passed: i64,
    pub failed: i64,
    /// Failed cases that were muted (they do not fail the run).
    pub muted_failed: i64,
    pub started_at: String,
    pub finished_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailingCase {
    pub id: String,
    pub attempt: u32,
    /// Its cause ("Why it failed") and its diff line against its last pass.
    pub cause: String,
    pub line: String,
    pub owner: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuarantinedDevice {
    pub id: String,
    pub platform: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutedCase {
    pub project: String,
    pub case_id: String,
    pub reason: String,
    pub owner: Option<String>,
    pub until: Option<String>,
    pub by: String,
}

impl Event {
    pub fn kind(&self) -> EventKind {
        match self.happened {
            Happened::RunFinished { .. } => EventKind::RunFinished,
            Happened::CaseFailing { .. } => EventKind::CaseFailing,
            Happened::DeviceQuarantined { .. } => EventKind::DeviceQuarantined,
            Happened::CaseMuted { .. } => EventKind::CaseMuted,
        }
    }

    /// The project it is about; none for a device.
    pub fn project(&self) -> Option<&str> {
        match &self.happened {
            Happened::RunFinished { run } | Happened::CaseFailing { run, .. } => Some(&run.project),
            Happened::DeviceQuarantined { .. } => None,
            Happened::CaseMuted { mute } => Some(&mute.project),
        }
    }

    /// Who owns the case it is about.
    pub fn owner(&self) -> Option<&str> {
        match &self.happened {
            Happened::CaseFailing { case, .. } => case.owner.as_deref(),
            Happened::CaseMuted { mute } => mute.owner.as_deref(),
            _ => None,
        }
    }

    /// Where the dashboard shows it.
    pub fn link(&self, dashboard: &str) -> String {
        let base = dashboard.trim_end_matches('/');
        let enc =
            |text: &str| percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string();
        match &self.happened {
            Happened::RunFinished { run } => format!("{base}/runs/{}", enc(&run.id)),
            Happened::CaseFailing { run, case } => format!("{base}/runs/{}#case-{}", enc(&run.id), enc(&case.id)),
            Happened::DeviceQuarantined { .. } => format!("{base}/fleet"),
            Happened::CaseMuted { mute } => {
                format!("{base}/cases/{}?project={}", enc(&mute.case_id), enc(&mute.project))
            }
        }
    }

    /// The event as it is kept.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event is plain data")
    }
}

/// `happened` at `at_ms`, as the store keeps it.
pub fn store_event(at_ms: i64, happened: Happened) -> argus_store::NewEvent {
    let event = Event { at: crate::time::iso(at_ms), happened };
    argus_store::NewEvent { kind: event.kind().as_str().to_owned(), event_json: event.to_json(), at: at_ms }
}

/// Argus' JSON payload: the event, and `url`, its page on the dashboard
/// (when the coordinator knows its public address).
pub fn payload(event: &Event, dashboard: Option<&str>) -> serde_json::Value {
    let mut value = serde_json::to_value(event).expect("an event is plain data");
    if let (Some(dashboard), Some(object)) = (dashboard, value.as_object_mut()) {
        object.insert("url".into(), event.link(dashboard).into());
    }
    value
}
