//! The coordinator: the one place that decides. It keeps the fleet, expands
//! runs into attempts, leases them to devices, and records every decision in
//! the store before acting on it.

mod assembler;
pub mod builds;
pub mod config;
mod grpc;
pub mod http;
mod incoming;
mod jobs;
pub mod push;
pub mod serve;
pub mod standby;
pub mod webhooks;

pub use serve::{Options, TlsFileError, TlsIdentity, Tokens, serve, serve_with};
