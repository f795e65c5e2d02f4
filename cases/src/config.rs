//! The project's case configuration: the `cases` section of
//! `lynkeus.config.json`, with `LYNKEUS_CONFIG` naming a second file read
//! over the first (paths under its `cases` are relative to it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::CaseError;

pub const CONFIG_FILE: &str = "lynkeus.config.json";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FixturesConfig {
    /// Run with `sh -c`, once per run.
    pub command: String,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "default_fixture_timeout")]
    pub timeout_ms: u64,
}

fn default_fixture_timeout() -> u64 {
    120_000
}

/// An interruption: when `see` is on screen, run `do` (unless `unless`
/// matches the step's value).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Interruption {
    pub see: String,
    #[serde(rename = "do")]
    pub steps: Value,
    #[serde(default)]
    pub unless: Option<String>,
}

/// The `cases` section, its paths resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesConfig {
    /// Where case files are found when none are named.
    pub dir: PathBuf,
    pub flows: PathBuf,
    /// Where `exec` runs and fixtures start (the project root by default).
    pub base: PathBuf,
    pub fixtures: Option<FixturesConfig>,
    /// The fixture `assert` asks.
    pub inspect: String,
    /// `param → field`: `user: u` becomes `user_id: <u.user_id>`.
    pub refs: BTreeMap<String, String>,
    pub macros: Map<String, Value>,
    pub interruptions: Vec<Interruption>,
    /// Where `load` looked for a configuration file and found none.
    pub not_found: Option<PathBuf>,
}

impl CasesConfig {
    /// The defaults for a project rooted at `root`.
    pub fn defaults(root: &Path) -> Self {
        Self {
            dir: root.join("cases"),
            flows: root.join("flows"),
            base: root.to_owned(),
            fixtures: None,
            inspect: "inspect".into(),
            refs: BTreeMap::new(),
            macros: Map::new(),
            interruptions: Vec::new(),
            not_found: None,
        }
    }

    /// Reads `root/lynkeus.config.json` if there is one, then the file
    /// `LYNKEUS_CONFIG` names (from `env`), each over the last.
    pub fn load(root: &Path, lynkeus_config: Option<&str>) -> Result<Self, CaseError> {
        let mut config = Self::defaults(root);
        let main = root.join(CONFIG_FILE);
        if main.exists() {
            config.read_over(&main)?;
        } else if lynkeus_config.is_none_or(str::is_empty) {
            config.not_found = Some(main);
        }
        if let Some(path) = lynkeus_config.filter(|p| !p.is_empty()) {
            let path = root.join(path);
            if !path.exists() {
                return Err(CaseError::new(
                    path.display().to_string(),
                    None,
                    "LYNKEUS_CONFIG names a file that does not exist",
                ));
            }
            config.read_over(&path)?;
        }
        Ok(config)
    }

