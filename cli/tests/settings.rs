//! One configuration for every binary: defaults < argus.toml < ARGUS_*
//! environment < flags, `--print-config` with where each value came from and
//! secrets hidden, and a bad value refused before anything starts, naming
//! the key and the file.

mod common;

use std::process::Command;

use common::*;

fn print_config(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = Command::new(ARGUS);
    command.current_dir(dir).args(args).arg("--print-config");
    // What the test machine's environment might set is not a layer here.
    for name in ["ARGUS_LISTEN", "ARGUS_HTTP_LISTEN", "ARGUS_DATABASE_URL", "ARGUS_CLIENT_GRACE", "ARGUS_COORDINATOR"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    String::from_utf8(output.stdout).unwrap()
}

fn line<'a>(printed: &'a str, key: &str) -> &'a str {
    printed.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| panic!("no {key}: {printed}"))
}

#[test]
fn the_coordinator_takes_the_file_then_the_environment_then_flags() {
    let dir = temp_dir("settings-coordinator");
    std::fs::write(
        dir.join("argus.toml"),
        "[coordinator]\nlisten = \"127.0.0.1:9100\"\nhttp = \"127.0.0.1:9101\"\nclient_grace = 5\n\
         database_url = \"postgres://argus:pa55word@db/argus\"\nclient_token = \"c-secret\"\n",
    )
    .unwrap();
    let printed =
        print_config(&dir, &["coordinator", "--http", "127.0.0.1:9201"], &[("ARGUS_LISTEN", "127.0.0.1:9200")]);
    assert_eq!(line(&printed, "client_grace"), "client_grace = 5   # file argus.toml");
    assert_eq!(line(&printed, "listen"), "listen = \"127.0.0.1:9200\"   # environment ARGUS_LISTEN");
    assert_eq!(line(&printed, "http"), "http = \"127.0.0.1:9201\"   # flag --http");
    assert_eq!(line(&printed, "artifacts"), "artifacts = \"argus-artifacts\"   # default");
    // A flag wins over its variable.
    let printed = print_config(
        &dir,
        &["coordinator", "--listen", "127.0.0.1:9300"],
        &[("ARGUS_LISTEN", "127.0.0.1:9200"), ("ARGUS_READ_TOKEN", "r-secret")],
    );
    assert_eq!(line(&printed, "listen"), "listen = \"127.0.0.1:9300\"   # flag --listen");
    // Secrets never print.
    assert!(
        !printed.contains("pa55word") && !printed.contains("c-secret") && !printed.contains("r-secret"),
        "{printed}"
    );
    assert_eq!(line(&printed, "client_token"), "client_token = (hidden)   # file argus.toml");
    assert_eq!(line(&printed, "read_token"), "read_token = (hidden)   # environment ARGUS_READ_TOKEN");
    assert!(line(&printed, "database_url").contains("postgres://argus:…@db/argus"), "{printed}");
    // --config names another file.
    std::fs::write(dir.join("other.toml"), "[coordinator]\nclient_grace = 9\n").unwrap();
    let printed = print_config(&dir, &["coordinator", "--config", "other.toml"], &[]);
    assert_eq!(line(&printed, "client_grace"), "client_grace = 9   # file other.toml");
}

#[test]
fn the_worker_takes_its_table_or_a_worker_file_and_a_flag_wins_over_the_file() {
    let dir = temp_dir("settings-worker");
    // The explicit flag (equal to the default) wins over the file's value.
    std::fs::write(
        dir.join("worker.toml"),
        "coordinator = \"http://c:7171\"\nname = \"mac-1\"\ndriver_host = \"0.0.0.0\"\n[[slot]]\nport = 8123\n",
    )
    .unwrap();
    let printed = print_config(&dir, &["worker", "--config", "worker.toml", "--driver-host", "127.0.0.1"], &[]);
    assert_eq!(line(&printed, "driver_host"), "driver_host = \"127.0.0.1\"   # flag --driver-host");
    assert_eq!(line(&printed, "coordinator"), "coordinator = \"http://c:7171\"   # file worker.toml");
    std::fs::write(
        dir.join("argus.toml"),
        "[worker]\ncoordinator = \"http://c:7171\"\ntoken = \"w-secret\"\n[[worker.slot]]\nport = 8124\n",
    )
    .unwrap();
    let printed = print_config(&dir, &["worker"], &[("ARGUS_WORKER_NAME", "from-env")]);
    assert_eq!(line(&printed, "name"), "name = \"from-env\"   # environment ARGUS_WORKER_NAME");
    assert_eq!(line(&printed, "token"), "token = (hidden)   # file argus.toml");
    assert!(!printed.contains("w-secret"));
}

