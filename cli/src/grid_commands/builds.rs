//! `argus builds push FILE` and `argus builds list`: a run's own app builds
//! on the coordinator, by content. A push reads the build here (refusing
//! what no simulator or emulator can install), asks the coordinator whether
//! it holds it, and sends only what it lacks, from where an upload cut
//! short stopped.

use std::io::Read;

use argus_builds::{Build, Platform};
use argus_proto::grpc::builds_client::BuildsClient;

use super::*;

#[derive(clap::Args)]
pub struct BuildsArgs {
    #[command(flatten)]
    view: ViewArgs,
    #[command(subcommand)]
    what: Builds,
}

#[derive(clap::Subcommand)]
enum Builds {
    /// Read a build (an .app folder, a .zip holding one, an .apk; `ios=PATH`
    /// or `android=PATH` to say which) and send it unless the coordinator
    /// holds it already.
    Push {
        /// The build.
        file: String,
    },
    /// The builds the coordinator holds, most recently used first.
    List,
}

/// The bytes of one piece of an upload.
const PIECE: usize = 1 << 20;

pub async fn builds(args: BuildsArgs, matches: &clap::ArgMatches) -> ExitCode {
    let matches = matches.subcommand().map(|(_, m)| m.clone()).unwrap_or_default();
    let target = match args.view.target("builds", &matches) {
        Ok(target) => target,
        Err(error) => return failed("builds", error),
    };
    // A build is read here before the coordinator is asked anything: what
    // no device can install is said at once, with or without a coordinator.
    let build = match &args.what {
        Builds::Push { file } => match read_build(file) {
            Ok(build) => Some(build),
            Err(error) => return failed("builds push", error),
        },
        Builds::List => None,
    };
    let mut client = match channel(&target).await {
        Ok((channel, bearer)) => BuildsClient::with_interceptor(channel, bearer),
        Err(error) => return failed("builds", error),
    };
    match build {
        Some(build) => match push(&mut client, &build).await {
            Ok(said) => {
                outln!("build {}: {said}", build.summary());
                ExitCode::SUCCESS
            }
            Err(error) => failed("builds push", error),
        },
        None => list(&mut client).await,
    }
}

/// `argus builds list`: a line a build.
async fn list(client: &mut Client) -> ExitCode {
    match client.list(grpc::ListBuildsRequest {}).await {
        Ok(answer) => {
            for stored in answer.into_inner().builds {
                let Some(info) = stored.info else { continue };
                outln!(
                    "{:<8} sha256:{}  {}  {} ({})  {}  last used {}",
                    info.platform,
                    info.sha256.get(..12).unwrap_or(&info.sha256),
                    info.bundle_id,
                    info.version,
                    info.build_number,
                    argus_builds::human_size(info.size),
                    argus_grid::time::iso(stored.last_used_ms)
                );
            }
            ExitCode::SUCCESS
        }
        Err(status) => failed("builds list", status.message().to_owned()),
    }
}

/// `ios=PATH`, `android=PATH` or `PATH`: the build read, or what is wrong
/// with it.
pub fn read_build(spec: &str) -> Result<Build, String> {
    let (said, path) = match spec.split_once('=') {
        Some((platform, path)) => match Platform::from_name(platform) {
            Some(platform) => (Some(platform), path),
            None => (None, spec),
        },
        None => (None, spec),
    };
    argus_builds::inspect(std::path::Path::new(path), said).map_err(|e| e.to_string())
}

type Client = BuildsClient<tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>>;

/// Sends `build` unless the coordinator holds it: what happened, in words.
pub async fn push(client: &mut Client, build: &Build) -> Result<String, String> {
    let request = grpc::MissingBuildsRequest { sha256: vec![build.sha256.clone()] };
    let missing = client.missing(request).await.map_err(|s| s.message().to_owned())?.into_inner().missing;
    let Some(missing) = missing.into_iter().find(|m| m.sha256 == build.sha256) else {
        return Ok("already on the coordinator".into());
    };
    let started = std::time::Instant::now();
    let (mut file, _scratch) = travelling_file(build)?;
    let offset = missing.received.min(build.size);
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut first = Some(grpc::BuildInfo {
        sha256: build.sha256.clone(),
        platform: build.platform.as_str().into(),
        bundle_id: build.bundle_id.clone(),
        version: build.version.clone(),
        build_number: build.build_number.clone(),
        min_os: build.min_os.clone().unwrap_or_default(),
        launch: build.launch.clone().unwrap_or_default(),
        abis: build.abis.clone(),
        size: build.size,
        file_name: build.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    });
    // Read a piece at a time as the upload takes them: a build of hundreds
    // of megabytes is never held whole.
    let pieces = std::iter::from_fn(move || {
        let mut data = vec![0; PIECE];
        let read = file.read(&mut data).unwrap_or(0);
        data.truncate(read);
        let info = first.take();
        (read > 0 || info.is_some()).then(|| grpc::BuildPiece {
            offset: if info.is_some() { offset } else { 0 },
            info,
            data,
        })
    });
    let answer = client.put(tokio_stream::iter(pieces)).await.map_err(|s| s.message().to_owned())?.into_inner();
    let resumed = if offset > 0 { format!(", resumed at {}", argus_builds::human_size(offset)) } else { String::new() };
    Ok(if answer.already {
        "already on the coordinator".into()
    } else {
        format!("uploaded in {:.1} s{resumed}", started.elapsed().as_secs_f64())
    })
}

/// The file that travels: the `.apk`, or the `.app`'s canonical tar
/// written to a scratch file (removed when the second value is dropped).
fn travelling_file(build: &Build) -> Result<(std::fs::File, Option<Scratch>), String> {
    let path = &build.file;
    let (file, scratch) = match build.platform {
        Platform::Android => (std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?, None),
        Platform::Ios => {
            let scratch =
                Scratch(std::env::temp_dir().join(format!("argus-build-{}-{}.tar", std::process::id(), build.sha256)));
            let out = std::fs::File::create(&scratch.0).map_err(|e| format!("{}: {e}", scratch.0.display()))?;
            let written = if path.is_dir() {
                argus_builds::canonical::write_dir(path, out)
            } else {
                argus_builds::canonical::write_zipped(path, out)
            };
            drop(written.map_err(|e| e.to_string())?);
            (std::fs::File::open(&scratch.0).map_err(|e| format!("{}: {e}", scratch.0.display()))?, Some(scratch))
        }
    };
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    if size != build.size {
        return Err(format!("{}: it changed while it was read; push it again", path.display()));
    }
    Ok((file, scratch))
}

/// A scratch file, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
