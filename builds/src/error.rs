use std::path::PathBuf;

use crate::Platform;

/// Why a build cannot be taken; each names the file and what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not an app build: {why}", path.display())]
    NotABuild { path: PathBuf, why: String },
    #[error("{}: an .ipa is a device build; simulators install an .app built for the simulator (xcodebuild -sdk iphonesimulator), as a directory or a .zip holding it", path.display())]
    Ipa { path: PathBuf },
    #[error("{}: an .aab is not installable; make a universal APK: bundletool build-apks --mode=universal --bundle {} --output app.apks, then unzip universal.apk", path.display(), path.display())]
    Aab { path: PathBuf },
    #[error("{}: a device build (CFBundleSupportedPlatforms: {platforms}); simulators need one built for iPhoneSimulator (xcodebuild -sdk iphonesimulator)", path.display())]
    DeviceBuild { path: PathBuf, platforms: String },
    #[error("{}: {field} is missing from {within}", path.display())]
    Missing { path: PathBuf, within: &'static str, field: &'static str },
    #[error("{}: cannot read {within}: {why}", path.display())]
    Unreadable { path: PathBuf, within: String, why: String },
    #[error("{}: {why}", path.display())]
    BadArchive { path: PathBuf, why: String },
    #[error("{}: named as {} but it is an {} build", path.display(), said.as_str(), found.as_str())]
    OtherPlatform { path: PathBuf, said: Platform, found: Platform },
}
