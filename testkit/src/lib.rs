//! What Argus' tests and benchmarks share, written once: a free port, a
//! fresh database on either store, simulated apps, a proxy whose links can
//! be cut, captured logs, and an in-process grid (a coordinator over real
//! gRPC, and workers of simulated devices).
#![allow(clippy::disallowed_methods)] // Test helpers start their tasks with tokio::spawn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argus_proto::grpc;
use argus_sim::{Agent, AgentConfig, App, Model};
use argus_store::Store;
use argus_worker::link::{self, SlotConfig, WorkerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

pub use argus_store::testkit::{database_url, fresh, postgres_url, sqlite_url, unique};

/// A port nothing listens on now, and that no connection will take before
/// the test binds it.
///
/// A port the kernel hands out for `bind(0)` comes from its ephemeral range,
/// the same range every outgoing connection takes its source port from: with
/// tests dialing each other in parallel, one of them could take the port
/// between this pick and the listener's bind (CI saw a coordinator and a
/// worker exit on "address in use" that way). So the ports come from below
/// that range, each handed out once per test process, from an offset of
/// the process' own so that two test binaries rarely start on the same ones.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = unclaimed_range();
    let span = u32::from(high - low);
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = low + ((start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        let free = |host: &str| std::net::TcpListener::bind((host, port)).is_ok();
        if free("127.0.0.1") && free("0.0.0.0") {
            return port;
        }
    }
    panic!("no free port between {low} and {high}")
}

/// Ports below the kernel's ephemeral range (Linux' `ip_local_port_range`,
/// 32768 and up by default) and above the well-known ones most services use.
fn unclaimed_range() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    (ephemeral_low.saturating_sub(12_000).max(12_000), ephemeral_low.max(13_000))
}

/// `n` distinct ports nothing listens on now.
pub fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| free_port()).collect()
}

/// The example shop's model, as the simulated app runs it.
pub fn shop_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml")
}

/// A simulated app running the example shop model, in this process.
pub struct Sim {
    pub app: Arc<App>,
    port: u16,
    cancel: CancellationToken,
}

impl Sim {
    pub fn start(port: u16, token: Option<&str>) -> Self {
        Self::start_with(port, token, Model::load(&shop_model()).unwrap())
    }

    /// The shop with one text changed: a device whose app is subtly wrong.
    pub fn start_altered(port: u16, from: &str, to: &str) -> Self {
        // Parsed from memory: a file per altered app was left in the temp folder.
        let text = std::fs::read_to_string(shop_model()).unwrap().replace(from, to);
        Self::start_with(port, None, Model::parse(&text, "the altered shop").unwrap())
    }

    pub fn start_with(port: u16, token: Option<&str>, model: Model) -> Self {
        let app = App::new(model);
        let config = AgentConfig { port, token: token.map(str::to_owned), ..AgentConfig::default() };
        let cancel = CancellationToken::new();
        tokio::spawn(Agent::new(app.clone(), config).run(cancel.clone()));
        Self { app, port, cancel }
    }

