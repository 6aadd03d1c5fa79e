//! Compiles `proto/quorum.proto` with protox (pure Rust, so no system protoc is needed) into
//! prost messages and tonic server and client code, and writes the encoded descriptor set that
//! the reflection service serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_dir = manifest_dir.join("../../proto");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    println!(
        "cargo:rerun-if-changed={}",
        proto_dir.join("quorum.proto").display()
    );

    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_file("quorum.proto")?;
    std::fs::write(
        out_dir.join("quorum_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
