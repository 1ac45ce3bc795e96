//! `cargo xtask demo`: traces a bundled 4-rank Open MPI ring and prints the summary.

use std::process::Command;

use anyhow::Result;

use crate::build::{build_programs, build_release};
use crate::setup::setup;
use crate::util::{root, run};

/// `cargo xtask demo`: setup, build, trace the ring, print its summary JSON.
pub fn demo() -> Result<()> {
    setup()?;
    build_release()?;
    let programs = build_programs()?;
    let tracer = root().join("target/release/tracer");
    let out = std::env::temp_dir().join("tracer-demo");
    std::fs::create_dir_all(&out)?;
    let recording = out.join("ring.trace");
    let summary = out.join("ring-summary.json");
    eprintln!("\nxtask demo: tracing a 4-rank Open MPI ring (20 rounds) from launch\n");
    run(Command::new(&tracer)
        .args(["record", "-o"])
        .arg(&recording)
        .arg("--summary-json")
        .arg(&summary)
        .args([
            "--",
            "mpirun.openmpi",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "4",
        ])
        .arg(programs.join("mpi_ring.openmpi"))
        .args(["20", "1024"]))?;
    eprintln!("\nxtask demo: summary JSON ({}):", summary.display());
    println!("{}", std::fs::read_to_string(&summary)?);
    Ok(())
}
