//! One configuration for the coordinator, the worker and the clients, in
//! layers, each above the one before:
//!
//! 1. defaults;
//! 2. `argus.toml` in the working directory, or the file `--config` (or
//!    `ARGUS_CONFIG`) names: the command's table (`[coordinator]`,
//!    `[worker]`, `[client]`); a file with none of these tables is read whole
//!    (a `worker.toml` of old);
//! 3. the `ARGUS_*` environment;
//! 4. flags.
//!
//! clap reads 3 and 4 (every flag has its variable, and a flag wins over
//! its variable); figment merges them above 1 and 2 and checks every value
//! before anything starts, naming the key and the file. `--print-config`
//! shows what holds and where each value came from, secrets hidden.

use std::path::{Path, PathBuf};

use clap::ArgMatches;
use clap::parser::ValueSource;
use figment::providers::Serialized;
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The file read when `--config` is not given, if it is there.
pub const DEFAULT_FILE: &str = "argus.toml";
/// The tables of an `argus.toml`, one per kind of command.
const SECTIONS: [&str; 3] = ["coordinator", "worker", "client"];

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Env(name) => write!(f, "environment {name}"),
            Origin::Flag(name) => write!(f, "flag --{name}"),
        }
    }
}

/// Settings as loaded, with where each key's value came from.
pub struct Loaded<T> {
    pub settings: T,
    pub origins: Vec<(String, Origin)>,
}

/// The file layer: one table of a TOML file, named after the file, so that
/// a bad value's error names both.
struct FileLayer {
    path: PathBuf,
    table: Dict,
}

impl Provider for FileLayer {
    fn metadata(&self) -> Metadata {
        Metadata::from(self.path.display().to_string(), self.path.as_path())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Map::from([(Profile::Default, self.table.clone())]))
    }
}

/// The file to read: the one named (which must be there), else
/// `argus.toml` here when there is one.
fn file_to_read(named: Option<&Path>) -> Result<Option<PathBuf>, String> {
    match named {
        Some(path) if path.is_file() => Ok(Some(path.to_path_buf())),
        Some(path) => Err(format!("--config {}: no such file", path.display())),
        None => Ok(Some(PathBuf::from(DEFAULT_FILE)).filter(|p| p.is_file())),
    }
}

/// The command's table of the file, as figment values.
fn read_section(path: &Path, section: &str) -> Result<Dict, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    // An argus.toml has tables named after commands; a worker.toml of old
    // has its keys at the top (`coordinator` there is a URL, not a table).
    let sectioned = SECTIONS.iter().any(|s| table.get(*s).is_some_and(toml::Value::is_table));
    let chosen = if sectioned {
        match table.get(section) {
            None => toml::Table::new(),
            Some(toml::Value::Table(t)) => t.clone(),
            Some(_) => return Err(format!("{}: `{section}` must be a table ([{section}])", path.display())),
        }
    } else {
        table
    };
    match Value::serialize(&chosen).map_err(|e| format!("{}: {e}", path.display()))? {
        Value::Dict(_, dict) => Ok(dict),
        _ => Ok(Dict::new()),
    }
}

