//! `argus builds` against a real coordinator process: a build read here,
//! sent once (an unchanged build sends nothing), the same bundle zipped or
//! not one build, an upload cut short resumed, and bytes that are not what
//! they claim refused with nothing kept.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use argus_proto::grpc::{self, builds_client::BuildsClient};
use common::*;

const FRAMEWORK: &str = "/usr/share/android-framework-res/framework-res.apk";

const MANIFEST: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android"
    package="com.example.shop" android:versionCode="4207" android:versionName="4.2.0">
  <uses-sdk android:minSdkVersion="24"/>
  <application android:label="Shop">
    <activity android:name=".Main" android:exported="true">
      <intent-filter>
        <action android:name="android.intent.action.MAIN"/>
        <category android:name="android.intent.category.LAUNCHER"/>
      </intent-filter>
    </activity>
  </application>
</manifest>
"#;

/// An APK made by Android's aapt, its model padded to `size` bytes of
/// assets (so that an upload takes several pieces).
fn apk(dir: &Path, size: usize) -> PathBuf {
    assert!(
        Path::new(FRAMEWORK).exists(),
        "these tests need Android's aapt and framework resources (Debian: aapt android-framework-res; .ci/run installs them)"
    );
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("AndroidManifest.xml"), MANIFEST).unwrap();
    // Not compressible: the upload carries about `size` bytes.
    let noise: Vec<u8> = (0..size as u64).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(dir.join("assets/noise.bin"), noise).unwrap();
    let out = dir.join("shop.apk");
    let made = Command::new("aapt")
        .args(["package", "-f", "-0", "bin", "-M"])
        .arg(dir.join("AndroidManifest.xml"))
        .arg("-A")
        .arg(dir.join("assets"))
        .args(["-I", FRAMEWORK, "-F"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "aapt: {}", String::from_utf8_lossy(&made.stderr));
    out
}

/// A simulator `.app` with an XML Info.plist (Python's plistlib).
fn app(dir: &Path) -> PathBuf {
    let app = dir.join("Shop.app");
    std::fs::create_dir_all(&app).unwrap();
    let info = r#"{"CFBundleIdentifier": "com.example.shop", "CFBundleShortVersionString": "4.2.0", "CFBundleVersion": "4207", "CFBundleSupportedPlatforms": ["iPhoneSimulator"]}"#;
    let script = "import json, plistlib, sys\nopen(sys.argv[1], 'wb').write(plistlib.dumps(json.loads(sys.argv[2])))";
    let status = Command::new("python3").args(["-c", script]).arg(app.join("Info.plist")).arg(info).status().unwrap();
    assert!(status.success());
    std::fs::write(app.join("app.yaml"), "name: Shop\n").unwrap();
    app
}

fn argus(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(ARGUS).current_dir(dir).args(args).output().unwrap();
    (output.status.code(), text(&output))
}

#[test]
#[cfg_attr(not(argus_android), ignore = "needs Android's aapt (ARGUS_TEST_ANDROID=1; .ci/run installs it)")]
fn a_build_is_sent_once_and_an_unchanged_one_sends_nothing() {
    let dir = temp_dir("argus-builds");
    let (_coordinator, listen, http) = coordinator_on_free_ports(&dir, &[]);
    let url = format!("http://{listen}");
    let apk = apk(&dir.join("android"), 3 << 20);
    let apk = apk.to_str().unwrap();

    let (code, said) = argus(&dir, &["builds", "push", apk, "--coordinator", &url]);
    assert_eq!(code, Some(0), "{said}");
    let line = said.lines().find(|l| l.starts_with("build ")).unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.starts_with("build android sha256:") && line.contains(" com.example.shop 4.2.0 (4207) 3 MB: uploaded in "),
        "{line}"
    );
    let sha7 = line.split("sha256:").nth(1).unwrap()[..7].to_owned();
    let kept = std::fs::read_dir(dir.join("argus-builds/sha256")).unwrap().count();
    assert_eq!(kept, 1, "the build is kept under its sha256");

    let (code, again) = argus(&dir, &["builds", "push", &format!("android={apk}"), "--coordinator", &url]);
    assert_eq!(code, Some(0), "{again}");
    assert!(
        again.contains(&format!("sha256:{sha7} com.example.shop 4.2.0 (4207) 3 MB: already on the coordinator")),
        "{again}"
    );

    // An .app folder, then the same bundle zipped: one build.
    let app = app(&dir.join("ios"));
    let (code, folder) = argus(&dir, &["builds", "push", app.to_str().unwrap(), "--coordinator", &url]);
    assert_eq!(code, Some(0), "{folder}");
    assert!(folder.contains("build ios sha256:") && folder.contains(": uploaded in "), "{folder}");
    let zipped = dir.join("Shop.zip");
    let zip = "import os, sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nfor root, _, files in os.walk(sys.argv[2]):\n    for f in files:\n        full = os.path.join(root, f)\n        z.write(full, os.path.relpath(full, os.path.dirname(sys.argv[2])))\nz.close()";
    assert!(Command::new("python3").args(["-c", zip]).arg(&zipped).arg(&app).status().unwrap().success());
    let (code, from_zip) = argus(&dir, &["builds", "push", zipped.to_str().unwrap(), "--coordinator", &url]);
    assert_eq!(code, Some(0), "{from_zip}");
    assert!(from_zip.contains(": already on the coordinator"), "{from_zip}");

    let (code, listing) = argus(&dir, &["builds", "list", "--coordinator", &url]);
    assert_eq!(code, Some(0), "{listing}");
    let lines: Vec<&str> = listing.lines().filter(|l| l.contains("com.example.shop")).collect();
    assert_eq!(lines.len(), 2, "{listing}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("android") && l.contains(&format!("sha256:{sha7}")) && l.contains("4.2.0 (4207)")),
        "{listing}"
    );

    // The API lists them, and names one by its sha256.
    let (status, body) = http_get(&http, "/api/v1/builds");
    assert_eq!(status, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let builds = listed["builds"].as_array().unwrap();
    assert_eq!(builds.len(), 2, "{body}");
    let android = builds.iter().find(|b| b["platform"] == "android").unwrap();
    assert_eq!(
        (android["bundle_id"].as_str(), android["build_number"].as_str()),
        (Some("com.example.shop"), Some("4207"))
    );
    assert_eq!(android["launch"], "com.example.shop/.Main");
    let sha = android["sha256"].as_str().unwrap();
    assert!(sha.starts_with(&sha7));
    let (status, one) = http_get(&http, &format!("/api/v1/builds/{sha}"));
    assert_eq!(status, 200, "{one}");
    assert!(one.contains("\"version\":\"4.2.0\""), "{one}");
    assert_eq!(http_get(&http, &format!("/api/v1/builds/{}", "0".repeat(64))).0, 404);
    let (status, bad) = http_get(&http, "/api/v1/builds/..%2F..%2Fetc");
    assert_eq!(status, 400, "{bad}");
    assert!(bad.contains("is not a sha256"), "{bad}");

    // What no simulator installs is refused before anything is sent.
    let ipa = dir.join("Shop.ipa");
    std::fs::write(&ipa, b"PK").unwrap();
    let (code, refused) = argus(&dir, &["builds", "push", ipa.to_str().unwrap(), "--coordinator", &url]);
    assert_eq!(code, Some(2), "{refused}");
    assert!(refused.contains("Shop.ipa: an .ipa is a device build"), "{refused}");
}

