//! Builds as teams bring them, read as `argus run --app-file` will: an
//! `.app` (XML and binary `Info.plist`, as a folder and zipped), an `.apk`
//! made by Android's own `aapt`, and every build that cannot go on a
//! simulator or emulator refused with its file and field named. What the
//! identities are is checked against the system's own `sha256sum` and
//! `tar`.

use std::path::{Path, PathBuf};
use std::process::Command;

use argus_builds::{BuildError, Platform, inspect};

const INFO: &str = r#"{"CFBundleIdentifier": "com.example.shop", "CFBundleShortVersionString": "4.2.0",
 "CFBundleVersion": "4207", "CFBundleSupportedPlatforms": ["iPhoneSimulator"], "MinimumOSVersion": "16.0",
 "CFBundleExecutable": "Shop", "UIDeviceFamily": [1, 2], "LSRequiresIPhoneOS": true}"#;

/// Writes `info` (JSON) as an Info.plist in `format` (`xml` or `binary`)
/// with Python's plistlib, as Xcode's tools write them.
fn write_plist(path: &Path, info: &str, format: &str) {
    let script = "import json, plistlib, sys\nfmt = plistlib.FMT_BINARY if sys.argv[2] == 'binary' else plistlib.FMT_XML\n\
         open(sys.argv[1], 'wb').write(plistlib.dumps(json.loads(sys.argv[3]), fmt=fmt))";
    let status = Command::new("python3").args(["-c", script]).arg(path).args([format, info]).status().unwrap();
    assert!(status.success(), "python3 could not write {}", path.display());
}

/// A simulator `.app`: its Info.plist, an executable, the app model, and a
/// link inside it.
fn app(root: &Path, name: &str, info: &str, format: &str) -> PathBuf {
    let app = root.join(name);
    std::fs::create_dir_all(app.join("Frameworks")).unwrap();
    write_plist(&app.join("Info.plist"), info, format);
    std::fs::write(app.join("Shop"), b"\xcf\xfa\xed\xfe not really mach-o").unwrap();
    set_executable(&app.join("Shop"));
    std::fs::write(app.join("app.yaml"), "name: Shop\n").unwrap();
    std::os::unix::fs::symlink("../app.yaml", app.join("Frameworks/model.yaml")).unwrap();
    app
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Zips `dir` (its own name first in each entry) with the system's zip
/// semantics kept: links as links (`-y`).
fn zip_dir(dir: &Path, out: &Path, inside: &str) {
    let parent = dir.parent().unwrap();
    let status = Command::new("python3")
        .args(["-c", ZIP_SCRIPT])
        .arg(out)
        .arg(parent)
        .arg(dir.file_name().unwrap())
        .arg(inside)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Python's zipfile, keeping links and modes as `zip -y` does.
const ZIP_SCRIPT: &str = r#"
import os, stat, sys, zipfile
out, parent, name, inside = sys.argv[1:5]
with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
    for root, dirs, files in os.walk(os.path.join(parent, name)):
        for f in dirs + files:
            full = os.path.join(root, f)
            arc = os.path.join(inside, os.path.relpath(full, parent))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                info = zipfile.ZipInfo(arc)
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                z.write(full, arc)
"#;

#[test]
fn an_app_is_read_from_its_info_plist_xml_or_binary_folder_or_zip_with_one_identity() {
    let dir = tempfile::tempdir().unwrap();
    let xml = app(&dir.path().join("xml"), "Shop.app", INFO, "xml");
    let build = inspect(&xml, None).unwrap();
    assert_eq!(build.platform, Platform::Ios);
    assert_eq!(
        (build.bundle_id.as_str(), build.version.as_str(), build.build_number.as_str()),
        ("com.example.shop", "4.2.0", "4207")
    );
    assert_eq!(build.min_os.as_deref(), Some("16.0"));
    assert!(
        build.summary().starts_with(&format!("ios sha256:{} com.example.shop 4.2.0 (4207) ", &build.sha256[..7])),
        "{}",
        build.summary()
    );

    let binary = app(&dir.path().join("binary"), "Shop.app", INFO, "binary");
    let from_binary = inspect(&binary, Some(Platform::Ios)).unwrap();
    assert_eq!((from_binary.bundle_id.as_str(), from_binary.build_number.as_str()), ("com.example.shop", "4207"));

    // The same bundle zipped (at the top, or under Payload/) is the same build.
    let same = app(&dir.path().join("again"), "Shop.app", INFO, "xml");
    for inside in ["", "Payload"] {
        let zipped = dir.path().join(format!("shop{inside}.zip"));
        zip_dir(&same, &zipped, inside);
        let from_zip = inspect(&zipped, None).unwrap();
        assert_eq!(from_zip.sha256, build.sha256, "zipped under {inside:?}: one bundle, one identity");
        assert_eq!(from_zip.size, build.size);
    }
    // A byte changed is another build.
    std::fs::write(same.join("app.yaml"), "name: Shop 2\n").unwrap();
    assert_ne!(inspect(&same, None).unwrap().sha256, build.sha256);
}

#[test]
fn the_canonical_archive_is_a_tar_the_system_reads_with_times_and_owners_zeroed() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), "Shop.app", INFO, "xml");
    let tar_path = dir.path().join("shop.tar");
    let file = argus_builds::canonical::write_dir(&app, std::fs::File::create(&tar_path).unwrap()).unwrap();
    drop(file);
    let listing = Command::new("tar")
        .args(["--list", "--verbose", "--numeric-owner", "--utc", "-f"])
        .arg(&tar_path)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    let lines: Vec<&str> = listing.lines().collect();
    let names: Vec<&str> = lines.iter().map(|l| l.split_whitespace().nth(5).unwrap_or_default()).collect();
    assert_eq!(
        names,
        ["Shop.app/Frameworks/model.yaml", "Shop.app/Info.plist", "Shop.app/Shop", "Shop.app/app.yaml"],
        "{listing}"
    );
    assert!(lines.iter().all(|l| l.contains(" 0/0 ") && l.contains("1970-01-01 00:00")), "{listing}");
    assert!(lines[0].starts_with("lrwxr-xr-x") && lines[0].ends_with("-> ../app.yaml"), "{listing}");
    assert!(lines[2].starts_with("-rwxr-xr-x") && lines[3].starts_with("-rw-r--r--"), "{listing}");
    // Its identity is the sha256 of those bytes, as sha256sum says.
    let sum = Command::new("sha256sum").arg(&tar_path).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap().to_owned();
    assert_eq!(inspect(&app, None).unwrap().sha256, sum);
}

