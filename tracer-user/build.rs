//! Builds the eBPF probes (`tracer-ebpf`, nightly + bpf-linker) and embeds the object.
//! Finds the OTF2 library (render/otf2 links it statically). Generates the gRPC code of
//! the agent/collector transport (remote/) from proto/agent.proto. `cargo xtask setup`
//! installs what this needs.
fn main() -> anyhow::Result<()> {
    link_otf2()?;
    generate_agent_protocol()?;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../tracer-ebpf");
    // The probes are built from tracer-common too (record layouts, map sizes such as the
    // call table's): aya-build watches only the eBPF package's own files.
    println!(
        "cargo:rerun-if-changed={}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tracer-common/src")
    );
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: root,
            ..Default::default()
        }],
        aya_build::Toolchain::Nightly,
    )
}

/// Where Debian's libopen-trace-format2-dev put libopen-trace-format2.a, from its
/// pkg-config file.
fn link_otf2() -> anyhow::Result<()> {
    let out = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "otf2-backend"])
        .output();
    match out {
        Ok(o) if o.status.success() && !o.stdout.trim_ascii().is_empty() => {
            let dir = String::from_utf8(o.stdout)?;
            println!("cargo:rustc-link-search=native={}", dir.trim());
            Ok(())
        }
        _ => anyhow::bail!(
            "the OTF2 library is missing (pkg-config otf2-backend): `cargo xtask setup` installs \
             libopen-trace-format2-dev"
        ),
    }
}

/// The messages and the client and server of proto/agent.proto, into OUT_DIR
/// (`tracer.agent.v1.rs`, included by remote/proto.rs). protox parses the file in pure
/// Rust: no protoc on the build machine.
fn generate_agent_protocol() -> anyhow::Result<()> {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/agent.proto");
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], [proto_dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
