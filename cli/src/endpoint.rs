/// Where a driver listens and the token both ends share: the same flags for
/// the driver's side (`argus call`) and the app's (`argus sim`).
#[derive(clap::Args)]
pub struct Endpoint {
    /// The driver's address (127.0.0.1: an iOS simulator shares it, an
    /// Android emulator reaches it as 10.0.2.2).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The driver's port.
    #[arg(long, env = "LYNKEUS_PORT", default_value_t = 8123)]
    pub port: u16,
    /// The shared token; an app with an empty one keeps its agent off.
    #[arg(long, env = "LYNKEUS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}
