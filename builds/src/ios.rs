//! An `.app` built for the simulator, as a directory or a `.zip` holding
//! exactly one: its `Info.plist`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::plist::{self, Value};
use crate::{Build, BuildError, Platform, canonical};

const INFO: &str = "Info.plist";

pub(crate) fn inspect_dir(path: &Path) -> Result<Build, BuildError> {
    let plist_path = path.join(INFO);
    let bytes = std::fs::read(&plist_path).map_err(|_| BuildError::Missing {
        path: path.into(),
        within: "the .app",
        field: INFO,
    })?;
    let (sha256, size) = canonical::dir_digest(path)?;
    from_info(path, &bytes, sha256, size)
}

pub(crate) fn inspect_zip(path: &Path) -> Result<Build, BuildError> {
    let file = std::fs::File::open(path).map_err(|source| BuildError::Io { path: path.into(), source })?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| BuildError::BadArchive { path: path.into(), why: format!("not a readable zip: {e}") })?;
    let bundle = canonical::bundle_in_zip(path, &zip)?;
    let mut bytes = Vec::new();
    zip.by_name(&format!("{bundle}{INFO}"))
        .map_err(|_| BuildError::Missing { path: path.into(), within: "the .app", field: INFO })?
        .read_to_end(&mut bytes)
        .map_err(|e| BuildError::Unreadable { path: path.into(), within: INFO.into(), why: e.to_string() })?;
    let (sha256, size) = canonical::zip_digest(path, &mut zip, &bundle)?;
    from_info(path, &bytes, sha256, size)
}

fn from_info(path: &Path, bytes: &[u8], sha256: String, size: u64) -> Result<Build, BuildError> {
    let unreadable = |why: String| BuildError::Unreadable { path: path.into(), within: INFO.into(), why };
    let info = plist::parse(bytes).map_err(unreadable)?;
    let info: &BTreeMap<String, Value> =
        info.as_dict().ok_or_else(|| unreadable("its top value is not a dictionary".into()))?;
    let text = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_owned).filter(|s| !s.is_empty());
    let missing = |field| BuildError::Missing { path: path.into(), within: INFO, field };
    let platforms: Vec<&str> = info
        .get("CFBundleSupportedPlatforms")
        .and_then(Value::as_array)
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if platforms.is_empty() {
        return Err(missing("CFBundleSupportedPlatforms"));
    }
    if !platforms.contains(&"iPhoneSimulator") {
        return Err(BuildError::DeviceBuild { path: path.into(), platforms: platforms.join(", ") });
    }
    Ok(Build {
        platform: Platform::Ios,
        file: path.into(),
        sha256,
        size,
        bundle_id: text("CFBundleIdentifier").ok_or_else(|| missing("CFBundleIdentifier"))?,
        version: text("CFBundleShortVersionString").ok_or_else(|| missing("CFBundleShortVersionString"))?,
        build_number: text("CFBundleVersion").ok_or_else(|| missing("CFBundleVersion"))?,
        min_os: text("MinimumOSVersion"),
        launch: None,
        abis: Vec::new(),
    })
}