/// Loads `T` for `command` from its table `section`: its defaults, the file, and what
/// clap read from the environment and flags (`given`: the command's
/// arguments, whose unset values serialize as nothing). `extra` are keys the
/// file may hold that are read with `T` but are not settings of their own
/// (the worker's `slot` tables).
pub fn load<T: Serialize + DeserializeOwned + Default>(
    command: &str,
    section: &str,
    config: Option<&Path>,
    given: &impl Serialize,
    matches: &ArgMatches,
    extra: &[&str],
) -> Result<Loaded<T>, String> {
    let known: Vec<String> = match Value::serialize(T::default()) {
        Ok(Value::Dict(_, dict)) => dict.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    let mut file = None;
    let mut from_file = Vec::new();
    if let Some(path) = file_to_read(config)? {
        let table = read_section(&path, section)?;
        if let Some(key) = table.keys().find(|k| !known.contains(k) && !extra.contains(&k.as_str())) {
            return Err(format!("{}: [{section}] has no key `{key}`; it takes {}", path.display(), known.join(", ")));
        }
        from_file = table.keys().cloned().collect();
        figment = figment.merge(FileLayer { path: path.clone(), table });
        file = Some(Origin::File(path));
    }
    let settings: T = extract(figment.merge(Serialized::defaults(given)), section)?;
    Ok(Loaded { origins: origins(command, &known, &from_file, file, matches), settings })
}

/// `T` from the merged layers; each bad value named by its key and where it
/// came from (a file's path; flags and the environment were checked by
/// clap already).
fn extract<T: DeserializeOwned>(figment: Figment, section: &str) -> Result<T, String> {
    figment.extract().map_err(|errors| {
        errors
            .into_iter()
            .map(|e| {
                let key = e.path.iter().filter(|p| p.as_str() != "default").cloned().collect::<Vec<_>>().join(".");
                let place = match e.metadata.as_ref().and_then(|m| m.source.as_ref()) {
                    Some(figment::Source::File(path)) => path.display().to_string(),
                    _ => "the flags and environment".to_owned(),
                };
                format!("{place}: [{section}] {key}: {}", e.kind)
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

fn origins(
    command: &str,
    known: &[String],
    from_file: &[String],
    file: Option<Origin>,
    matches: &ArgMatches,
) -> Vec<(String, Origin)> {
    known
        .iter()
        .map(|key| {
            let origin = match matches.try_get_raw(key).ok().flatten().and_then(|_| matches.value_source(key)) {
                Some(ValueSource::CommandLine) => Origin::Flag(key.replace('_', "-")),
                Some(ValueSource::EnvVariable) => Origin::Env(env_name(command, key)),
                _ if from_file.contains(key) => file.clone().unwrap_or(Origin::Default),
                _ => Origin::Default,
            };
            (key.clone(), origin)
        })
        .collect()
}

/// The variable clap reads `key` of `command` from.
fn env_name(command: &str, key: &str) -> String {
    let cli = crate::command();
    let arg = cli.find_subcommand(command).and_then(|c| c.get_arguments().find(|a| a.get_id() == key));
    arg.and_then(|a| a.get_env()).map_or_else(|| key.to_uppercase(), |name| name.to_string_lossy().into_owned())
}

/// Prints the effective settings, one `key = value   # origin` per line,
/// tokens and database passwords hidden.
pub fn print<T: Serialize>(loaded: &Loaded<T>) {
    let values = match Value::serialize(&loaded.settings) {
        Ok(Value::Dict(_, dict)) => dict,
        _ => Dict::new(),
    };
    for (key, origin) in &loaded.origins {
        let value = values.get(key);
        let shown = match value {
            None | Some(Value::Empty(..)) => "(unset)".to_owned(),
            Some(_) if key.ends_with("token") => "(hidden)".to_owned(),
            // A webhook's URL may be its secret (Slack's): names and formats only.
            Some(Value::Array(_, hooks)) if key == "webhooks" => {
                let named: Vec<String> = hooks
                    .iter()
                    .enumerate()
                    .map(|(i, hook)| {
                        let field = |name: &str| match hook {
                            Value::Dict(_, dict) => dict.get(name).map(show),
                            _ => None,
                        };
                        let name = field("name").unwrap_or_else(|| format!("\"webhook {}\"", i + 1));
                        format!("{name} ({})", field("format").unwrap_or_else(|| "\"json\"".into()))
                    })
                    .collect();
                format!("[{}]", named.join(", "))
            }
            Some(Value::String(_, text)) if key == "database_url" => {
                format!("{:?}", argus_store::redact_url(text))
            }
            Some(value) => show(value),
        };
        outln!("{key} = {shown}   # {origin}");
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::String(_, s) => format!("{s:?}"),
        Value::Num(_, n) => n.to_u128().map_or_else(|| format!("{:?}", n.to_f64()), |n| n.to_string()),
        Value::Bool(_, b) => b.to_string(),
        Value::Empty(_, _) => "(unset)".to_owned(),
        Value::Char(_, c) => format!("{c:?}"),
        Value::Array(_, items) => format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Dict(_, dict) => {
            format!("{{ {} }}", dict.iter().map(|(k, v)| format!("{k} = {}", show(v))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// What a client (`argus run`, `devices`, `runs`) reads from the layers:
/// the `[client]` table.
#[derive(Debug, Default, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// The coordinator's gRPC URL, or several (an active one and its standbys).
    pub coordinator: Option<String>,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    /// The project runs are filed under.
    pub project: Option<String>,
}

impl ClientSettings {
    /// The settings with the token read from `token_file`, if one is named.
    pub fn with_secret_file(mut self) -> Result<Self, String> {
        secret_from_file("token", &mut self.token, self.token_file.as_deref())?;
        Ok(self)
    }
}

/// A client's flags and variables, as the layer above the file.
#[derive(Serialize)]
pub struct ClientGiven {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

/// A secret handed over as a file (a Docker or Kubernetes secret, systemd's
/// `LoadCredential=`, a file only its owner reads): its contents without the
/// line end. A file that is missing, unreadable, empty or readable by every
/// user is refused, with `key` and its path named.
pub fn read_secret(key: &str, path: &Path) -> Result<String, String> {
    let named = format!("{key} {}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{named}: no such file"),
        _ => format!("{named}: {e}"),
    })?;
    if !meta.is_file() {
        return Err(format!("{named}: not a file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o004 != 0 {
            return Err(format!(
                "{named}: every user may read it (mode {mode:03o}); let only its owner (and group) read it: chmod o-r"
            ));
        }
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{named}: {e}"))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(format!("{named}: the file is empty"));
    }
    Ok(secret.to_owned())
}

/// Fills `value` from `file` when a file is named: the secret given one way
/// or the other, never both (`key` names it in the refusal).
pub fn secret_from_file(key: &str, value: &mut Option<String>, file: Option<&Path>) -> Result<(), String> {
    let Some(file) = file else { return Ok(()) };
    if value.is_some() {
        return Err(format!("{key} and {key}_file are both given: give the secret one way"));
    }
    *value = Some(read_secret(&format!("{key}_file"), file)?);
    Ok(())
}

#[cfg(test)]
mod secret_tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_secret_file_is_read_or_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let owner = file(dir.path(), "owner", "s3cret\n", 0o600);
        let group = file(dir.path(), "group", "s3cret\r\n", 0o440);
        let everyone = file(dir.path(), "everyone", "s3cret\n", 0o644);
        let empty = file(dir.path(), "empty", "\n", 0o600);
        assert_eq!(read_secret("token_file", &owner).unwrap(), "s3cret");
        assert_eq!(read_secret("token_file", &group).unwrap(), "s3cret");
        let refused = read_secret("token_file", &everyone).unwrap_err();
        assert_eq!(
            refused,
            format!(
                "token_file {}: every user may read it (mode 644); let only its owner (and group) read it: chmod o-r",
                everyone.display()
            )
        );
        assert_eq!(
            read_secret("token_file", &empty).unwrap_err(),
            format!("token_file {}: the file is empty", empty.display())
        );
        let missing = dir.path().join("missing");
        assert_eq!(
            read_secret("token_file", &missing).unwrap_err(),
            format!("token_file {}: no such file", missing.display())
        );
        let mut value = Some("inline".to_owned());
        assert_eq!(
            secret_from_file("token", &mut value, Some(&owner)).unwrap_err(),
            "token and token_file are both given: give the secret one way"
        );
        let mut value = None;
        secret_from_file("token", &mut value, Some(&owner)).unwrap();
        assert_eq!(value.as_deref(), Some("s3cret"));
    }
}