#[test]
fn builds_that_cannot_go_on_a_simulator_are_refused_naming_the_file_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let device = app(dir.path(), "Device.app", &INFO.replace("iPhoneSimulator", "iPhoneOS"), "xml");
    let error = inspect(&device, None).unwrap_err();
    assert!(matches!(error, BuildError::DeviceBuild { .. }), "{error}");
    assert!(error.to_string().contains("Device.app: a device build (CFBundleSupportedPlatforms: iPhoneOS)"), "{error}");

    let unversioned = app(dir.path(), "Bare.app", &INFO.replace(r#""CFBundleVersion": "4207", "#, ""), "binary");
    let error = inspect(&unversioned, None).unwrap_err().to_string();
    assert!(error.ends_with("Bare.app: CFBundleVersion is missing from Info.plist"), "{error}");

    for (name, says) in
        [("Shop.ipa", "an .ipa is a device build"), ("shop.aab", "bundletool build-apks --mode=universal")]
    {
        let path = dir.path().join(name);
        std::fs::write(&path, b"PK").unwrap();
        let error = inspect(&path, None).unwrap_err().to_string();
        assert!(error.contains(name) && error.contains(says), "{error}");
    }
    let said = inspect(&device, Some(Platform::Android)).unwrap_err().to_string();
    assert!(said.ends_with("Device.app: named as android but it is an ios build"), "{said}");
    let missing = inspect(&dir.path().join("nowhere.apk"), None).unwrap_err().to_string();
    assert!(missing.contains("nowhere.apk: No such file"), "{missing}");
}

#[test]
fn an_archive_that_climbs_out_or_holds_two_apps_or_a_link_out_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let write_zip = |name: &str, entries: &[(&str, &str)]| {
        let path = dir.path().join(name);
        let script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nfor i in range(2, len(sys.argv), 2): z.writestr(sys.argv[i], sys.argv[i + 1])\nz.close()";
        let mut command = Command::new("python3");
        command.args(["-c", script]).arg(&path);
        for (entry, body) in entries {
            command.args([entry, body]);
        }
        assert!(command.status().unwrap().success());
        path
    };
    let climbs = write_zip("climbs.zip", &[("Shop.app/Info.plist", "x"), ("Shop.app/../../etc/passwd", "x")]);
    let error = inspect(&climbs, None).unwrap_err().to_string();
    assert!(error.contains("climbs.zip: the entry \"Shop.app/../../etc/passwd\" climbs out of the archive"), "{error}");
    let two = write_zip("two.zip", &[("A.app/Info.plist", "x"), ("B.app/Info.plist", "x")]);
    let error = inspect(&two, None).unwrap_err().to_string();
    assert!(error.contains("the zip holds 2 .app bundles (A.app/, B.app/)"), "{error}");
    let none = write_zip("none.zip", &[("readme.txt", "x")]);
    assert!(inspect(&none, None).unwrap_err().to_string().contains("the zip holds no .app"));

    let out = app(dir.path(), "Out.app", INFO, "xml");
    std::os::unix::fs::symlink("../../secrets", out.join("Frameworks/leak")).unwrap();
    let error = inspect(&out, None).unwrap_err().to_string();
    assert!(error.contains("Frameworks/leak links to ../../secrets, outside the bundle"), "{error}");
}

