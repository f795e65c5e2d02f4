//! The grid: the one place that decides. The owner task ([`core`]) keeps
//! the fleet, expands runs into attempts, leases them to devices and grants
//! devices to WebDriver sessions, recording every decision in the store
//! before acting on it. Beside it, the decisions as pure functions:
//!
//! - [`policy`]: what follows an attempt (retry, quarantine, the run's end);
//! - [`scheduler`]: which pending attempt a free device runs, in fair share;
//! - [`matching`]: which devices fit a run's selector or a session's wants;
//! - [`waiting`]: a device's availability, and why a run waits;
//! - [`submit`]: a suite checked and planned into a run;
//! - [`rerun`]: a run of an earlier run's failed cases, from its files;
//! - [`explain`]: why a failed attempt failed, against its last pass;
//! - [`follow_up`]: what follows a run's end (mutes lifted, notifications);
//! - [`notify`]: events, and each webhook's request for one (JSON, Slack, GitHub status);
//! - [`owners`]: TESTOWNERS, who owns which case files;
//! - [`import`]: JUnit reports from other runners landed as runs;
//! - [`mutes`]: a mute checked, and when a muted case has earned its unmute;
//! - [`watch`]: a run's updates as its clients stream them;
//! - [`relay`]: fixtures and report pushes relayed to a project's client;
//! - [`calls`]: calls to a device's app down its worker's link;
//! - [`metrics`], [`time`].

pub mod calls;
pub mod compare;
pub mod core;
pub mod error;
pub mod explain;
pub mod follow_up;
pub mod import;
pub mod live;
pub mod matching;
pub mod metrics;
pub mod mutes;
pub mod notify;
pub mod owners;
pub mod policy;
pub mod relay;
pub mod replay;
pub mod rerun;
pub mod scheduler;
pub mod submit;
pub mod time;
pub mod waiting;
pub mod watch;
