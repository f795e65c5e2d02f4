//! A device slot as the worker keeps it: its driver, whether an attempt
//! runs on it, the app's last hello, and its live view.

use std::sync::{Arc, Mutex};

use argus_proto::grpc;

use crate::driver::Driver;
use crate::live::Live;
use crate::slots::SlotConfig;

/// One device slot: its configuration, its driver, and what the worker
/// tells the coordinator of it.
pub(crate) struct Slot {
    pub(crate) config: SlotConfig,
    pub(crate) driver: Arc<Driver>,
    busy: Mutex<bool>,
    /// The last hello an app sent on this slot: kept after it leaves, so the
    /// device is shown as disconnected rather than never seen.
    last_hello: Mutex<Option<Arc<argus_proto::wire::Hello>>>,
    /// What its app shows now, for the live view.
    pub(crate) live: Live,
}

impl Slot {
    pub(crate) fn new(config: SlotConfig, driver: Driver) -> Self {
        Self {
            config,
            driver: Arc::new(driver),
            busy: Mutex::new(false),
            last_hello: Mutex::new(None),
            live: Live::default(),
        }
    }

    /// An attempt runs on it, or has ended.
    pub(crate) fn set_busy(&self, busy: bool) {
        *self.busy.lock().unwrap_or_else(|p| p.into_inner()) = busy;
    }

    /// The device as the coordinator is told of it.
    pub(crate) fn device(&self) -> grpc::Device {
        let mut last = self.last_hello.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hello) = self.driver.hello() {
            *last = Some(hello);
        }
        let hello = last.clone();
        let state = match (self.driver.connected(), *self.busy.lock().unwrap_or_else(|p| p.into_inner())) {
            (true, true) => grpc::DeviceState::Busy,
            (true, false) => grpc::DeviceState::Idle,
            (false, _) if hello.is_none() => grpc::DeviceState::Waiting,
            (false, _) => grpc::DeviceState::Disconnected,
        };
        crate::metrics::slot(&self.config.name, &self.config.platform, &grpc::device_state_name(state as i32));
        grpc::Device {
            slot: self.config.name.clone(),
            port: u32::from(self.config.port),
            platform: self.config.platform.clone(),
            bridge: self.config.bridge.clone(),
            labels: self.config.labels.clone().into_iter().collect(),
            udid: self.config.udid.clone().unwrap_or_default(),
            serial: self.config.serial.clone().unwrap_or_default(),
            state: state as i32,
            hello_json: hello.map(|h| serde_json::to_string(&*h).unwrap_or_default()).unwrap_or_default(),
            // Said whether or not an app is attached: a second app with a
            // wrong token on a busy port, an app that keeps reconnecting.
            app_problem: self.driver.problem().unwrap_or_default(),
        }
    }
}
