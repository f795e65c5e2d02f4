// Included by the build scripts of the crates whose tests need something of
// the machine: Postgres (`ARGUS_TEST_POSTGRES_URL`), a browser
// (`ARGUS_TEST_BROWSER=1`, with chromedriver and chromium on the PATH) or the
// real WebDriver clients (`ARGUS_TEST_CLIENTS=1`, after
// `scripts/test-clients.sh`) or Android's `aapt` (`ARGUS_TEST_ANDROID=1`). Such a test carries
// `#[cfg_attr(not(argus_postgres), ignore = "…")]` (or `argus_browser`,
// `argus_clients`): it runs when its variable says the service is there and
// is reported `ignored`, never `ok`, when it is not. Under `CI=true` a missing
// one stops the build: `.ci/run` starts Postgres, installs the browser and
// the clients, and sets the variables before it builds anything.
//
// Only variables are watched, never a path: a path that does not exist makes
// cargo run the script (and rebuild the crate) on every build.

#[allow(dead_code)]
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
    println!("cargo:rerun-if-env-changed=ARGUS_TEST_BROWSER");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(argus_browser)");
    if switched_on("ARGUS_TEST_BROWSER") {
        let on_path = |name: &str| {
            std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
        };
        let browser = ["chromium", "chromium-browser", "google-chrome"].iter().any(|name| on_path(name));
        if !on_path("chromedriver") || !browser {
            panic!("ARGUS_TEST_BROWSER=1 but chromedriver and chromium are not both on the PATH");
        }
        println!("cargo:rustc-cfg=argus_browser");
    } else if under_ci() {
        panic!("CI=true but ARGUS_TEST_BROWSER is not 1: install chromium and chromedriver and set it (.ci/run does)");
    }
}

#[allow(dead_code)]
fn client_tests() {
    println!("cargo:rerun-if-env-changed=ARGUS_TEST_CLIENTS");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(argus_clients)");
    if switched_on("ARGUS_TEST_CLIENTS") {
        println!("cargo:rustc-cfg=argus_clients");
    } else if under_ci() {
        panic!("CI=true but ARGUS_TEST_CLIENTS is not 1: run scripts/test-clients.sh and set it (.ci/run does)");
    }
}

/// Android's `aapt` and the framework's resources, which the build
/// reader's tests package real APKs with.
#[allow(dead_code)]
fn android_tests() {
    println!("cargo:rerun-if-env-changed=ARGUS_TEST_ANDROID");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(argus_android)");
    if switched_on("ARGUS_TEST_ANDROID") {
        let on_path = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("aapt").is_file()));
        if !on_path || !std::path::Path::new("/usr/share/android-framework-res/framework-res.apk").is_file() {
            panic!("ARGUS_TEST_ANDROID=1 but aapt or the framework's resources are missing (Debian: aapt android-framework-res)");
        }
        println!("cargo:rustc-cfg=argus_android");
    } else if under_ci() {
        panic!("CI=true but ARGUS_TEST_ANDROID is not 1: install aapt and android-framework-res and set it (.ci/run does)");
    }
}

fn switched_on(variable: &str) -> bool {
    std::env::var(variable).is_ok_and(|v| v == "1" || v == "true")
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}
