//! The coordinator: the one place that decides. It keeps the fleet, expands
//! runs into attempts, leases them to devices, and records every decision in
//! the store before acting on it.

mod assembler;
pub mod config;
pub mod http;
mod incoming;
pub mod push;
pub mod service;
pub mod standby;
pub mod webhooks;

pub use service::{Options, TlsFileError, TlsIdentity, Tokens, serve, serve_with};
