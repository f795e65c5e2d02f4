//! History for people: what the grid kept, read and written for the teams
//! that run it. Nothing here is called by the grid's owner task; the
//! dashboard, the coordinator's services and periodic jobs and the CLI use
//! it, over the store and the grid's small edges (its errors, clock,
//! events and submit).
//!
//! - [`explain`]: why a failed attempt failed, against its last pass;
//! - [`compare`]: two runs side by side;
//! - [`replay`]: an attempt's steps as they were seen;
//! - [`mutes`]: a mute checked, and when a muted case has earned its unmute;
//! - [`follow_up`]: what follows a run's end (mutes lifted, notifications);
//! - [`notify`]: each webhook's request for an event (JSON, Slack, GitHub status);
//! - [`import`]: JUnit reports from other runners landed as runs;
//! - [`rerun`]: a run of an earlier run's failed cases, from its files.

pub mod compare;
pub mod explain;
pub mod follow_up;
pub mod import;
pub mod mutes;
pub mod notify;
pub mod replay;
pub mod rerun;
