//! The worker's settings, once the CLI has merged its layers (flags,
//! `ARGUS_*` variables, `[worker]` in argus.toml or a worker.toml, secret
//! files), and the checks no type makes.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::link::WorkerConfig;
use crate::slots::{SlotConfig, SlotsError, check_slots};

/// What the worker runs with, once the layers are merged.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    pub coordinator: Option<String>,
    pub name: String,
    pub token: Option<String>,
    pub tls_ca: Option<PathBuf>,
    pub ports: Option<Vec<u16>>,
    pub platform: String,
    pub driver_host: String,
    pub app_token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub app_token_file: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    /// The file's `[[slot]]` tables.
    #[serde(default, skip_serializing)]
    pub slot: Vec<SlotConfig>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            coordinator: None,
            name: "worker".into(),
            token: None,
            tls_ca: None,
            ports: None,
            platform: "ios".into(),
            driver_host: "127.0.0.1".into(),
            app_token: None,
            token_file: None,
            app_token_file: None,
            metrics: None,
            slot: Vec::new(),
        }
    }
}

/// A setting the worker cannot start with, named.
#[derive(Debug, thiserror::Error)]
pub enum WorkerSettingsError {
    #[error(transparent)]
    Slots(#[from] SlotsError),
    #[error("give the devices' driver ports (--ports 8123-8126) or a worker.toml with [[slot]]s (--config)")]
    NoSlots,
    #[error(
        "give the coordinator's URL: --coordinator http://HOST:7171 (or `coordinator` in the [worker] table of argus.toml)"
    )]
    NoCoordinator,
}

impl WorkerSettings {
    /// The device slots: one per port when ports are given (a flag, a
    /// variable or the file), else the file's `[[slot]]`s, checked (`shown`
    /// names the file).
    pub fn slots(&mut self, shown: &str) -> Result<Vec<SlotConfig>, WorkerSettingsError> {
        check_slots(&mut self.slot, shown)?;
        let slots: Vec<SlotConfig> = match &self.ports {
            Some(ports) => ports.iter().map(|p| SlotConfig::for_port(*p, &self.platform)).collect(),
            None => self.slot.clone(),
        };
        if slots.is_empty() {
            return Err(WorkerSettingsError::NoSlots);
        }
        Ok(slots)
    }

    /// What the worker's link runs with, once it knows its coordinator.
    pub fn into_config(self, slots: Vec<SlotConfig>) -> Result<WorkerConfig, WorkerSettingsError> {
        let coordinator = self.coordinator.ok_or(WorkerSettingsError::NoCoordinator)?;
        Ok(WorkerConfig {
            coordinator,
            name: self.name,
            host: self.driver_host,
            app_token: self.app_token,
            token: self.token,
            tls_ca: self.tls_ca,
            slots,
        })
    }
}