    /// The port it dials.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// How many times the app was called `method`.
    pub async fn traced(&self, method: &str) -> usize {
        let trace = self.app.handle("trace", None).await.unwrap();
        trace["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "command" && e["method"] == method).count()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A TCP proxy in front of a driver; `cut()` drops every connection through
/// it, as a flaky link or a relaunched app would.
pub struct Proxy {
    pub addr: SocketAddr,
    links: Arc<Mutex<Vec<CancellationToken>>>,
    cancel: CancellationToken,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let links: Arc<Mutex<Vec<CancellationToken>>> = Arc::default();
        let cancel = CancellationToken::new();
        let (registry, stop) = (links.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                let link = CancellationToken::new();
                registry.lock().unwrap().push(link.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = link.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Self { addr, links, cancel }
    }

    pub fn cut(&self) {
        for link in self.links.lock().unwrap().drain(..) {
            link.cancel();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.cut();
    }
}

/// Log lines written while the guard lives, on this thread (the tests'
/// runtime is single-threaded, so every task's lines land here).
pub fn capture_logs() -> (tracing::subscriber::DefaultGuard, Arc<Mutex<Vec<u8>>>) {
    let buffer: Arc<Mutex<Vec<u8>>> = Arc::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || LogWriter(writer.clone()))
        .finish();
    (tracing::subscriber::set_default(subscriber), buffer)
}

pub fn logs(buffer: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned()
}

pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How [`Grid::serve`] starts its coordinator.
#[derive(Default)]
pub struct GridOptions {
    /// The database; a fresh SQLite file when `None`.
    pub database: Option<String>,
    /// Serve the HTTP port (dashboard, API, metrics) on a port of its own:
    /// [`Grid::http`].
    pub http: bool,
    /// Everything else the coordinator is served with (tokens, TLS, files,
    /// the owner's timings, webhooks); its `http` is set by `http` above.
    pub coordinator: argus_coordinator::Options,
    /// What stops it (and its workers), besides dropping it: a benchmark's
    /// token for everything a round started. A new one when `None`.
    pub cancel: Option<CancellationToken>,
    /// Log nothing: a benchmark's output is its figures. A test's grid
    /// logs to the test's output, shown when the test fails.
    pub quiet: bool,
}

/// A coordinator on a fresh database over real gRPC, and the workers and
/// simulated apps the test adds; all stop when it is dropped.
pub struct Grid {
    /// The coordinator's gRPC address (`http://…`; `https://` is the
    /// test's to use when it served TLS).
    pub url: String,
    /// Its HTTP port (`host:port`), when served with [`GridOptions::http`].
    pub http: Option<SocketAddr>,
    /// The database it runs on.
    pub database: String,
    pub cancel: CancellationToken,
    pub sims: Vec<Sim>,
    pub workers: Vec<CancellationToken>,
    /// The coordinator's task, for [`Grid::shut_down`].
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Grid {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Grid {
    /// A grid on a fresh SQLite database.
    pub async fn start() -> Self {
        Self::serve(GridOptions::default()).await
    }

    /// A grid on the database at `url`.
    pub async fn on(url: &str) -> Self {
        Self::serve(GridOptions { database: Some(url.to_owned()), ..GridOptions::default() }).await
    }

    /// A grid whose coordinator is served with `options`: the one way every
    /// test and benchmark starts a coordinator in process.
    pub async fn serve(options: GridOptions) -> Self {
        // What the grid logged is shown when a test fails (it is captured
        // otherwise): a run that does not end says why.
        if !options.quiet {
            let _ = tracing_subscriber::fmt().with_env_filter("info").with_test_writer().try_init();
        }
        let database = options.database.unwrap_or_else(|| sqlite_url("argus-grid"));
        let store = Store::open(&database).await.unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (http_listener, http) = if options.http {
            let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = http.local_addr().unwrap();
            (Some(http), Some(addr))
        } else {
            (None, None)
        };
        let coordinator = argus_coordinator::Options { http: http_listener, ..options.coordinator };
        let cancel = options.cancel.unwrap_or_default();
        let serving = argus_coordinator::serve_with(listener, store, coordinator, cancel.clone());
        let serving = tokio::spawn(async move {
            if let Err(error) = serving.await {
                panic!("the test's coordinator stopped: {error}");
            }
        });
        Self { url, http, database, cancel, sims: Vec::new(), workers: Vec::new(), serving: Some(serving) }
    }

    /// Its HTTP port's address; the grid must have been served with one.
    pub fn http(&self) -> SocketAddr {
        self.http.expect("the grid was served without its HTTP port (GridOptions::http)")
    }

    /// A grid of `workers` workers of `devices` simulated iOS devices each.
    pub async fn with(workers: usize, devices: usize) -> Self {
        let mut grid = Self::start().await;
        for n in 0..workers {
            grid.worker(&format!("w{}", n + 1), devices);
        }
        grid.wait_for_devices(workers * devices).await;
        grid
    }

    /// A worker with `devices` slots, each with a simulated app dialing it.
    pub fn worker(&mut self, name: &str, devices: usize) -> CancellationToken {
        let ports = free_ports(devices);
        let cancel = self.worker_on(name, &ports);
        for port in ports {
            self.sims.push(Sim::start(port, None));
        }
        cancel
    }

    /// A worker with one iOS slot per port, and no apps: the test starts them.
    pub fn worker_on(&mut self, name: &str, ports: &[u16]) -> CancellationToken {
        let slots = ports.iter().map(|p| SlotConfig::for_port(*p, "ios")).collect();
        self.spawn_worker(self.worker_config(name, slots))
    }

    /// What a worker named `name` with `slots` is configured with, dialing
    /// this grid: for a test to change (a token, TLS) before
    /// [`Grid::spawn_worker`].
    pub fn worker_config(&self, name: &str, slots: Vec<SlotConfig>) -> WorkerConfig {
        WorkerConfig {
            coordinator: self.url.clone(),
            name: name.into(),
            host: "127.0.0.1".into(),
            app_token: None,
            token: None,
            tls_ca: None,
            slots,
        }
    }

    /// Starts a worker in this process; it stops with the grid.
    pub fn spawn_worker(&mut self, config: WorkerConfig) -> CancellationToken {
        let cancel = self.cancel.child_token();
        tokio::spawn(link::run(config, cancel.clone()));
        self.workers.push(cancel.clone());
        cancel
    }

    /// Stops the coordinator and waits until it has ended (its database
    /// let go of).
    pub async fn shut_down(mut self) {
        self.stop();
        if let Some(serving) = self.serving.take() {
            let _ = serving.await;
        }
    }

    /// Stops the coordinator and the workers (as dropping the grid does).
    pub fn stop(&self) {
        self.cancel.cancel();
        for worker in &self.workers {
            worker.cancel();
        }
    }

    /// Waits until `count` devices are idle.
    pub async fn wait_for_devices(&self, count: usize) {
        wait_for_devices(&self.url, count).await;
    }
}

/// Waits until the coordinator at `url` has `count` idle devices.
pub async fn wait_for_devices(url: &str, count: usize) {
    let mut fleet = grpc::fleet_client::FleetClient::connect(url.to_owned()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let list = fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner();
        let idle = list
            .devices
            .iter()
            .filter(|d| d.device.as_ref().is_some_and(|d| d.state == grpc::DeviceState::Idle as i32))
            .count();
        if idle >= count {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{count} devices did not come up: {idle} idle");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the coordinator at `url` lists `count` devices, whatever
/// their state (stand-in devices that hold their leases).
pub async fn wait_for_listed(url: &str, count: usize) {
    let mut fleet = grpc::fleet_client::FleetClient::connect(url.to_owned()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while fleet.list(grpc::ListFleetRequest {}).await.unwrap().into_inner().devices.len() < count {
        assert!(tokio::time::Instant::now() < deadline, "{count} devices did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain HTTP/1.1 GET of `path`: the status and the body.
pub async fn http_get(addr: impl std::fmt::Display, path: &str) -> (u16, String) {
    http_request(addr, path.as_bytes(), "").await
}

/// A GET of `target` sent as it is (bytes a client would never send
/// included), with `headers` (`name: value\r\n` each): the status and
/// the body. Status 0, with the error as the body, when no answer came
/// (nothing listens yet, or it took over 30 s).
pub async fn http_request(addr: impl std::fmt::Display, target: &[u8], headers: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(format!(" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}\r\n").as_bytes());
    let mut response = Vec::new();
    let exchange = async {
        let mut stream = TcpStream::connect(addr.to_string()).await?;
        stream.write_all(&request).await?;
        stream.read_to_end(&mut response).await
    };
    match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return (0, format!("no answer from {addr}: {error}")),
        Err(_) => return (0, format!("no answer from {addr} within 30 s")),
    }
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]);
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, String::from_utf8_lossy(response.get(split + 4..).unwrap_or_default()).into_owned())
}
