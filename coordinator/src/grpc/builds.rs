//! The Builds service: which builds the coordinator lacks, a build's bytes
//! received, checked and kept, and the builds it holds.

use std::io::Write;
use std::sync::Arc;

use argus_builds::Platform;
use argus_proto::grpc::{self, BuildInfo};
use argus_store::BuildRow;
use tonic::{Request, Response, Status, Streaming};

use super::Services;
use argus_builds::check_sha256 as check_sha;

use crate::builds::BuildFiles;

impl Services {
    fn build_files(&self) -> Result<Arc<BuildFiles>, Status> {
        self.builds.clone().ok_or_else(|| {
            Status::failed_precondition(
                "this coordinator keeps no builds (argus coordinator keeps them in --builds DIR)",
            )
        })
    }
}

#[tonic::async_trait]
impl grpc::builds_server::Builds for Services {
    async fn missing(
        &self,
        request: Request<grpc::MissingBuildsRequest>,
    ) -> Result<Response<grpc::MissingBuildsResponse>, Status> {
        let files = self.build_files()?;
        let mut missing = Vec::new();
        for sha256 in request.into_inner().sha256 {
            check_sha(&sha256).map_err(Status::invalid_argument)?;
            let held = self.store.build(&sha256).await?.is_some() && files.kept(&sha256).exists();
            if !held {
                missing.push(grpc::MissingBuild { received: files.received(&sha256), sha256 });
            }
        }
        Ok(Response::new(grpc::MissingBuildsResponse { missing }))
    }

    async fn put(
        &self,
        request: Request<Streaming<grpc::BuildPiece>>,
    ) -> Result<Response<grpc::PutBuildResponse>, Status> {
        let files = self.build_files()?;
        let mut pieces = request.into_inner();
        let first = pieces.message().await?.ok_or_else(|| Status::invalid_argument("an upload with no piece"))?;
        let info = first.info.ok_or_else(|| {
            Status::invalid_argument("the first piece of an upload must say what the build is (info)")
        })?;
        check_sha(&info.sha256).map_err(Status::invalid_argument)?;
        let platform = Platform::from_name(&info.platform).ok_or_else(|| {
            Status::invalid_argument(format!(
                "build {}: platform {:?} is neither ios nor android",
                info.sha256, info.platform
            ))
        })?;
        if info.size > files.max_bytes {
            return Err(Status::invalid_argument(format!(
                "build {}: {} bytes, over this coordinator's cap of {} bytes",
                info.sha256, info.size, files.max_bytes
            )));
        }
        if let Some(row) = self.store.build(&info.sha256).await?
            && files.kept(&info.sha256).exists()
        {
            return Ok(Response::new(grpc::PutBuildResponse { build: Some(info_of(&row)), already: true }));
        }
        let Some(_receiving) = files.receive(&info.sha256) else {
            return Err(Status::aborted(format!(
                "build {} is being sent by another client; ask which builds are missing again in a moment",
                info.sha256
            )));
        };
        let received = receive(&files, &info, first.offset, first.data, &mut pieces).await?;
        if received < info.size {
            return Err(Status::aborted(format!(
                "build {}: {received} of {} bytes received; send the rest from byte {received}",
                info.sha256, info.size
            )));
        }
        let row = keep(&files, &info, platform).await?;
        self.store.put_build(&row).await?;
        Ok(Response::new(grpc::PutBuildResponse { build: Some(info_of(&row)), already: false }))
    }

    async fn list(&self, _: Request<grpc::ListBuildsRequest>) -> Result<Response<grpc::ListBuildsResponse>, Status> {
        let builds = self
            .store
            .builds()
            .await?
            .iter()
            .map(|row| grpc::StoredBuild { info: Some(info_of(row)), last_used_ms: row.last_used_at })
            .collect();
        Ok(Response::new(grpc::ListBuildsResponse { builds }))
    }
}

