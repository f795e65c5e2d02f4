//! What the command-line tests share: the binary, free ports, temporary
//! projects, simulated apps and processes that are killed when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const ARGUS: &str = env!("CARGO_BIN_EXE_argus");

pub use argus_testkit::free_port;

/// A folder of the test's own, removed with what is in it when dropped
/// (declared before the processes that write in it, it outlives them).
pub struct Folder(tempfile::TempDir);

impl std::ops::Deref for Folder {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Folder {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for Folder {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

pub fn temp_dir(name: &str) -> Folder {
    Folder(tempfile::Builder::new().prefix(&format!("argus-cli-{name}-")).tempdir().unwrap())
}

pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Simulated apps of the example shop, one per port, as processes.
pub struct Sims(pub Vec<Child>);

impl Sims {
    pub fn start(ports: &[u16]) -> Self {
        Sims(ports.iter().map(|port| sim(*port)).collect())
    }
}

/// One simulated shop app dialing `port`.
pub fn sim(port: u16) -> Child {
    sim_of(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/shop/app.yaml"), port)
}

/// One simulated app of `model` dialing `port`.
pub fn sim_of(model: &Path, port: u16) -> Child {
    Command::new(ARGUS)
        .args(["sim", "--model"])
        .arg(model)
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for Sims {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until the coordinator at `url` lists `count` idle devices.
pub fn wait_for_devices(url: &str, count: usize) {
    wait_for_idle(url, count, Duration::from_secs(30));
}

/// The `argus devices` listing once `count` devices are idle, within `wait`.
pub fn wait_for_idle(url: &str, count: usize, wait: Duration) -> String {
    let deadline = Instant::now() + wait;
    loop {
        let listing = text(&Command::new(ARGUS).args(["devices", "--coordinator", url]).output().unwrap());
        if listing.lines().filter(|l| l.contains(" idle ")).count() >= count {
            return listing;
        }
        assert!(Instant::now() < deadline, "{count} devices never came up: {listing}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn spawn(args: &[&str], cwd: &Path) -> Child {
    Command::new(ARGUS).current_dir(cwd).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap()
}

/// A process killed (and reaped) when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `signal` (`TERM`, `STOP`, `CONT`, …) to a process.
pub fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill -{signal} {}", child.id());
}

/// Stops a process as an operator would (SIGTERM), so that it flushes its spans.
pub fn terminate(mut child: Child) {
    signal(&child, "TERM");
    let _ = child.wait();
}

/// A request with a JSON body on an HTTP port: the status and the body.
pub fn http_json(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    http_json_with(addr, method, path, body, "")
}

/// The same, with more headers (`name: value\r\n` each).
pub fn http_json_with(addr: &str, method: &str, path: &str, body: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a response with headers");
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, String::from_utf8_lossy(&response[split + 4..]).into_owned())
}

/// A GET on an HTTP port: the status and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let (status, body) = http_get_bytes(addr, path);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A GET on an HTTP port: the status and the body's bytes.
pub fn http_get_bytes(addr: &str, path: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a response with headers");
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response[split + 4..].to_vec())
}

/// A coordinator on SQLite in `dir` with `extra` flags, on ports picked
/// free: its process, its gRPC and its HTTP address, once it listens. A
/// port picked free can be taken by another test before the coordinator
/// binds it; then the coordinator exits at once, and is started again on
/// other ports.
pub fn coordinator_on_free_ports(dir: &Path, extra: &[&str]) -> (Killed, String, String) {
    let database = format!("sqlite:{}", dir.join("argus.db").display());
    for _ in 0..5 {
        let (listen, http) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
        let args = ["coordinator", "--database-url", &database, "--listen", &listen, "--http", &http];
        let mut child = Killed(spawn(&[&args[..], extra].concat(), dir));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(&listen).is_ok() && std::net::TcpStream::connect(&http).is_ok() {
                return (child, listen, http);
            }
            if child.0.try_wait().ok().flatten().is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "the coordinator never listened on {listen} and {http}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("the coordinator could not bind free ports five times over");
}
