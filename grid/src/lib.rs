//! The grid: the one place that decides. The owner task ([`owner`]) keeps
//! the fleet, expands runs into attempts, leases them to devices and grants
//! devices to WebDriver sessions, recording every decision in the store
//! before acting on it. Beside it, the decisions as pure functions, and the
//! edges the owner's callers use:
//!
//! - [`policy`]: what follows an attempt (retry, quarantine, the run's end);
//! - [`scheduler`]: which pending attempt a free device runs, in fair share;
//! - [`matching`]: which devices fit a run's selector or a session's wants;
//! - [`waiting`]: a device's availability, and why a run waits;
//! - [`submit`]: a suite checked and planned into a run;
//! - [`events`]: what happened (a run ended, a device quarantined), kept
//!   for the webhooks;
//! - [`watch`]: a run's updates as its clients stream them;
//! - [`relay`]: fixtures and report pushes relayed to a project's client;
//! - [`calls`]: calls to a device's app down its worker's link;
//! - [`live`]: what each device shows now;
//! - [`metrics`], [`time`], [`error`].
//!
//! What reads and writes history for people (why a case failed, compare,
//! replay, mutes, imports, webhooks' requests, reruns) is `argus-history`,
//! over this crate and the store.

pub mod calls;
pub mod error;
pub mod events;
pub mod live;
pub mod matching;
pub mod metrics;
pub mod owner;
pub mod policy;
pub mod relay;
pub mod scheduler;
pub mod submit;
pub mod time;
pub mod waiting;
pub mod watch;
