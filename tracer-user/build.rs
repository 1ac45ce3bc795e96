//! Builds the eBPF probes (`tracer-ebpf`, nightly + bpf-linker) and embeds the object.
//! `cargo xtask setup` installs what this needs.
fn main() -> anyhow::Result<()> {
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
