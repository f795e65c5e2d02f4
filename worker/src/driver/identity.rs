//! Which app process is on the port. Every `hello` is from a process that
//! either reconnected (a flaky link: it keeps its state, and the calls in
//! flight resent to it are answered from its memory) or is new (a relaunch,
//! or another app dialing the same port: whatever an attempt had built is
//! gone). The driver tells them apart at the hello, before it resends any
//! call, so that an attempt compares two [`AppIdentity`]s and asks the app
//! nothing.
//!
//! The app's trace tells them apart exactly: its events are numbered from 1
//! in each process and stamped with the app's clock (`{seq, t}`), so the
//! newest event seen of a process is its fingerprint. The same process still
//! has that event, stamped the same; a new one has not reached that number
//! or stamped it at another time. A process whose trace is empty at its
//! hello is given an event to be known by: the agent traces its `events`
//! read (a default command of every lynkeus agent, with no effect on the
//! app) as a `command` event.

use serde_json::{Value, json};

/// The processes seen on a port so far. An attempt takes one before its
/// first step and one after its last; the difference is what happened to
/// the app in between ([`AppIdentity::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppIdentity {
    /// The app processes that said hello on this port, from 1; 0 before
    /// the first.
    pub process: u64,
    /// Hellos of a process already seen: reconnects.
    pub reconnects: u64,
    /// Hellos of another process while a connection was still open: two
    /// apps dialing one port replace each other, again and again.
    pub replacements: u64,
}

/// What happened to the app between two identities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppChange {
    /// The same process, on the same connection.
    Steady,
    /// The same process reconnected this many times: a flaky link. Its
    /// calls were resent and answered by the process that had the state.
    Reconnected(u64),
    /// Another process answered: the app was relaunched (its state is lost).
    Relaunched,
    /// Processes replaced each other's open connections this many times:
    /// two apps dial the port.
    TwoApps(u64),
}

/// Replacements of an open connection by another process, in one attempt,
/// from which two apps are named. One may be a relaunch whose old socket
/// had not closed yet; two apps trade the port back and forth.
pub const TWO_APPS: u64 = 3;

impl AppIdentity {
    pub fn since(self, before: AppIdentity) -> AppChange {
        let replaced = self.replacements.saturating_sub(before.replacements);
        if replaced >= TWO_APPS {
            AppChange::TwoApps(replaced)
        } else if self.process != before.process {
            AppChange::Relaunched
        } else if self.reconnects > before.reconnects {
            AppChange::Reconnected(self.reconnects - before.reconnects)
        } else {
            AppChange::Steady
        }
    }
}

/// The newest trace event of a process: `(seq, t)`.
pub(super) type Fingerprint = (u64, u64);

/// Whether a hello came from the process last fingerprinted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Same,
    New,
    /// Nothing to compare (the marked event left the trace's ring, or the
    /// last process could not be fingerprinted): taken for the same.
    Unknown,
}

/// What to ask a process that just said hello: its trace from just before
/// `mark`'s event, or all of it when there is no mark.
pub(super) fn probe_params(mark: Option<Fingerprint>) -> Value {
    match mark {
        Some((seq, _)) => json!({ "since": seq - 1 }),
        None => json!({}),
    }
}

/// What the trace read with [`probe_params`] says of the process.
pub(super) fn judge(mark: Option<Fingerprint>, answer: &Value) -> Verdict {
    let Some((seq, t)) = mark else { return Verdict::Unknown };
    let last = last_seq(answer);
    if last < seq {
        return Verdict::New;
    }
    match event_time(answer, seq) {
        Some(same) if same == t => Verdict::Same,
        Some(_) => Verdict::New,
        None => Verdict::Unknown,
    }
}

/// The newest event of a trace answer; `None` for an empty trace.
pub(super) fn newest(answer: &Value) -> Option<Fingerprint> {
    let last = last_seq(answer);
    if last == 0 {
        return None;
    }
    event_time(answer, last).map(|t| (last, t))
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
            events.iter().map(|(seq, t)| json!({ "seq": seq, "t": t, "kind": "route", "path": [] })).collect();
        json!({ "last": last, "events": events })
    }

    #[test]
    fn the_same_process_still_has_the_marked_event() {
        assert_eq!(judge(Some((7, 100)), &answer(9, &[(7, 100), (8, 120), (9, 130)])), Verdict::Same);
        assert_eq!(newest(&answer(9, &[(7, 100), (8, 120), (9, 130)])), Some((9, 130)));
    }

    #[test]
    fn a_new_process_is_behind_the_mark_or_stamped_it_at_another_time() {
        assert_eq!(judge(Some((7, 100)), &answer(2, &[(1, 500), (2, 510)])), Verdict::New);
        assert_eq!(judge(Some((7, 100)), &answer(0, &[])), Verdict::New, "an empty trace is behind any mark");
        assert_eq!(judge(Some((7, 100)), &answer(8, &[(7, 900), (8, 910)])), Verdict::New);
    }

    #[test]
    fn nothing_to_compare_proves_nothing() {
        assert_eq!(judge(Some((7, 100)), &answer(900, &[(400, 100)])), Verdict::Unknown, "left the ring");
        assert_eq!(judge(None, &answer(3, &[(3, 30)])), Verdict::Unknown);
        assert_eq!(newest(&json!({ "last": 0, "events": [] })), None);
        assert_eq!(probe_params(Some((7, 100))), json!({ "since": 6 }));
        assert_eq!(probe_params(None), json!({}));
    }

    #[test]
    fn an_attempt_tells_a_flaky_link_from_a_relaunch_and_from_two_apps() {
        let start = AppIdentity { process: 2, reconnects: 5, replacements: 1 };
        assert_eq!(start.since(start), AppChange::Steady);
        let flaky = AppIdentity { reconnects: 15, ..start };
        assert_eq!(flaky.since(start), AppChange::Reconnected(10), "ten reconnects of one process");
        assert_eq!(AppIdentity { process: 3, ..flaky }.since(start), AppChange::Relaunched);
        let one_replacement = AppIdentity { process: 3, replacements: 2, ..start };
        assert_eq!(one_replacement.since(start), AppChange::Relaunched, "a relaunch whose old socket was open");
        let trading = AppIdentity { process: 9, replacements: 1 + TWO_APPS, ..start };
        assert_eq!(trading.since(start), AppChange::TwoApps(TWO_APPS));
    }
}