/// Writes the pieces to the build's partial file from `offset` (0, or
/// where a cut-short upload stopped); how many bytes it then holds. The
/// stream ending early keeps what came, for the next upload to resume.
async fn receive(
    files: &BuildFiles,
    info: &BuildInfo,
    offset: u64,
    first: Vec<u8>,
    pieces: &mut Streaming<grpc::BuildPiece>,
) -> Result<u64, Status> {
    let path = files.partial(&info.sha256);
    let had = files.received(&info.sha256);
    if offset != 0 && offset != had {
        return Err(Status::failed_precondition(format!(
            "build {}: {had} bytes were received, not {offset}; send from byte {had}",
            info.sha256
        )));
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(offset != 0)
        .truncate(offset == 0)
        .open(&path)
        .map_err(|e| Status::internal(format!("cannot write build {}: {e}", info.sha256)))?;
    let mut received = offset;
    let mut data = first;
    loop {
        received += data.len() as u64;
        if received > info.size {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(Status::invalid_argument(format!(
                "build {}: more bytes than its size ({})",
                info.sha256, info.size
            )));
        }
        if !data.is_empty() {
            let sha = info.sha256.clone();
            file = argus_proto::task::blocking("build write", move || file.write_all(&data).map(|()| file))
                .await
                .map_err(|e| Status::internal(format!("build {sha}: the write stopped: {e}")))?
                .map_err(|e| Status::internal(format!("cannot write build {sha}: {e}")))?;
        }
        match pieces.message().await {
            Ok(Some(piece)) => data = piece.data,
            Ok(None) | Err(_) => break,
        }
    }
    Ok(received)
}

/// Checks a whole partial build (its sha256, and what it is, read by the
/// coordinator itself) and moves it into place; its row. A build that is
/// not what it was said to be is removed.
async fn keep(files: &BuildFiles, info: &BuildInfo, platform: Platform) -> Result<BuildRow, Status> {
    let (partial, kept) = (files.partial(&info.sha256), files.kept(&info.sha256));
    let refuse = |why: String| {
        let _ = std::fs::remove_file(&partial);
        Status::invalid_argument(format!("build {}: {why}; nothing was kept", info.sha256))
    };
    // Its bytes first: what they are is read only from the bytes claimed.
    let checked = {
        let partial = partial.clone();
        argus_proto::task::blocking("build check", move || {
            let (sha256, _) = argus_builds::canonical::file_digest(&partial)?;
            Ok::<_, argus_builds::BuildError>((sha256, argus_builds::inspect_received(&partial, platform)))
        })
        .await
        .map_err(|e| Status::internal(format!("build {}: the check stopped: {e}", info.sha256)))?
    };
    let (sha256, read) = checked.map_err(|e| refuse(format!("it cannot be read: {e}")))?;
    if sha256 != info.sha256 {
        return Err(refuse(format!("its bytes' sha256 is {sha256}")));
    }
    let build = read.map_err(|e| refuse(format!("it cannot be read: {e}")))?;
    let said = (&info.bundle_id, &info.version, &info.build_number);
    if said != (&build.bundle_id, &build.version, &build.build_number) {
        return Err(refuse(format!(
            "it says it is {} {} ({}), the client said {} {} ({})",
            build.bundle_id, build.version, build.build_number, info.bundle_id, info.version, info.build_number
        )));
    }
    std::fs::rename(&partial, &kept)
        .map_err(|e| Status::internal(format!("cannot keep build {}: {e}", info.sha256)))?;
    let now = argus_grid::time::now_ms();
    // Only a file name, never a client's path.
    let file_name = std::path::Path::new(&info.file_name).file_name().map(|n| n.to_string_lossy().into_owned());
    Ok(BuildRow {
        sha256: build.sha256,
        platform: platform.as_str().to_owned(),
        bundle_id: build.bundle_id,
        version: build.version,
        build_number: build.build_number,
        min_os: build.min_os,
        launch: build.launch,
        abis: build.abis.join(","),
        size: build.size as i64,
        file_name: file_name.unwrap_or_default(),
        uploaded_at: now,
        last_used_at: now,
    })
}

/// A stored build as the API says it.
pub(crate) fn info_of(row: &BuildRow) -> BuildInfo {
    BuildInfo {
        sha256: row.sha256.clone(),
        platform: row.platform.clone(),
        bundle_id: row.bundle_id.clone(),
        version: row.version.clone(),
        build_number: row.build_number.clone(),
        min_os: row.min_os.clone().unwrap_or_default(),
        launch: row.launch.clone().unwrap_or_default(),
        abis: row.abis.split(',').filter(|a| !a.is_empty()).map(str::to_owned).collect(),
        size: row.size as u64,
        file_name: row.file_name.clone(),
    }
}
