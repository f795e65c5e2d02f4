//! Telling a connection blip from a relaunch. The driver holds the calls in
//! flight while the app reconnects and resends them after its `hello`, so an
//! attempt carries on either way; but an app process that was killed and
//! launched again has lost the attempt's state, and what the rest of the
//! attempt finds says nothing about the case. Such an attempt is an
//! infrastructure failure and runs again.
//!
//! The app's trace tells the two apart exactly: its events are numbered from
//! 1 in each process and stamped with the app's clock (`{seq, t}`), so the
//! newest event read as the attempt starts is a fingerprint of the process. After
//! a reconnect the same process still has that event, unchanged; a new one
//! either has not reached that number or stamped it at another time.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::TryRecvError};

use crate::driver::{Driver, DriverEvent};

/// How long the app may take to come back and answer once an attempt that
/// saw it reconnect has ended.
const READ_BACK: Duration = Duration::from_secs(10);
const CALL: Duration = Duration::from_secs(5);
/// How long the app may take to answer before the steps start (it may be
/// between two connections).
const MARK: Duration = Duration::from_secs(5);

/// Hellos during one attempt from which two apps dialing the same port are
/// told from one app reconnecting: each new connection that says hello
/// replaces the other, again and again.
const FLAPPING: u32 = 5;

/// The app as an attempt's steps found it, and the events since.
pub(crate) struct AppMark {
    /// The newest trace event (`seq`, `t`) when the steps started.
    newest: Option<(u64, u64)>,
    events: broadcast::Receiver<DriverEvent>,
    port: u16,
}

impl AppMark {
    /// Subscribes to the driver's events: a reconnect after this point is
    /// seen. [`AppMark::read`] then fingerprints the process.
    pub(crate) fn watch(driver: &Driver) -> Self {
        Self { newest: None, events: driver.events(), port: driver.local_addr().port() }
    }

    /// Reads the app's trace for the fingerprint. Any event of the process
    /// will do, so this may overlap the attempt's first calls: a relaunch
    /// after [`AppMark::watch`] announces itself with a hello either way.
    pub(crate) async fn read(&mut self, driver: &Driver) {
        self.newest = when_answered(driver, MARK, || newest_event(driver)).await.ok().flatten();
    }

