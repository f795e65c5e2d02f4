//! The gRPC face of the coordinator, one file per service: Workers
//! (`workers.rs`: one stream per worker, where a device's messages enter),
//! Runs (`runs.rs`: clients submit and watch), Fleet (`fleet.rs`:
//! operators) and Builds (`builds.rs`: the runs' app builds, by content). Each handler forwards to the owner task or reads the store.

mod builds;
mod fleet;
mod runs;
mod workers;

use std::sync::Arc;

use argus_grid::owner::Handle;
use argus_grid::relay::ProjectRelay;
use argus_store::Store;

/// What every service shares.
#[derive(Clone)]
pub(crate) struct Services {
    pub(crate) handle: Handle,
    pub(crate) store: Store,
    /// Fixture and exec calls between workers and the runs' clients.
    pub(crate) relay: Arc<ProjectRelay>,
    /// The workers' inbound streams, drained on shutdown.
    pub(crate) tasks: tokio_util::task::TaskTracker,
    /// Where the runs' screenshots and films are kept; none when unset.
    pub(crate) artifacts: Option<argus_store::artifacts::Artifacts>,
    /// WebDriver sessions, whose calls' answers come up the workers' links.
    /// Calls in flight to devices' apps, which their workers answer here.
    pub(crate) calls: Arc<argus_grid::calls::DeviceCalls>,
    /// The dashboard's public address, for the links answers carry.
    pub(crate) dashboard_url: Option<String>,
    /// What each device shows now, and whether anyone watches.
    pub(crate) live: Arc<argus_grid::live::LiveScreens>,
    /// Where the runs' app builds are kept; none when unset.
    pub(crate) builds: Option<Arc<crate::builds::BuildFiles>>,
}
