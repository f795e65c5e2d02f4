//! lynkeus case files: parse and check them, expand matrices, and turn
//! targets, labels and interpolations into what the runner sends.

pub mod commands;
pub mod config;
pub mod error;
pub mod format;
pub mod js;
pub mod junit_read;
pub mod owners;
pub mod report;
pub mod runner;
pub mod suite;
pub mod targets;
pub mod values;
pub mod yaml;

pub use config::CasesConfig;
pub use error::CaseError;
pub use format::{Case, CaseFile, Step, parse_case};
