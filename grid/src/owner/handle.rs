//! The owner task's typed handle: what callers may ask it, one method each,
//! over a channel of private commands with a reply channel per question.

use tokio::sync::{mpsc, oneshot};

use argus_proto::grpc;

use super::*;
use crate::time::Clock;

/// What the owner task is asked; callers use [`Handle`]'s methods.
pub(super) enum Command {
    Cancel {
        run_id: String,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    WorkerJoined {
        register: grpc::Register,
        tx: WorkerTx,
        reply: oneshot::Sender<Result<Link, CoreError>>,
    },
    WorkerMessage {
        link: Link,
        message: grpc::WorkerMessage,
    },
    WorkerGone {
        link: Link,
    },
    /// Whether some device could ever run a selector's cases (quarantined
    /// ones count: they may be released); the fleet named if not.
    Admit {
        selector: Selector,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// A run the gRPC handler checked and wrote: the owner takes it up.
    Submitted {
        /// Made ready by the handler (the checked suite, a big suite's
        /// parsed cases and request, dropped there too): the owner only
        /// adds it, while leases wait.
        run: Box<runs::Prepared>,
        reply: oneshot::Sender<grpc::SubmitResponse>,
    },
    Watch {
        run_id: String,
        /// Resume after this `seq` (0: from the start).
        after_seq: u64,
        reply: oneshot::Sender<Result<WatchStream, CoreError>>,
    },
    Fleet {
        reply: oneshot::Sender<grpc::ListFleetResponse>,
    },
    Quarantine {
        device: String,
        reason: Option<String>,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    Drain {
        worker: String,
        /// false: take work again.
        drain: bool,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// A WebDriver session asks for a device; answered when one is granted,
    /// or when none came free in time.
    OpenSession {
        ask: SessionAsk,
        reply: oneshot::Sender<Result<Granted, CoreError>>,
    },
    /// The client ended its session (`DELETE`): its device is free.
    CloseSession {
        id: String,
    },
    /// The gauges, for a metrics scrape.
    Snapshot {
        reply: oneshot::Sender<Snapshot>,
    },
}

/// Talks to the owner task.
#[derive(Clone)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
    clock: Clock,
}

/// The owner task's questions, one method each: a caller never builds a
/// command or a reply channel of its own.
impl Handle {
    pub(super) fn new(tx: mpsc::Sender<Command>, clock: Clock) -> Self {
        Self { tx, clock }
    }

    async fn send(&self, command: Command) -> Result<(), CoreError> {
        self.tx.send(command).await.map_err(|_| CoreError::Stopped)
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, CoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply)).await?;
        answer.await.map_err(|_| CoreError::Stopped)
    }

    /// A worker's stream began: its link (its name and this connection).
    pub async fn worker_joined(&self, register: grpc::Register, tx: WorkerTx) -> Result<Link, CoreError> {
        self.ask(|reply| Command::WorkerJoined { register, tx, reply }).await?
    }

    /// What a worker said on its stream; an error when the owner is gone.
    pub async fn worker_message(&self, link: Link, message: grpc::WorkerMessage) -> Result<(), CoreError> {
        self.send(Command::WorkerMessage { link, message }).await
    }

    /// A worker's stream ended.
    pub async fn worker_gone(&self, link: Link) {
        let _ = self.send(Command::WorkerGone { link }).await;
    }

    /// Whether some device could ever run `selector`'s cases; the fleet
    /// named if not.
    pub async fn admit(&self, selector: Selector) -> Result<(), CoreError> {
        self.ask(|reply| Command::Admit { selector, reply }).await?
    }

    /// The owner task's clock: what a run's start is stamped with.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// A run the caller checked and wrote: the owner takes it up.
    pub(crate) async fn submitted(&self, run: super::runs::Prepared) -> Result<grpc::SubmitResponse, CoreError> {
        self.ask(|reply| Command::Submitted { run: Box::new(run), reply }).await
    }

    /// A going run's updates after `after_seq`; `NoRun` for one that is not going.
    pub async fn watch(&self, run_id: String, after_seq: u64) -> Result<WatchStream, CoreError> {
        self.ask(|reply| Command::Watch { run_id, after_seq, reply }).await?
    }

    pub async fn cancel(&self, run_id: String) -> Result<(), CoreError> {
        self.ask(|reply| Command::Cancel { run_id, reply }).await?
    }

    pub async fn fleet(&self) -> Result<grpc::ListFleetResponse, CoreError> {
        self.ask(|reply| Command::Fleet { reply }).await
    }

    /// Quarantines `device` with `reason`, or releases it (`None`).
    pub async fn quarantine(&self, device: String, reason: Option<String>) -> Result<(), CoreError> {
        self.ask(|reply| Command::Quarantine { device, reason, reply }).await?
    }

    /// Drains `worker` (`drain`), or lets it take work again.
    pub async fn drain(&self, worker: String, drain: bool) -> Result<(), CoreError> {
        self.ask(|reply| Command::Drain { worker, drain, reply }).await?
    }

    /// A device for a WebDriver session, once one is granted (or none
    /// came free in time).
    pub async fn open_session(&self, ask: SessionAsk) -> Result<Granted, CoreError> {
        self.ask(|reply| Command::OpenSession { ask, reply }).await?
    }

    /// The client ended its session: its device is free.
    pub async fn close_session(&self, id: String) {
        let _ = self.send(Command::CloseSession { id }).await;
    }

    /// The gauges, for a metrics scrape.
    pub async fn snapshot(&self) -> Result<Snapshot, CoreError> {
        self.ask(|reply| Command::Snapshot { reply }).await
    }
}
