//! Compiles proto/solidgraph/v1 with protox (no protoc needed) and
//! generates the tonic services from its FileDescriptorSet; the encoded set
//! is also written to OUT_DIR for gRPC reflection.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("solidgraph/v1/solidgraph.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("solidgraph_v1_descriptor.bin"), fds.encode_to_vec())?;
    // Byte fields as `bytes::Bytes`: a result buffer is sliced into chunks
    // without copying it.
    tonic_prost_build::configure().bytes(".solidgraph.v1").compile_fds(fds)?;
    Ok(())
}
