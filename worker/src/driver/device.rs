//! The driver is a device the case runner can drive.

use std::sync::Arc;
use std::time::Duration;

use argus_cases::runner::{CallFailure, Device};
use argus_proto::wire::Hello;
use serde_json::Value;

use super::{CallError, Driver};

impl From<CallError> for CallFailure {
    fn from(error: CallError) -> Self {
        CallFailure {
            code: error.code().map(str::to_owned),
            message: error.to_string(),
            lost: error.is_infrastructure(),
        }
    }
}

impl Device for Driver {
    fn hello(&self) -> Option<Arc<Hello>> {
        Driver::hello(self)
    }

    async fn call(&self, method: &str, params: Option<Value>, timeout: Duration) -> Result<Value, CallFailure> {
        Driver::call(self, method, params, timeout).await.map_err(CallFailure::from)
    }
}
