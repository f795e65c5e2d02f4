//! What a driver does when an app says hello: the newest connection
//! replaces the one before, the process is told apart from the one the
//! driver had ([`super::identity`]) by reading its trace before any call
//! goes to it, and then the calls in flight are resent to it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use argus_proto::wire::Hello;
use futures_util::SinkExt;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tracing::{Instrument, debug, info, warn};

use super::identity::{self, Verdict};
use super::{CallError, DriverEvent, PROBE_IDS, PROBE_TIMEOUT, Shared, Sink};

impl Shared {
    /// The app on `link` said hello: it replaces the connection attached
    /// before (the newest wins). Calls wait while the driver tells which
    /// process it is ([`Shared::identify`]); then each call in flight is
    /// sent to it, unchanged and in id order.
    pub(super) fn attached(self: &Arc<Self>, link: u64, hello: Hello) {
        let (sink, replaced_open) = {
            let mut state = self.lock();
            let Some(current) = state.candidates.remove(&link) else {
                debug!(link, "hello from a connection that was replaced; ignored");
                return;
            };
            // Older connections that never said hello are passed over too.
            let older: Vec<u64> = state.candidates.keys().copied().filter(|id| *id < link).collect();
            for id in older {
                if let Some(stale) = state.candidates.remove(&id) {
                    stale.link.cancel.cancel();
                    if stale.silent {
                        state.silent_left_at = Some(tokio::time::Instant::now());
                    }
                }
            }
            let mut replaced_open = false;
            for old in state.link.take().into_iter().chain(state.identifying.take()) {
                info!(link, replaced = old.id, "a newer connection replaces the older one");
                old.cancel.cancel();
                replaced_open = true;
            }
            let sink = current.link.sink.clone();
            state.identifying = Some(current.link);
            state.grace = None;
            (sink, replaced_open)
        };
        if replaced_open {
            self.hello.send_replace(None);
        }
        let shared = self.clone();
        self.tracker
            .spawn(async move { shared.identify(link, sink, Arc::new(hello), replaced_open).await }.in_current_span());
    }

    /// Reads the trace of the process that said hello on `link`, compares
    /// it with the fingerprint of the process before it, then lets the calls
    /// go to it. A task of its own: the connection's reader must go on
    /// reading to get the answers.
    async fn identify(self: Arc<Self>, link: u64, sink: Sink, hello: Arc<Hello>, replaced_open: bool) {
        let (mark, first) = {
            let state = self.lock();
            (state.fingerprint, state.identity.process == 0)
        };
        let (verdict, newest) = match self.probe(&sink, "trace", identity::probe_params(mark)).await {
            Ok(answer) => {
                let verdict = if first { Verdict::New } else { identity::judge(mark, &answer) };
                let mut newest = identity::newest(&answer);
                if newest.is_none() && hello.has_command("events") {
                    // An empty trace: the agent traces an `events` read,
                    // which gives this process an event to be known by.
                    let _ = self.probe(&sink, "events", Value::Null).await;
                    if let Ok(answer) = self.probe(&sink, "trace", serde_json::json!({})).await {
                        newest = identity::newest(&answer);
                    }
                }
                (verdict, newest)
            }
            Err(CallError::Closed | CallError::Disconnected) => return,
            Err(error) => {
                warn!(link, %error, "the app that said hello did not answer the driver's trace read; taken for the same process");
                (if first { Verdict::New } else { Verdict::Unknown }, mark)
            }
        };
        let resend = {
            let mut state = self.lock();
            if state.identifying.as_ref().is_none_or(|l| l.id != link) {
                // Replaced or gone while it was read: the newer one counts.
                return;
            }
            state.link = state.identifying.take();
            match verdict {
                Verdict::New => {
                    state.identity.process += 1;
                    if replaced_open && !first {
                        state.identity.replacements += 1;
                    }
                    state.reconnected_at.clear();
                    state.fingerprint = newest;
                }
                Verdict::Same | Verdict::Unknown => {
                    state.identity.reconnects += 1;
                    state.reconnected_at.push_back(tokio::time::Instant::now());
                    state.fingerprint = newest.or(state.fingerprint);
                }
            }
            state.generation += 1;
            state.grace = None;
            let mut resend: Vec<(u64, Utf8Bytes)> =
                state.pending.iter().map(|(id, p)| (*id, p.frame.clone())).collect();
            resend.sort_unstable_by_key(|(id, _)| *id);
            resend
        };
        info!(
            platform = %hello.platform,
            native = hello.native,
            app = hello.app_name().unwrap_or("-"),
            process = ?verdict,
            resent = resend.len(),
            "app attached"
        );
        self.hello.send_replace(Some(hello.clone()));
        let _ = self.events.send(DriverEvent::Hello(hello));
        if resend.is_empty() {
            return;
        }
        let mut sink = sink.lock().await;
        for (_, frame) in resend {
            if sink.send(Message::Text(frame)).await.is_err() {
                break;
            }
        }
    }

    /// The driver's own call to a process that said hello and gets no
    /// other call yet: written straight to its connection, never resent.
    async fn probe(&self, sink: &Sink, method: &str, params: Value) -> Result<Value, CallError> {
        // Numbered apart from the calls (unique in the session all the
        // same): the calls keep lynkeus' own numbering, 1, 2, 3….
        let id = PROBE_IDS + self.next_probe.fetch_add(1, Ordering::Relaxed);
        let params = (!params.is_null()).then_some(params);
        let frame = super::request_frame(id, method, params);
        let (reply, answer) = oneshot::channel();
        self.lock().probes.insert(id, reply);
        let sent = sink.lock().await.send(Message::Text(frame)).await;
        let outcome = match sent {
            Ok(()) => match tokio::time::timeout(PROBE_TIMEOUT, answer).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(CallError::Closed),
                Err(_) => Err(CallError::Timeout { method: method.to_owned(), after: PROBE_TIMEOUT }),
            },
            Err(_) => Err(CallError::Disconnected),
        };
        self.lock().probes.remove(&id);
        outcome
    }
}
