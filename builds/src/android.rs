//! An `.apk`: its manifest's package, versions, minimum SDK and launcher
//! activity, and the native ABIs it carries code for.

use std::io::Read;
use std::path::Path;

use crate::axml::{self, Element};
use crate::{Build, BuildError, Platform, canonical};

const MANIFEST: &str = "AndroidManifest.xml";

pub(crate) fn inspect_apk(path: &Path) -> Result<Build, BuildError> {
    let file = std::fs::File::open(path).map_err(|source| BuildError::Io { path: path.into(), source })?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| BuildError::BadArchive { path: path.into(), why: format!("not a readable APK (zip): {e}") })?;
    let mut bytes = Vec::new();
    zip.by_name(MANIFEST)
        .map_err(|_| BuildError::Missing { path: path.into(), within: "the APK", field: MANIFEST })?
        .read_to_end(&mut bytes)
        .map_err(|e| BuildError::Unreadable { path: path.into(), within: MANIFEST.into(), why: e.to_string() })?;
    let manifest = axml::parse(&bytes).map_err(|why| BuildError::Unreadable {
        path: path.into(),
        within: MANIFEST.into(),
        why,
    })?;
    if manifest.name != "manifest" {
        return Err(BuildError::Unreadable {
            path: path.into(),
            within: MANIFEST.into(),
            why: format!("its root is <{}>, not <manifest>", manifest.name),
        });
    }
    let text = |element: &Element, name: &str| element.attribute(name).map(|a| a.text()).filter(|t| !t.is_empty());
    let missing = |field| BuildError::Missing { path: path.into(), within: MANIFEST, field };
    let package = text(&manifest, "package").ok_or_else(|| missing("package"))?;
    let (sha256, size) = canonical::file_digest(path)?;
    let mut abis: Vec<String> = (0..zip.len())
        .filter_map(|i| zip.name_for_index(i).map(str::to_owned))
        .filter_map(|name| Some(name.strip_prefix("lib/")?.split_once('/')?.0.to_owned()))
        .collect();
    abis.sort();
    abis.dedup();
    Ok(Build {
        platform: Platform::Android,
        file: path.into(),
        sha256,
        size,
        version: text(&manifest, "versionName").ok_or_else(|| missing("versionName"))?,
        build_number: text(&manifest, "versionCode").ok_or_else(|| missing("versionCode"))?,
        min_os: manifest.descendants("uses-sdk").find_map(|sdk| text(sdk, "minSdkVersion")),
        launch: launcher(&manifest, &package),
        bundle_id: package,
        abis,
    })
}

/// The activity (or alias) whose intent filter has action MAIN and category
/// LAUNCHER, as `package/.Activity` or `package/full.Name`.
fn launcher(manifest: &Element, package: &str) -> Option<String> {
    let activities = manifest.descendants("activity").chain(manifest.descendants("activity-alias"));
    let launches = |activity: &&Element| {
        activity.descendants("intent-filter").any(|filter| {
            let has = |tag, value| {
                filter.descendants(tag).any(|e| e.attribute("name").map(|a| a.text()).as_deref() == Some(value))
            };
            has("action", "android.intent.action.MAIN") && has("category", "android.intent.category.LAUNCHER")
        })
    };
    let name = activities.filter(launches).find_map(|a| a.attribute("name").map(|n| n.text()))?;
    Some(if name.starts_with('.') || name.contains('.') {
        format!("{package}/{name}")
    } else {
        format!("{package}/.{name}")
    })
}
