//! Watching a run: one bounded stream per client. A client that cannot keep
//! up is not dropped in silence: its stream ends with an error that says to
//! watch again after the last `seq` it has, and the run's record (kept in
//! memory and in the store) lets it resume without a gap or a repeat.

use std::pin::Pin;

use argus_proto::grpc::{self, run_update};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::Status;

use argus_store::LogRow;

/// What the Watch RPC answers.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<grpc::RunUpdate, Status>> + Send>>;

/// Updates a watcher may have queued beyond what it was replayed: a few of
/// the owner task's bursts (each of up to 4,096 commands publishes about as
/// many updates: results, steps, the next attempts started) for a client
/// that reads as fast as it can.
pub const LIVE_CAPACITY: usize = 16_384;

/// One client's stream, from the owner task's side.
pub struct Watcher {
    tx: mpsc::Sender<Result<grpc::RunUpdate, Status>>,
    /// Set once the watcher fell behind: the stream's last item says so.
    behind: Option<oneshot::Sender<Status>>,
    /// The last `seq` sent, so that the message says where to resume.
    last_seq: u64,
}

impl Watcher {
    /// A watcher with room for `replay` updates plus [`LIVE_CAPACITY`].
    pub fn new(replay: usize) -> (Self, WatchStream) {
        let (tx, rx) = mpsc::channel(replay + LIVE_CAPACITY);
        let (behind, told) = oneshot::channel::<Status>();
        let told = futures_util::stream::once(told).filter_map(|status| status.ok().map(Err));
        let stream = ReceiverStream::new(rx).chain(told);
        (Self { tx, behind: Some(behind), last_seq: 0 }, Box::pin(stream))
    }

    /// Sends one update; false when the watcher is gone or fell behind (and
    /// was told), so that the run forgets it.
    pub fn send(&mut self, update: &grpc::RunUpdate) -> bool {
        match self.tx.try_send(Ok(update.clone())) {
            Ok(()) => {
                self.last_seq = self.last_seq.max(update.seq);
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                if let Some(behind) = self.behind.take() {
                    let _ = behind.send(Status::resource_exhausted(format!(
                        "this watch fell behind the run; watch again with after_seq {} to resume",
                        self.last_seq
                    )));
                }
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// The client went away.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// An attempt's result as a run update.
pub fn finished(
    seq: u64,
    (case_id, attempt): (&str, u32),
    run_case_json: String,
    device: grpc::DeviceRef,
    lease_to_first_call_us: i64,
) -> grpc::RunUpdate {
    grpc::RunUpdate {
        kind: Some(run_update::Kind::Finished(grpc::AttemptFinished {
            case_id: case_id.to_owned(),
            attempt,
            run_case_json,
            device: Some(device),
            lease_to_first_call_us,
            ..Default::default()
        })),
        seq,
    }
}

/// An attempt the infrastructure cut short, which runs again.
pub fn taken_back(seq: u64, case_id: &str, attempt: u32, reason: &str, device: grpc::DeviceRef) -> grpc::RunUpdate {
    grpc::RunUpdate {
        kind: Some(run_update::Kind::Finished(grpc::AttemptFinished {
            case_id: case_id.to_owned(),
            attempt,
            infrastructure_failure: true,
            infrastructure_reason: reason.to_owned(),
            device: Some(device),
            ..Default::default()
        })),
        seq,
    }
}

pub fn run_finished(seq: u64, manifest_json: String) -> grpc::RunUpdate {
    grpc::RunUpdate { kind: Some(run_update::Kind::RunFinished(grpc::RunFinished { manifest_json })), seq }
}

/// Stored attempts as the updates they were when they finished, in `seq`
/// order. Rows written before updates had a place get one after the last
/// that has.
pub fn from_log(rows: &[LogRow]) -> Vec<grpc::RunUpdate> {
    let mut next = rows.iter().filter_map(|r| r.seq).max().unwrap_or(0);
    let mut updates: Vec<grpc::RunUpdate> = rows
        .iter()
        .map(|row| {
            let seq = row.seq.unwrap_or_else(|| {
                next += 1;
                next
            }) as u64;
            let device = grpc::DeviceRef {
                id: row.device_id.clone().unwrap_or_default(),
                platform: row.platform.clone().unwrap_or_default(),
                worker: row.worker_id.clone().unwrap_or_default(),
            };
            match (&row.run_case_json, row.infrastructure != 0) {
                (Some(line), false) => finished(seq, (&row.case_id, row.attempt as u32), line.clone(), device, 0),
                _ => {
                    let reason = row.error.as_deref().unwrap_or("the attempt could not run");
                    taken_back(seq, &row.case_id, row.attempt as u32, reason, device)
                }
            }
        })
        .collect();
    updates.sort_by_key(|u| u.seq);
    updates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(seq: u64) -> grpc::RunUpdate {
        run_finished(seq, "{}".into())
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_told_where_to_resume() {
        let (mut watcher, mut stream) = Watcher::new(0);
        for seq in 1..=LIVE_CAPACITY as u64 {
            assert!(watcher.send(&update(seq)));
        }
        assert!(!watcher.send(&update(LIVE_CAPACITY as u64 + 1)), "a full watcher is let go");
        drop(watcher);
        let mut last = None;
        while let Some(item) = stream.next().await {
            last = Some(item);
        }
        let status = last.unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            format!("this watch fell behind the run; watch again with after_seq {LIVE_CAPACITY} to resume")
        );
    }

    #[tokio::test]
    async fn a_watch_that_ends_normally_ends_without_an_error() {
        let (mut watcher, mut stream) = Watcher::new(1);
        assert!(watcher.send(&update(1)));
        drop(watcher);
        assert!(stream.next().await.unwrap().is_ok());
        assert!(stream.next().await.is_none());
    }

    #[test]
    fn stored_attempts_replay_in_order_and_old_rows_get_places_after() {
        let row = |seq: Option<i64>, case: &str, infra: bool| LogRow {
            seq,
            case_id: case.into(),
            attempt: 1,
            infrastructure: i64::from(infra),
            error: infra.then(|| "the worker went away".into()),
            run_case_json: (!infra).then(|| format!("{{\"id\":\"{case}\"}}")),
            device_id: Some("w/1".into()),
            worker_id: Some("w".into()),
            platform: Some("ios".into()),
            finished_at: Some(1),
        };
        let updates = from_log(&[row(None, "old", false), row(Some(1), "a", true), row(Some(2), "a", false)]);
        let seqs: Vec<u64> = updates.iter().map(|u| u.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        let Some(run_update::Kind::Finished(infra)) = &updates[0].kind else { panic!() };
        assert!(infra.infrastructure_failure);
        assert_eq!((infra.case_id.as_str(), infra.attempt), ("a", 1));
        assert_eq!(infra.infrastructure_reason, "the worker went away");
        assert!(infra.run_case_json.is_empty(), "an attempt cut short has no lynkeus record");
    }
}