#[test]
#[cfg_attr(not(argus_android), ignore = "needs Android's aapt (ARGUS_TEST_ANDROID=1; .ci/run installs it)")]
fn an_upload_cut_short_resumes_and_bytes_that_are_not_what_they_claim_are_refused() {
    let dir = temp_dir("argus-builds-resume");
    let (_coordinator, listen, _) = coordinator_on_free_ports(&dir, &[]);
    let url = format!("http://{listen}");
    let apk = apk(&dir.join("android"), 2 << 20);
    let build = argus_builds::inspect(&apk, None).unwrap();
    let bytes = std::fs::read(&apk).unwrap();
    let info = grpc::BuildInfo {
        sha256: build.sha256.clone(),
        platform: "android".into(),
        bundle_id: build.bundle_id.clone(),
        version: build.version.clone(),
        build_number: build.build_number.clone(),
        size: build.size,
        file_name: "shop.apk".into(),
        ..Default::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = BuildsClient::connect(url.clone()).await.unwrap();
        // Bytes that are not the build they claim to be: refused, nothing kept.
        let mut forged = bytes.clone();
        let last = forged.len() - 1;
        forged[last] ^= 0xff;
        let piece = grpc::BuildPiece { info: Some(info.clone()), offset: 0, data: forged };
        let refused = client.put(tokio_stream::iter([piece])).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused.message().contains("its bytes' sha256 is") && refused.message().ends_with("nothing was kept"),
            "{}",
            refused.message()
        );
        let list = client.list(grpc::ListBuildsRequest {}).await.unwrap().into_inner();
        assert!(list.builds.is_empty(), "{list:?}");
        // Half of it, and the stream ends: the coordinator keeps what came.
        let half = bytes.len() / 2;
        let piece = grpc::BuildPiece { info: Some(info.clone()), offset: 0, data: bytes[..half].to_vec() };
        let cut = client.put(tokio_stream::iter([piece])).await.unwrap_err();
        assert_eq!(cut.code(), tonic::Code::Aborted, "{cut:?}");
        assert!(
            cut.message()
                .contains(&format!("{half} of {} bytes received; send the rest from byte {half}", bytes.len())),
            "{}",
            cut.message()
        );
        let missing = client.missing(grpc::MissingBuildsRequest { sha256: vec![build.sha256.clone()] }).await.unwrap();
        assert_eq!(missing.into_inner().missing[0].received, half as u64);
        // While one upload of a build runs, another of the same build waits
        // its turn rather than write the same file.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(grpc::BuildPiece { info: Some(info.clone()), offset: half as u64, data: Vec::new() }).await.unwrap();
        let mut first = client.clone();
        let running = argus_proto::task::spawn("the first upload", async move {
            first.put(tokio_stream::wrappers::ReceiverStream::new(rx)).await
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let piece = grpc::BuildPiece { info: Some(info.clone()), offset: half as u64, data: Vec::new() };
        let busy = client.put(tokio_stream::iter([piece])).await.unwrap_err();
        assert_eq!(busy.code(), tonic::Code::Aborted, "{busy:?}");
        assert!(busy.message().contains("is being sent by another client"), "{}", busy.message());
        drop(tx);
        let ended = running.await.unwrap().unwrap_err();
        assert!(ended.message().contains(&format!("{half} of {} bytes received", bytes.len())), "{}", ended.message());
        // A sha that is not one never becomes a path.
        let bad =
            client.missing(grpc::MissingBuildsRequest { sha256: vec!["../../etc/passwd".into()] }).await.unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    });
    let (code, resumed) = argus(&dir, &["builds", "push", apk.to_str().unwrap(), "--coordinator", &url]);
    assert_eq!(code, Some(0), "{resumed}");
    assert!(resumed.contains(": uploaded in ") && resumed.contains(", resumed at 1 MB"), "{resumed}");
    let kept = dir.join(format!("argus-builds/sha256/{}", build.sha256));
    assert_eq!(std::fs::read(kept).unwrap(), bytes, "the resumed build is the build, byte for byte");
}
