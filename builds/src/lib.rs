//! A run's own app build, read before anything is scheduled: which
//! platform it is for, which app (bundle id or package), its version and
//! build number, what it needs of a device, and its identity, the sha256
//! of its content ([`canonical`]).
//!
//! - iOS: an `.app` directory built for the simulator, or a `.zip` holding
//!   exactly one; its `Info.plist`, binary or XML ([`plist`]).
//! - Android: an `.apk`; its binary `AndroidManifest.xml` ([`axml`]).
//!
//! What cannot be installed on a simulator or emulator (an `.ipa`, a
//! device-only `.app`, an `.aab`) is refused here, naming the file and
//! what to build instead.

mod android;
pub mod axml;
pub mod canonical;
mod error;
mod ios;
pub mod plist;

use std::path::{Path, PathBuf};

pub use error::BuildError;

/// What a build runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    Ios,
    Android,
}

impl Platform {
    /// As selectors and devices spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Ios => "ios",
            Platform::Android => "android",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "ios" => Some(Platform::Ios),
            "android" => Some(Platform::Android),
            _ => None,
        }
    }
}

/// A build as read from its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub platform: Platform,
    /// The file it was read from.
    pub file: PathBuf,
    /// Lower-case hex: of the `.apk`; of the canonical archive of the `.app`.
    pub sha256: String,
    /// The bytes that travel: the `.apk`, or the canonical archive.
    pub size: u64,
    /// iOS `CFBundleIdentifier`; Android `package`.
    pub bundle_id: String,
    /// iOS `CFBundleShortVersionString`; Android `versionName`.
    pub version: String,
    /// iOS `CFBundleVersion`; Android `versionCode`.
    pub build_number: String,
    /// iOS `MinimumOSVersion`; Android `minSdkVersion`.
    pub min_os: Option<String>,
    /// Android: the activity a launcher starts (`package/.Activity` as
    /// `am start -n` takes it); iOS: `None` (the bundle id launches it).
    pub launch: Option<String>,
    /// Android: the native ABIs it carries code for (`lib/<abi>/`); empty
    /// for an app without native code, which runs on any.
    pub abis: Vec<String>,
}

impl Build {
    /// `ios sha256:3f2a91c com.example.shop 4.2.0 (4207) 112 MB`.
    pub fn summary(&self) -> String {
        format!(
            "{} sha256:{} {} {} ({}) {}",
            self.platform.as_str(),
            self.sha256.get(..7).unwrap_or(&self.sha256),
            self.bundle_id,
            self.version,
            self.build_number,
            human_size(self.size)
        )
    }
}

/// Reads the build at `path`. `said` is the platform the user named
/// (`ios=PATH`); otherwise it is told from the file.
pub fn inspect(path: &Path, said: Option<Platform>) -> Result<Build, BuildError> {
    let kind = Kind::of(path)?;
    let platform = kind.platform();
    if let Some(said) = said.filter(|s| *s != platform) {
        return Err(BuildError::OtherPlatform { path: path.into(), said, found: platform });
    }
    match kind {
        Kind::AppDir => ios::inspect_dir(path),
        Kind::AppZip => ios::inspect_zip(path),
        Kind::Apk => android::inspect_apk(path),
    }
}

/// Reads a build as it travels (as a coordinator received it): an `.apk`
/// as it is, an `.app` as its canonical tar ([`canonical::write_dir`]),
/// whatever the file is named. What it says is what the coordinator
/// keeps, not what the sender claimed.
pub fn inspect_received(path: &Path, platform: Platform) -> Result<Build, BuildError> {
    match platform {
        Platform::Android => android::inspect_apk(path),
        Platform::Ios => ios::inspect_tar(path),
    }
}

/// What a file is, from its name and (for a directory) its kind.
enum Kind {
    AppDir,
    AppZip,
    Apk,
}

impl Kind {
    fn of(path: &Path) -> Result<Self, BuildError> {
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        let extension = name.rsplit_once('.').map(|(_, e)| e.to_owned()).unwrap_or_default();
        let meta = std::fs::metadata(path).map_err(|source| BuildError::Io { path: path.into(), source })?;
        match extension.as_str() {
            "app" if meta.is_dir() => Ok(Kind::AppDir),
            "app" => Err(BuildError::NotABuild { path: path.into(), why: "an .app is a directory".into() }),
            "zip" => Ok(Kind::AppZip),
            "apk" => Ok(Kind::Apk),
            "ipa" => Err(BuildError::Ipa { path: path.into() }),
            "aab" => Err(BuildError::Aab { path: path.into() }),
            _ => Err(BuildError::NotABuild {
                path: path.into(),
                why: "neither an .app directory, a .zip holding one, nor an .apk".into(),
            }),
        }
    }

    fn platform(&self) -> Platform {
        match self {
            Kind::AppDir | Kind::AppZip => Platform::Ios,
            Kind::Apk => Platform::Android,
        }
    }
}

/// A sha256 as builds are named: 64 lower-case hex digits. Anything else
/// never becomes a path or a query.
pub fn check_sha256(sha256: &str) -> Result<(), String> {
    let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex { Ok(()) } else { Err(format!("{sha256:?} is not a sha256 (64 lower-case hex digits)")) }
}

/// `112 MB`, `930 KB`, `512 B` (powers of 1000, as people read sizes).
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{} MB", (b as f64 / 1e6).round()),
        b if b >= 1_000 => format!("{} KB", (b as f64 / 1e3).round()),
        b => format!("{b} B"),
    }
}
