//! Whether a run with attempts waiting can make progress, and if not, why:
//! a pure function of its selector and the fleet, so that a run never waits
//! in silence. A device counts while its app is attached (idle or busy) and
//! nothing keeps it out, and while it runs an attempt (its app may be away
//! in the attempt's own `before` hook, which relaunches it); one that is
//! quarantined, drained, waiting for its app or disconnected does not, and
//! the reason names each.

use crate::scheduler::{Capabilities, Selector};

/// A device's state: the one answer to whether it can take work now and
/// why not, computed by the owner task (`Owner::availability`) and shown the
/// same way by the fleet page, `argus devices`, the metrics and the
/// waiting reason of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Its app is attached and nothing keeps it out or busy.
    Idle,
    /// It runs an attempt: it will be free again, whatever its app does
    /// meanwhile (a `before` hook may relaunch it).
    Busy,
    /// A WebDriver session holds it.
    Held,
    Quarantined(String),
    Draining,
    /// Its app says a platform other than its slot's.
    Mismatched(String),
    /// The driver listens; no app has said hello.
    NoApp,
    Disconnected,
    /// No app is attached, and the worker can tell why (an app connected
    /// but never answered auth).
    AppProblem(String),
}

impl Availability {
    /// The state's name: `idle`, `busy`, `held`, `quarantined`, `draining`,
    /// `mismatched`, `waiting` (for its app) or `disconnected`.
    pub fn name(&self) -> &'static str {
        match self {
            Availability::Idle => "idle",
            Availability::Busy => "busy",
            Availability::Held => "held",
            Availability::Quarantined(_) => "quarantined",
            Availability::Draining => "draining",
            Availability::Mismatched(_) => "mismatched",
            Availability::NoApp => "waiting",
            Availability::Disconnected | Availability::AppProblem(_) => "disconnected",
        }
    }

    /// Why, when a person needs to be told.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Quarantined(why) | Availability::Mismatched(why) | Availability::AppProblem(why) => Some(why),
            _ => None,
        }
    }

    /// Whether a run waiting for it can count on it: it is free, or will
    /// be once its attempt or session ends.
    pub fn comes_back(&self) -> bool {
        matches!(self, Availability::Idle | Availability::Busy | Availability::Held)
    }
}

/// A device as this decision sees it.
#[derive(Debug, Clone)]
pub struct DeviceView<'a> {
    pub id: &'a str,
    pub caps: &'a Capabilities,
    pub availability: Availability,
}

/// `None` when some device could take the run's attempts; else why not.
pub fn why_waiting(selector: &Selector, devices: &[DeviceView<'_>]) -> Option<String> {
    let mut matching: Vec<&DeviceView<'_>> = devices
        .iter()
        .filter(|d| selector.is_satisfied_by(&Capabilities { quarantined: false, ..d.caps.clone() }))
        .collect();
    if matching.iter().any(|d| d.availability.comes_back()) {
        return None;
    }
    if matching.is_empty() {
        let fleet = if devices.is_empty() { "no devices are connected".to_owned() } else { summary(devices) };
        return Some(format!("no device matches {}; the fleet: {fleet}", selector.describe()));
    }
    matching.sort_by_key(|d| d.id);
    let states: Vec<String> = matching.iter().map(|d| format!("{} {}", d.id, state(&d.availability))).collect();
    let which = if *selector == Selector::default() {
        "every device".to_owned()
    } else {
        format!("every device that matches {}", selector.describe())
    };
    Some(format!("{which} is out: {}", states.join(", ")))
}

fn state(availability: &Availability) -> String {
    match availability {
        Availability::NoApp => "waiting for its app".into(),
        Availability::AppProblem(problem) => format!("without its app ({problem})"),
        other => match other.reason() {
            Some(why) => format!("{} ({why})", other.name()),
            None => other.name().into(),
        },
    }
}

fn summary(devices: &[DeviceView<'_>]) -> String {
    let mut all: Vec<String> = devices.iter().map(|d| format!("{} {}", d.id, d.caps.platform)).collect();
    all.sort();
    all.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(platform: &str) -> Capabilities {
        Capabilities { platform: platform.into(), ..Capabilities::default() }
    }

    fn ios() -> Selector {
        Selector { platform: Some("ios".into()), ..Selector::default() }
    }

    #[test]
    fn a_run_waits_for_nothing_while_one_match_is_ready() {
        let (a, b) = (caps("ios"), caps("ios"));
        let devices = [
            DeviceView { id: "w/1", caps: &a, availability: Availability::Quarantined("sick".into()) },
            DeviceView { id: "w/2", caps: &b, availability: Availability::Idle },
        ];
        assert_eq!(why_waiting(&ios(), &devices), None);
    }

    #[test]
    fn when_every_match_is_out_the_reason_names_each() {
        let (a, b, c, d) = (caps("ios"), caps("ios"), caps("ios"), caps("android"));
        let devices = [
            DeviceView { id: "w/2", caps: &b, availability: Availability::Draining },
            DeviceView {
                id: "w/1",
                caps: &a,
                availability: Availability::Quarantined("3 infrastructure failures in a row".into()),
            },
            DeviceView { id: "w/3", caps: &c, availability: Availability::Disconnected },
            DeviceView { id: "w/4", caps: &d, availability: Availability::Idle },
        ];
        assert_eq!(
            why_waiting(&ios(), &devices).unwrap(),
            "every device that matches platform=ios is out: w/1 quarantined (3 infrastructure failures in a row), \
             w/2 draining, w/3 disconnected"
        );
    }

    #[test]
    fn a_device_whose_app_is_away_in_its_own_attempt_is_not_out() {
        let (a, b) = (caps("ios"), caps("ios"));
        let devices = [
            DeviceView { id: "w/1", caps: &a, availability: Availability::Busy },
            DeviceView { id: "w/2", caps: &b, availability: Availability::Disconnected },
        ];
        assert_eq!(why_waiting(&ios(), &devices), None, "w/1 comes back when its attempt ends");
    }

    #[test]
    fn when_nothing_matches_the_fleet_is_listed() {
        let a = caps("android");
        let devices = [DeviceView { id: "w/1", caps: &a, availability: Availability::Idle }];
        assert_eq!(why_waiting(&ios(), &devices).unwrap(), "no device matches platform=ios; the fleet: w/1 android");
        assert_eq!(
            why_waiting(&ios(), &[]).unwrap(),
            "no device matches platform=ios; the fleet: no devices are connected"
        );
    }
}