/// An APK as Android's `aapt` packages one, from a manifest, the app model
/// and (with `abi`) a native library.
fn apk(dir: &Path, manifest: &str, abi: Option<&str>) -> PathBuf {
    const FRAMEWORK: &str = "/usr/share/android-framework-res/framework-res.apk";
    assert!(
        Path::new(FRAMEWORK).exists() && Command::new("aapt").arg("version").output().is_ok(),
        "these tests need Android's aapt and framework resources (Debian: apt-get install aapt android-framework-res; .ci/run installs them)"
    );
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("AndroidManifest.xml"), manifest).unwrap();
    std::fs::write(dir.join("assets/app.yaml"), "name: Shop\n").unwrap();
    let out = dir.join("shop.apk");
    let made = Command::new("aapt")
        .args(["package", "-f", "-M"])
        .arg(dir.join("AndroidManifest.xml"))
        .arg("-A")
        .arg(dir.join("assets"))
        .args(["-I", FRAMEWORK, "-F"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "aapt: {}", String::from_utf8_lossy(&made.stderr));
    if let Some(abi) = abi {
        std::fs::create_dir_all(dir.join(format!("lib/{abi}"))).unwrap();
        std::fs::write(dir.join(format!("lib/{abi}/libshop.so")), b"\x7fELF").unwrap();
        let added = Command::new("aapt")
            .current_dir(dir)
            .args(["add", "shop.apk", &format!("lib/{abi}/libshop.so")])
            .output()
            .unwrap();
        assert!(added.status.success(), "aapt add: {}", String::from_utf8_lossy(&added.stderr));
    }
    out
}

const MANIFEST: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android"
    package="com.example.shop" android:versionCode="4207" android:versionName="4.2.0">
  <uses-sdk android:minSdkVersion="24" android:targetSdkVersion="34"/>
  <application android:label="Shop">
    <activity android:name=".Settings"/>
    <activity android:name=".Main" android:exported="true">
      <intent-filter>
        <action android:name="android.intent.action.MAIN"/>
        <category android:name="android.intent.category.LAUNCHER"/>
      </intent-filter>
    </activity>
  </application>
</manifest>
"#;

#[test]
#[cfg_attr(not(argus_android), ignore = "needs Android's aapt (ARGUS_TEST_ANDROID=1; .ci/run installs it)")]
fn an_apk_made_by_aapt_is_read_from_its_binary_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let path = apk(dir.path(), MANIFEST, Some("x86_64"));
    let build = inspect(&path, None).unwrap();
    assert_eq!(build.platform, Platform::Android);
    assert_eq!(
        (build.bundle_id.as_str(), build.version.as_str(), build.build_number.as_str()),
        ("com.example.shop", "4.2.0", "4207")
    );
    assert_eq!(build.min_os.as_deref(), Some("24"));
    assert_eq!(build.launch.as_deref(), Some("com.example.shop/.Main"), "the launcher, not the first activity");
    assert_eq!(build.abis, ["x86_64"]);
    // What aapt itself reads from it agrees.
    let badging = Command::new("aapt").args(["dump", "badging"]).arg(&path).output().unwrap();
    let badging = String::from_utf8_lossy(&badging.stdout).into_owned();
    assert!(badging.contains("package: name='com.example.shop' versionCode='4207' versionName='4.2.0'"), "{badging}");
    assert!(badging.contains("launchable-activity: name='com.example.shop.Main'"), "{badging}");
    // An APK's identity is its file's sha256.
    let sum = Command::new("sha256sum").arg(&path).output().unwrap();
    assert!(String::from_utf8_lossy(&sum.stdout).starts_with(&build.sha256));
    assert_eq!(build.size, std::fs::metadata(&path).unwrap().len());

    let unversioned = apk(&dir.path().join("bare"), &MANIFEST.replace(r#" android:versionCode="4207""#, ""), None);
    let error = inspect(&unversioned, None).unwrap_err().to_string();
    assert!(error.ends_with("shop.apk: versionCode is missing from AndroidManifest.xml"), "{error}");
    let not_zip = dir.path().join("broken.apk");
    std::fs::write(&not_zip, b"not a zip at all").unwrap();
    let error = inspect(&not_zip, None).unwrap_err().to_string();
    assert!(error.contains("broken.apk: not a readable APK (zip)"), "{error}");
}