#[test]
fn a_bad_value_is_refused_before_anything_starts_naming_the_key_and_the_file() {
    let dir = temp_dir("settings-bad");
    let refused = |file: &str, args: &[&str]| {
        std::fs::write(dir.join("argus.toml"), file).unwrap();
        let output = Command::new(ARGUS).current_dir(&dir).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        text(&output)
    };
    let said = refused("[coordinator]\nlisten = \"not an address\"\n", &["coordinator"]);
    assert!(said.contains("argus.toml: [coordinator] listen: invalid socket address"), "{said}");
    let said = refused("[coordinator]\nclient_grace = \"soon\"\n", &["coordinator"]);
    assert!(said.contains("argus.toml: [coordinator] client_grace: invalid type: found string \"soon\""), "{said}");
    let said = refused("[coordinator]\nlistn = \"127.0.0.1:1\"\n", &["coordinator"]);
    assert!(said.contains("argus.toml: [coordinator] has no key `listn`"), "{said}");
    let said = refused(
        "[worker]\ncoordinator = \"http://c:7171\"\n[[worker.slot]]\nport = 1\n[[worker.slot]]\nport = 1\n",
        &["worker"],
    );
    assert!(said.contains("port 1 is given to two slots"), "{said}");
    let said = refused("[coordinator]\ntls_cert = \"cert.pem\"\n", &["coordinator"]);
    assert!(said.contains("tls_cert and tls_key go together"), "{said}");
    let said = refused(
        "[coordinator]\n[[coordinator.webhooks]]\nurl = \"http://x\"\nevents = [\"run.done\"]\n",
        &["coordinator"],
    );
    assert!(said.contains("[[coordinator.webhooks]] \"webhook 1\": events: \"run.done\" is not an event"), "{said}");
    let said = refused(
        "[coordinator]\n[[coordinator.webhooks]]\nformat = \"github-status\"\nrepository = \"acme\"\n",
        &["coordinator"],
    );
    assert!(said.contains("repository: \"acme\"; github-status needs owner/repo"), "{said}");
    // Nothing was started: no database was made.
    assert!(!dir.join("argus.db").exists());
    let output = Command::new(ARGUS).current_dir(&dir).args(["coordinator", "--config", "nope.toml"]).output().unwrap();
    assert!(text(&output).contains("--config nope.toml: no such file"), "{}", text(&output));
}

#[test]
fn the_example_argus_toml_in_deploy_is_one_each_command_takes() {
    let example = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/argus.toml");
    let dir = temp_dir("settings-example");
    let config = example.display().to_string();
    let printed = print_config(&dir, &["coordinator", "--config", &config], &[]);
    assert!(line(&printed, "public_url").contains("https://argus.example.com"), "{printed}");
    let printed = print_config(&dir, &["worker", "--config", &config], &[]);
    assert_eq!(line(&printed, "ports").split("   #").next(), Some("ports = [8123, 8124]"), "{printed}");
    assert!(line(&printed, "platform").contains("\"android\""), "{printed}");
}

#[test]
fn clients_take_the_client_table_too() {
    let dir = temp_dir("settings-client");
    let port = free_port();
    std::fs::write(
        dir.join("argus.toml"),
        format!("[client]\ncoordinator = \"http://127.0.0.1:{port}\"\nproject = \"shop\"\n"),
    )
    .unwrap();
    let printed = print_config(&dir, &["run"], &[("ARGUS_CLIENT_TOKEN", "c-secret")]);
    assert_eq!(line(&printed, "coordinator"), format!("coordinator = \"http://127.0.0.1:{port}\"   # file argus.toml"));
    assert_eq!(line(&printed, "token"), "token = (hidden)   # environment ARGUS_CLIENT_TOKEN");
    assert_eq!(line(&printed, "project"), "project = \"shop\"   # file argus.toml");
    // `argus runs` dials the file's coordinator (nothing listens there).
    let output = Command::new(ARGUS).current_dir(&dir).env_remove("ARGUS_COORDINATOR").arg("runs").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output).contains(&format!("127.0.0.1:{port}")), "{}", text(&output));
}

#[test]
fn secrets_come_from_files_that_only_their_owner_reads() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("settings-secrets");
    let secret = |name: &str, text: &str, mode: u32| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let database = secret("database-url", &format!("sqlite:{}\n", dir.join("argus.db").display()), 0o600);
    let worker_token = secret("worker-token", "w-secret\n", 0o400);
    let client_token = secret("client-token", "c-secret\n", 0o440);
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let _coordinator = Killed(spawn(
        &[
            "coordinator",
            "--listen",
            &listen,
            "--http",
            &format!("127.0.0.1:{}", free_port()),
            "--database-url-file",
            &database,
            "--worker-token-file",
            &worker_token,
            "--client-token-file",
            &client_token,
        ],
        &dir,
    ));
    let port = free_port();
    let _worker = Killed(spawn(
        &[
            "worker",
            "--coordinator",
            &url,
            "--name",
            "files",
            "--ports",
            &port.to_string(),
            "--token-file",
            &worker_token,
        ],
        &dir,
    ));
    let _sims = Sims::start(&[port]);
    let devices =
        |extra: &[&str]| Command::new(ARGUS).args(["devices", "--coordinator", &url]).args(extra).output().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let listing = text(&devices(&["--token-file", &client_token]));
        if listing.contains("files/") && listing.contains(" idle ") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the worker never came with its token from a file: {listing}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The client token from the file is what the coordinator asks for.
    let refused = devices(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(dir.join("argus.db").exists(), "the database the URL's file names");

    // A file every user may read, a missing one, and a secret given twice
    // are refused before anything starts, naming the file.
    let open = secret("open-token", "w-secret\n", 0o644);
    let output =
        Command::new(ARGUS).current_dir(&dir).args(["coordinator", "--worker-token-file", &open]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains(&format!("worker_token_file {open}: every user may read it (mode 644)")),
        "{}",
        text(&output)
    );
    let output = Command::new(ARGUS)
        .args([
            "worker",
            "--coordinator",
            &url,
            "--ports",
            &free_port().to_string(),
            "--token-file",
            "/nonexistent/token",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("token_file /nonexistent/token: no such file"), "{}", text(&output));
    let output = Command::new(ARGUS)
        .args(["devices", "--coordinator", &url, "--token", "x", "--token-file", &client_token])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("token and token_file are both given"), "{}", text(&output));
}