    fn read_over(&mut self, path: &Path) -> Result<(), CaseError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| CaseError::new(&shown, None, e.to_string()))?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| CaseError::new(&shown, Some(e.line()), format!("not JSON: {e}")))?;
        let Some(cases) = value.get("cases") else { return Ok(()) };
        self.apply(cases, path.parent().unwrap_or(Path::new(".")), &shown)
    }

    /// For a message about something the configuration would declare: where
    /// it was looked for when none was found (empty otherwise).
    pub fn not_found_hint(&self) -> String {
        match &self.not_found {
            Some(path) => format!(
                "; no configuration was read: there is no {} (lynkeus reads {CONFIG_FILE} in the directory it runs from, or the file LYNKEUS_CONFIG names)",
                path.display()
            ),
            None => String::new(),
        }
    }

    /// The `cases` section as JSON (as a run carries it to the grid), its
    /// paths relative to `root`.
    pub fn from_json(cases: &Value, root: &Path) -> Result<Self, CaseError> {
        let mut config = Self::defaults(root);
        if !cases.is_null() {
            config.apply(cases, root, "the run's case configuration")?;
        }
        Ok(config)
    }

    /// The `cases` section of the configuration file this project uses, as
    /// JSON, or `{}`.
    pub fn section_json(root: &Path, lynkeus_config: Option<&str>) -> Result<Value, CaseError> {
        let mut section = serde_json::Map::new();
        let mut files = vec![root.join(CONFIG_FILE)];
        files.extend(lynkeus_config.filter(|p| !p.is_empty()).map(|p| root.join(p)));
        for path in files.into_iter().filter(|p| p.exists()) {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| CaseError::new(&shown, None, e.to_string()))?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| CaseError::new(&shown, Some(e.line()), format!("not JSON: {e}")))?;
            if let Some(Value::Object(cases)) = value.get("cases") {
                section.extend(cases.clone());
            }
        }
        Ok(Value::Object(section))
    }

    fn apply(&mut self, cases: &Value, dir: &Path, shown: &str) -> Result<(), CaseError> {
        let shown = shown.to_owned();
        let Value::Object(cases) = cases else {
            return Err(CaseError::new(&shown, None, "`cases` must be an object"));
        };
        let bad = |key: &str, e: serde_json::Error| CaseError::new(&shown, None, format!("cases.{key}: {e}"));
        for (key, value) in cases {
            match key.as_str() {
                "dir" => self.dir = dir.join(string(value, key, &shown)?),
                "flows" => self.flows = dir.join(string(value, key, &shown)?),
                "base" => self.base = dir.join(string(value, key, &shown)?),
                "inspect" => self.inspect = string(value, key, &shown)?,
                "fixtures" => {
                    let mut fixtures: FixturesConfig =
                        serde_json::from_value(value.clone()).map_err(|e| bad(key, e))?;
                    fixtures.cwd = Some(dir.join(fixtures.cwd.unwrap_or_default()));
                    self.fixtures = Some(fixtures);
                }
                "refs" => self.refs = serde_json::from_value(value.clone()).map_err(|e| bad(key, e))?,
                "macros" => {
                    self.macros = serde_json::from_value(value.clone()).map_err(|e| bad(key, e))?;
                }
                "interruptions" => {
                    self.interruptions = serde_json::from_value(value.clone()).map_err(|e| bad(key, e))?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn string(value: &Value, key: &str, file: &str) -> Result<String, CaseError> {
    value.as_str().map(str::to_owned).ok_or_else(|| CaseError::new(file, None, format!("cases.{key} must be a string")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_the_file_then_lynkeus_config() {
        let root = std::env::temp_dir().join(format!("argus-config-{}", std::process::id()));
        std::fs::create_dir_all(root.join("ci")).unwrap();
        std::fs::write(
            root.join(CONFIG_FILE),
            r#"{"cases":{"dir":"cases","flows":"flows","fixtures":{"command":"node cases/fixtures.mjs"},"inspect":"inspect","refs":{"user":"user_id"},"macros":{}}}"#,
        )
        .unwrap();
        std::fs::write(root.join("ci/override.json"), r#"{"cases":{"dir":"suite","inspect":"look"}}"#).unwrap();
        let config = CasesConfig::load(&root.join("ci"), None).unwrap();
        assert_eq!(
            config.not_found_hint(),
            format!(
                "; no configuration was read: there is no {} (lynkeus reads lynkeus.config.json in the directory it runs from, or the file LYNKEUS_CONFIG names)",
                root.join("ci").join(CONFIG_FILE).display()
            )
        );
        let config = CasesConfig::load(&root, None).unwrap();
        assert_eq!(config.not_found_hint(), "", "a file was read");
        assert_eq!(config.dir, root.join("cases"));
        assert_eq!(config.fixtures.as_ref().unwrap().command, "node cases/fixtures.mjs");
        assert_eq!(config.fixtures.as_ref().unwrap().timeout_ms, 120_000);
        assert_eq!(config.refs.get("user").map(String::as_str), Some("user_id"));
        let config = CasesConfig::load(&root, Some("ci/override.json")).unwrap();
        assert_eq!(config.dir, root.join("ci/suite"), "relative to the second file");
        assert_eq!(config.inspect, "look");
        assert_eq!(config.refs.get("user").map(String::as_str), Some("user_id"), "the first file still counts");
        let err = CasesConfig::load(&root, Some("ci/missing.json")).unwrap_err();
        assert!(err.to_string().contains("LYNKEUS_CONFIG names a file that does not exist"));
        std::fs::write(root.join(CONFIG_FILE), "{\n\"cases\": {\"refs\": 3}}").unwrap();
        let err = CasesConfig::load(&root, None).unwrap_err().to_string();
        assert!(err.contains("cases.refs"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
