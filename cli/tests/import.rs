//! `argus import junit` and `POST /api/v1/import/junit` with reports
//! written by real tools (pytest, unittest-xml-reporting, jest with
//! jest-junit; `scripts/test-clients.sh` installs them), and with what is
//! not a report: 50 MB of it, a billion laughs, a NUL byte. Each real
//! report lands as a run in the history; each bad one gets a 4xx that says
//! why, and nothing of it is written.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn clients() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-clients")
}

/// Runs `program` in `dir`; it must leave `report` behind.
fn write_report(dir: &Path, program: &Path, args: &[&str], env: &[(&str, &str)], report: &str) -> PathBuf {
    let output = Command::new(program).current_dir(dir).args(args).envs(env.iter().copied()).output().unwrap();
    let path = dir.join(report);
    assert!(path.exists(), "{} wrote no {report}: {}", program.display(), text(&output));
    path
}

#[test]
#[cfg_attr(
    not(argus_clients),
    ignore = "needs ARGUS_TEST_CLIENTS=1 after `bash scripts/test-clients.sh` (bash .ci/run does both)"
)]
fn reports_of_real_runners_land_in_the_history_and_bad_ones_are_refused_whole() {
    let scratch = temp_dir("import");
    let suite = scratch.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let sources = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/junit");
    for file in ["test_shop.py", "shop.test.js"] {
        std::fs::copy(sources.join(file), suite.join(file)).unwrap();
    }
    let node_modules = clients().join("node/node_modules");
    std::fs::write(
        suite.join("jest.config.json"),
        serde_json::json!({ "testEnvironment": "node", "reporters": ["default", node_modules.join("jest-junit")] })
            .to_string(),
    )
    .unwrap();
    let python = clients().join("venv/bin/python");
    let pytest = write_report(
        &suite,
        &python,
        &["-m", "pytest", "-p", "no:cacheprovider", "--junitxml=pytest.xml", "test_shop.py"],
        &[],
        "pytest.xml",
    );
    write_report(&suite, &python, &["test_shop.py"], &[], "reports");
    let unittest = std::fs::read_dir(suite.join("reports")).unwrap().next().unwrap().unwrap().path();
    let node = PathBuf::from("node");
    let jest_bin = node_modules.join("jest/bin/jest.js");
    let jest = write_report(
        &suite,
        &node,
        &[jest_bin.to_str().unwrap(), "--config", "jest.config.json"],
        &[("JEST_JUNIT_OUTPUT_FILE", "jest.xml")],
        "jest.xml",
    );

    let (_coordinator, listen, http) = coordinator_on_free_ports(&scratch, &["--client-token", "c-key"]);
    let url = format!("http://{listen}");
    let import = |file: &Path, extra: &[&str]| {
        Command::new(ARGUS)
            .current_dir(&scratch)
            .args(["import", "junit"])
            .arg(file)
            .args([
                "--coordinator",
                &url,
                "--token",
                "c-key",
                "--project",
                "shop",
                "--branch",
                "main",
                "--platform",
                "web",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let mut runs = Vec::new();
    for (file, extra, says) in [
        (&pytest, &[][..], "pytest report, 3 cases: 1 passed, 1 failed, 1 skipped"),
        (&jest, &[][..], "jest report, 3 cases: 1 passed, 1 failed, 1 skipped"),
        (&unittest, &["--source", "unittest"][..], "unittest report, 3 cases: 1 passed, 1 failed, 1 skipped"),
    ] {
        let output = import(file, extra);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        assert!(text(&output).contains(says), "{}", text(&output));
        runs.push(text(&output).split_whitespace().nth(1).unwrap().trim_end_matches(':').to_owned());
    }

    // In the history, with their cases, failures and where they came from.
    let auth = "authorization: Bearer c-key\r\n";
    let (status, body) = http_json_with(&http, "GET", "/api/v1/runs?project=shop", "", auth);
    assert_eq!(status, 200, "{body}");
    for run in &runs {
        assert!(body.contains(run.as_str()), "{body}");
    }
    assert!(body.contains("junit import: pytest") && body.contains("junit import: jest"), "{body}");
    let (status, body) = http_json_with(&http, "GET", &format!("/api/v1/runs/{}", runs[0]), "", auth);
    assert_eq!(status, 200);
    assert!(body.contains("test_shop.Cart.test_pays_by_card") && body.contains("503 <Service Unavailable>"), "{body}");
    let (status, body) =
        http_json_with(&http, "GET", "/api/v1/cases/test_shop.Cart.test_pays_by_card?project=shop", "", auth);
    assert_eq!(status, 200, "{body}");

    // Bad reports: a 4xx that says why, and no run written.
    let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol9 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><testsuite name="x"><testcase name="a"><failure message="&lol9;"/></testcase></testsuite>"#;
    let import_http =
        |body: &str| http_json_with(&http, "POST", "/api/v1/import/junit?project=shop&branch=main", body, auth);
    let (status, body) = import_http(laughs);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("DOCTYPE"), "{body}");
    let (status, body) = import_http("<testsuite name=\"x\"><testcase name=\"a\">\0</testcase></testsuite>");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("NUL byte"), "{body}");
    let (status, body) = import_http("<testsuite><testcase name=\"a\"><failure>");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("before its elements close") || body.contains("not well-formed"), "{body}");
    let (status, _) = http_json_with(&http, "POST", "/api/v1/import/junit?project=shop", "<testsuite/>", "");
    assert_eq!(status, 401, "the client token is needed");
    let huge = format!("<testsuite name=\"x\">{}</testsuite>", "<testcase name=\"a\"/>".repeat(50 * 1024 * 1024 / 20));
    let (status, body) = post_refused_early(&http, "/api/v1/import/junit?project=shop", huge.as_bytes(), auth);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("larger than 16 MiB"), "{body}");
    let huge_file = scratch.join("huge.xml");
    std::fs::write(&huge_file, &huge).unwrap();
    let refused = import(&huge_file, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("a report may be 16 MiB at most"), "{}", text(&refused));
    let (_, body) = http_json_with(&http, "GET", "/api/v1/runs?project=shop", "", auth);
    let listed: serde_json::Value = serde_json::from_str(body.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 3, "nothing of the bad reports was written: {body}");
}

/// A POST whose body the server may refuse before it has read it all (it
/// answers and closes): what it answered.
fn post_refused_early(addr: &str, path: &str, body: &[u8], headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/xml\r\n{headers}content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The server stops reading once it has refused: a broken pipe then.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}
