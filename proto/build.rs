//! Compiles `argus/v1/*.proto` without a system `protoc`: protox parses the
//! files, tonic-prost-build generates the messages and services, and the
//! descriptor set is kept for gRPC reflection.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "argus/v1/project.proto",
        "argus/v1/worker.proto",
        "argus/v1/runs.proto",
        "argus/v1/fleet.proto",
        "argus/v1/builds.proto",
    ];
    println!("cargo:rerun-if-changed=argus");
    let descriptors = protox::compile(files, ["."])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("argus_descriptor.bin"), descriptors.encode_to_vec())?;
    // A result's verdict and observations are boxed: inline, they would
    // make every worker message on the owner's channel as big as a result.
    tonic_prost_build::configure()
        .boxed(".argus.v1.AttemptResult.verdict")
        .boxed(".argus.v1.AttemptResult.observed")
        .compile_fds(descriptors)?;
    Ok(())
}
