//! The commands that start a grid or ask one: `argus coordinator`, `argus
//! worker`, `argus standalone`, `argus migrate`,
//! `argus devices` and `argus runs`: the grid's processes and their views.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use argus_proto::auth::Bearer;
use argus_proto::grpc::{self, fleet_client::FleetClient, runs_client::RunsClient};
use argus_proto::run::RunManifest;
use argus_store::{Backend, Store};
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::settings;
pub use argus_coordinator::config::{DEFAULT_DATABASE, DEFAULT_HTTP, DEFAULT_LISTEN};

mod builds;
mod coordinator;
mod fleet;
mod import;
mod mutes;
mod standalone;
mod worker;

pub use builds::*;
pub use coordinator::*;
pub use fleet::*;
pub use import::*;
pub use mutes::*;
pub use standalone::*;
pub use worker::*;

#[derive(clap::Args)]
pub struct StoreArgs {
    /// postgres://… for a team, sqlite:FILE embedded [default: sqlite:argus.db].
    #[arg(long, env = "ARGUS_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The database URL read from a file (only its owner and group may read
    /// it), in place of --database-url.
    #[arg(long, env = "ARGUS_DATABASE_URL_FILE", value_name = "FILE")]
    database_url_file: Option<PathBuf>,
}

impl StoreArgs {
    /// The database to open: given, read from its file, or the default.
    pub fn url(&self) -> Result<String, String> {
        let mut url = self.database_url.clone();
        settings::secret_from_file("database_url", &mut url, self.database_url_file.as_deref())?;
        Ok(url.unwrap_or_else(|| DEFAULT_DATABASE.to_owned()))
    }
}

#[derive(clap::Args)]
pub struct ArtifactArgs {
    /// Where screenshots and films of runs are kept: a folder per run,
    /// made if it is not there.
    #[arg(long, env = "ARGUS_ARTIFACTS", default_value = "argus-artifacts", value_name = "DIR")]
    pub artifacts: PathBuf,
}

/// The artifact store in `dir`.
pub fn open_artifacts(dir: &std::path::Path) -> Result<argus_store::artifacts::Artifacts, String> {
    Ok(std::sync::Arc::new(argus_store::artifacts::DirStore::open(dir.to_path_buf()).map_err(|e| e.to_string())?))
}

/// Driver ports, as `--ports` takes them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(transparent)]
pub struct Ports(pub Vec<u16>);

/// `8123-8126` or `8123,8125,8130`.
pub fn parse_ports(text: &str) -> Result<Ports, String> {
    let mut ports = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parse = |p: &str| p.trim().parse::<u16>().map_err(|_| format!("{p:?} is not a port (1-65535)"));
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (parse(from)?, parse(to)?);
                if from > to || to - from >= 256 {
                    return Err(format!("{part}: a range goes up, 256 ports at most"));
                }
                ports.extend(from..=to);
            }
            None => ports.push(parse(part)?),
        }
    }
    if ports.is_empty() {
        return Err("no ports given".into());
    }
    Ok(Ports(ports))
}

/// Where a client finds the coordinator, and what it needs to talk to it.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub url: String,
    pub token: Option<String>,
    /// The CA that signed an https:// coordinator's certificate, if private.
    pub ca: Option<PathBuf>,
}

impl Target {
    pub fn plain(url: &str) -> Self {
        Self { url: url.to_owned(), ..Self::default() }
    }
}

/// A connection to the coordinator and the token every request carries.
pub async fn channel(target: &Target) -> Result<(tonic::transport::Channel, Bearer), String> {
    let bearer = Bearer::new(target.token.as_deref()).map_err(|e| e.to_string())?;
    let channel = argus_proto::connect::connect(&target.url, target.ca.as_deref()).await.map_err(|e| e.to_string())?;
    Ok((channel, bearer))
}

fn failed(context: &str, error: impl std::fmt::Display) -> ExitCode {
    eprintln!("argus {context}: {error}");
    ExitCode::from(2)
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            format!("{addr} is in use: another coordinator or program listens there")
        } else {
            format!("cannot listen on {addr}: {e}")
        }
    })
}

/// Stops on Ctrl-C or SIGTERM.
pub fn stop_on_signal() -> CancellationToken {
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    argus_proto::task::spawn("stop on a signal", async move {
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    cancel
}

pub async fn migrate(args: StoreArgs) -> ExitCode {
    let database_url = match args.url() {
        Ok(url) => url,
        Err(error) => return failed("migrate", error),
    };
    match Store::open(&database_url).await {
        Ok(store) => {
            store.close().await;
            eprintln!("argus migrate: {} is up to date", argus_store::redact_url(&database_url));
            ExitCode::SUCCESS
        }
        Err(error) => failed("migrate", error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_and_ranges() {
        assert_eq!(parse_ports("8123-8126").unwrap().0, [8123, 8124, 8125, 8126]);
        assert_eq!(parse_ports("8123, 8130").unwrap().0, [8123, 8130]);
        assert_eq!(parse_ports("8126-8123").unwrap_err(), "8126-8123: a range goes up, 256 ports at most");
        assert_eq!(parse_ports("81x").unwrap_err(), "\"81x\" is not a port (1-65535)");
    }
}
