use tracing_subscriber::EnvFilter;

/// Logs to stderr, so that stdout carries only results. `ARGUS_LOG` (or
/// `RUST_LOG`) overrides the command's default level.
pub fn init(default_level: &str) {
    let filter = std::env::var("ARGUS_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
