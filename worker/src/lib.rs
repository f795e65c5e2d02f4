//! The worker: one lynkeus driver per device slot, and the link to the
//! coordinator that leases it attempts.

mod attempt;
pub mod camera;
pub mod config;
mod device_calls;
pub mod device_log;
pub mod discover;
pub mod driver;
mod health;
pub mod link;
pub mod live;
pub mod metrics;
mod project;
mod relaunch;
mod slot;
pub mod slots;
