// Included by the build scripts of the crates whose tests need a service of
// the machine: Postgres (`ARGUS_TEST_POSTGRES_URL`) or a browser
// (`chromedriver` on the PATH). Such a test carries
// `#[cfg_attr(not(argus_postgres), ignore = "…")]` (or `argus_browser`): it
// runs when the service is there and is reported `ignored`, never `ok`, when
// it is not. Under `CI=true` a missing service stops the build: `.ci/run`
// starts Postgres and installs the browser before it builds anything.

fn postgres_tests() {
    println!("cargo:rerun-if-env-changed=ARGUS_TEST_POSTGRES_URL");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(argus_postgres)");
    if std::env::var_os("ARGUS_TEST_POSTGRES_URL").is_some_and(|v| !v.is_empty()) {
        println!("cargo:rustc-cfg=argus_postgres");
    } else if under_ci() {
        panic!("CI=true but ARGUS_TEST_POSTGRES_URL is not set: start Postgres first (.ci/run does)");
    }
}

#[allow(dead_code)]
fn browser_tests() {
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo::rustc-check-cfg=cfg(argus_browser)");
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    };
    // Rerun when one is installed (a path that does not exist yet reruns
    // every build, which costs nothing here).
    println!("cargo:rerun-if-changed=/usr/bin/chromedriver");
    if on_path("chromedriver") && (on_path("chromium") || on_path("chromium-browser") || on_path("google-chrome")) {
        println!("cargo:rustc-cfg=argus_browser");
    } else if under_ci() {
        panic!("CI=true but chromedriver and chromium are not on the PATH: install them first (.ci/run does)");
    }
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}
