//! Every contract Argus speaks that is not its own invention.
//!
//! - [`wire`]: the lynkeus wire protocol v1 between a driver (the WebSocket
//!   server) and the agent inside the app (the client).
//! - [`run`]: the run directory (`run.json`, `cases.jsonl`) that
//!   `lynkeus case run --out` writes, schema [`run::RUN_SCHEMA`].
//! - [`verdict`]: a RunCase's typed fields, which travel beside its record.
//!
//! Decoding never fails on fields it does not know: a newer agent or a newer
//! lynkeus may add fields, and only ever adds them.

pub mod artifacts;
pub mod auth;
pub mod connect;
pub mod errors;
pub mod number;
pub mod observe;
pub mod run;
pub mod task;
pub mod trace;
pub mod verdict;
pub mod wire;

/// The gRPC API between workers, clients and the coordinator
/// (`proto/argus/v1/*.proto`).
pub mod grpc {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("argus.v1");

    /// A device state as people read it: `idle`, `busy`, `disconnected`, …
    pub fn device_state_name(state: i32) -> String {
        DeviceState::try_from(state)
            .map(|s| s.as_str_name().trim_start_matches("DEVICE_STATE_").to_lowercase())
            .unwrap_or_else(|_| "unknown".into())
    }

    /// The descriptor set of every `argus.v1` file, for gRPC reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/argus_descriptor.bin"));
}
