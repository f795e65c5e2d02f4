//! How the project's own commands start (its fixtures process, an `exec`
//! step): `sh -c`, with the running binary's folder first on the `PATH`, so
//! that a project whose fixtures command is `argus …` gets this `argus`, even
//! from a build that was never installed (`target/release/argus run …`).

use std::ffi::OsString;
use std::path::PathBuf;

use tokio::process::Command;

/// `sh -c COMMAND` with the running binary's folder first on the `PATH`.
pub fn project_command(command: &str) -> Command {
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command);
    if let Some(path) = path_with_own_folder() {
        shell.env("PATH", path);
    }
    shell
}

/// The `PATH` with this executable's folder in front (unchanged when the
/// folder cannot be known).
fn path_with_own_folder() -> Option<OsString> {
    let own = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let folders: Vec<PathBuf> =
        std::iter::once(own.clone()).chain(std::env::split_paths(&rest).filter(|p| *p != own)).collect();
    std::env::join_paths(folders).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_own_folder_comes_first_on_the_path() {
        let own = std::env::current_exe().unwrap().parent().unwrap().display().to_string();
        let output = project_command("printf %s \"$PATH\"").output().await.unwrap();
        let path = String::from_utf8(output.stdout).unwrap();
        assert_eq!(path.split(':').next(), Some(own.as_str()), "{path}");
        assert_eq!(path.split(':').filter(|p| *p == own).count(), 1, "once: {path}");
    }
}