    /// Once the steps have run: `Some(why)` when the app that answered them
    /// is not the process that was there when they started. Only the trace
    /// tells: a process keeps its events across a reconnect, and a new one
    /// starts them again. The route it comes back on does not (a press may
    /// have navigated just before the blip).
    pub(crate) async fn relaunched(mut self, driver: &Driver) -> Option<String> {
        let mut hellos = 0u32;
        loop {
            match self.events.try_recv() {
                Ok(DriverEvent::Hello(_)) => hellos += 1,
                Ok(DriverEvent::Navigation(_) | DriverEvent::Disconnected | DriverEvent::Problem) => {}
                Err(TryRecvError::Lagged(skipped)) => hellos += skipped as u32,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if hellos >= FLAPPING {
            return Some(format!(
                "two apps seem to dial port {}: their connections replaced each other {hellos} times during the attempt",
                self.port
            ));
        }
        if hellos == 0 {
            return None;
        }
        let (seq, t) = self.newest?;
        match read_back(driver, seq, t).await {
            Ok(Fingerprint::Same | Fingerprint::Unknown) => None,
            Ok(Fingerprint::Behind(last)) => Some(format!(
                "the app was relaunched during the attempt (it reconnected, and its trace went back from event {seq} to {last})"
            )),
            Ok(Fingerprint::Restamped(other)) => Some(format!(
                "the app was relaunched during the attempt (it reconnected, and its trace event {seq} is stamped {other}, not {t})"
            )),
            Err(error) => Some(format!(
                "the app reconnected during the attempt and did not answer afterwards ({error}); it may have been relaunched"
            )),
        }
    }
}

enum Fingerprint {
    Same,
    /// The trace's newest event is older than the mark.
    Behind(u64),
    /// The mark's event exists with another time.
    Restamped(u64),
    /// The mark's event has left the trace's ring: nothing to compare.
    Unknown,
}

/// The newest event of the app's trace, as `(seq, t)`; `None` for an empty
/// trace.
async fn newest_event(driver: &Driver) -> Result<Option<(u64, u64)>, String> {
    let last = last_seq(&trace(driver, u64::MAX).await?);
    if last == 0 {
        return Ok(None);
    }
    let answer = trace(driver, last - 1).await?;
    Ok(event_time(&answer, last).map(|t| (last, t)))
}

/// Reads the trace from just before the mark's event.
async fn read_back(driver: &Driver, seq: u64, t: u64) -> Result<Fingerprint, String> {
    let answer = when_answered(driver, READ_BACK, || trace(driver, seq - 1)).await?;
    Ok(compare(&answer, seq, t))
}

/// Calls `read` until it answers or `within` has passed, waiting for the app
/// between tries: it may be between two connections.
async fn when_answered<T, F: Future<Output = Result<T, String>>>(
    driver: &Driver,
    within: Duration,
    read: impl Fn() -> F,
) -> Result<T, String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let answer = match driver.wait_for_app(left).await {
            Ok(_) => read().await,
            Err(error) => Err(error.to_string()),
        };
        match answer {
            Ok(answer) => return Ok(answer),
            Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// What the trace read back says of the mark's event `seq` stamped `t`.
fn compare(answer: &Value, seq: u64, t: u64) -> Fingerprint {
    let last = last_seq(answer);
    if last < seq {
        return Fingerprint::Behind(last);
    }
    match event_time(answer, seq) {
        Some(same) if same == t => Fingerprint::Same,
        Some(other) => Fingerprint::Restamped(other),
        None => Fingerprint::Unknown,
    }
}

async fn trace(driver: &Driver, since: u64) -> Result<Value, String> {
    driver.call("trace", Some(json!({ "since": since })), CALL).await.map_err(|e| e.to_string())
}

fn last_seq(answer: &Value) -> u64 {
    answer.get("last").and_then(Value::as_u64).unwrap_or(0)
}

fn event_time(answer: &Value, seq: u64) -> Option<u64> {
    answer
        .get("events")?
        .as_array()?
        .iter()
        .find(|e| e.get("seq").and_then(Value::as_u64) == Some(seq))?
        .get("t")
        .and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(last: u64, events: &[(u64, u64)]) -> Value {
        let events: Vec<Value> =
            events.iter().map(|(seq, t)| json!({ "seq": seq, "t": t, "type": "route", "path": [] })).collect();
        json!({ "last": last, "events": events })
    }

    #[test]
    fn the_same_process_still_has_the_marked_event() {
        assert!(matches!(compare(&answer(9, &[(7, 100), (8, 120), (9, 130)]), 7, 100), Fingerprint::Same));
    }

    #[test]
    fn a_new_process_whose_trace_is_shorter_is_behind() {
        assert!(matches!(compare(&answer(2, &[(1, 500), (2, 510)]), 7, 100), Fingerprint::Behind(2)));
    }

    #[test]
    fn a_new_process_that_numbered_past_the_mark_stamped_it_at_another_time() {
        assert!(matches!(compare(&answer(8, &[(7, 900), (8, 910)]), 7, 100), Fingerprint::Restamped(900)));
    }

    #[test]
    fn an_event_that_left_the_ring_proves_nothing() {
        assert!(matches!(compare(&answer(900, &[(400, 100)]), 7, 100), Fingerprint::Unknown));
    }

    #[test]
    fn the_newest_event_is_read_by_its_number() {
        assert_eq!(event_time(&answer(3, &[(2, 20), (3, 30)]), 3), Some(30));
        assert_eq!(event_time(&json!({ "last": 0, "events": [] }), 1), None);
    }
}
