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

/// An `.app` as its canonical tar: every entry under one bundle folder,
/// none climbing out, links staying inside; its Info.plist read.
pub(crate) fn inspect_tar(path: &Path) -> Result<Build, BuildError> {
    let io = |source| BuildError::Io { path: path.into(), source };
    let bad = |why: String| BuildError::BadArchive { path: path.into(), why };
    let mut archive = tar::Archive::new(std::fs::File::open(path).map_err(io)?);
    let mut bundle: Option<String> = None;
    let mut info = None;
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let name = entry
            .path()
            .map_err(io)?
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| bad("a name that is not UTF-8".into()))?;
        let (top, relative) =
            name.split_once('/').ok_or_else(|| bad(format!("the entry {name:?} is outside a bundle")))?;
        if !top.ends_with(".app") || relative.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(bad(format!("the entry {name:?} climbs out of the bundle")));
        }
        match &bundle {
            Some(first) if first != top => return Err(bad(format!("it holds two bundles ({first}, {top})"))),
            None => bundle = Some(top.to_owned()),
            _ => {}
        }
        match entry.header().entry_type() {
            tar::EntryType::Symlink => {
                let target =
                    entry.link_name().map_err(io)?.map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
                canonical::check_link(path, relative, &target)?;
            }
            tar::EntryType::Regular if relative == INFO => {
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).map_err(io)?;
                info = Some(bytes);
            }
            tar::EntryType::Regular => {}
            other => return Err(bad(format!("the entry {name:?} is a {other:?}, neither a file nor a link"))),
        }
    }
    let info = info.ok_or(BuildError::Missing { path: path.into(), within: "the .app", field: INFO })?;
    let (sha256, size) = canonical::file_digest(path)?;
    from_info(path, &info, sha256, size)
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
