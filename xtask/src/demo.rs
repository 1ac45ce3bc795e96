//! `cargo xtask demo`: traces the bundled hybrid MPI + threads program, whose bottleneck
//! is planted (tests/programs/hybrid_mpi_threads.c: each round one thread of one rank
//! runs `thread_slow` for 40 ms while the others run `thread_work` for 10 ms), prints the
//! report (its diagnosis and profile table) and writes the HTML report; then traces a
//! real application, LAMMPS (xtask's `lammps` module), says in three lines what its
//! report teaches, and ends with its HTML report's address.

use std::io::IsTerminal;
use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::build::{build_program, build_release};
use crate::setup::setup;
use crate::util::{root, run, MPIRUN_NP};
use xtask::lammps;

/// The program the demo traces, and its arguments: threads per rank, rounds, the slow
/// thread's milliseconds, the others', the slow rank (-1: it rotates).
const PROGRAM: &str = "hybrid_mpi_threads.openmpi";
const ARGS: &[&str] = &["2", "5", "40", "10", "-1"];
const RANKS: &str = "2";

/// `cargo xtask demo`: setup, build, trace the program, print its report and write the
/// HTML page; then trace LAMMPS, say what its report teaches and where its page is.
pub(crate) fn demo() -> Result<()> {
    setup()?;
    build_release()?;
    let program = build_program(PROGRAM)?;
    let tracer = root().join("target/release/tracer");
    let out = std::env::temp_dir().join("tracer-demo");
    std::fs::create_dir_all(&out)?;
    let recording = out.join("hybrid.trace");
    eprintln!(
        "\nxtask demo: tracing {RANKS} Open MPI ranks x {} threads ({PROGRAM} {}) from launch\n",
        ARGS[0],
        ARGS.join(" ")
    );
    record(&tracer, &recording, &program)?;
    let html = out.join("hybrid-report.html");
    eprintln!(
        "\nxtask demo: the report (tracer report {})\n",
        recording.display()
    );
    run(Command::new(&tracer)
        .arg("report")
        .arg("--html")
        .arg(&html)
        .arg(&recording))?;
    println!("\nHTML report: {}", html.display());

    eprintln!(
        "\nxtask demo: a real application: LAMMPS (Debian's lmp), the Lennard-Jones melt of tests/apps/in.lj on {} Open MPI ranks, its force computation and neighbour-list build selected\n",
        lammps::RANKS
    );
    let traced = lammps::trace(&tracer, &out)?;
    let lessons = lammps::lessons(&traced.report)?;
    eprintln!(
        "\nxtask demo: what the report of LAMMPS says (tracer report {}):\n",
        traced.recording.display()
    );
    for line in &lessons.lines {
        println!("{line}");
    }
    println!(
        "{}",
        lammps::report_link(&traced.html, std::io::stdout().is_terminal())
    );
    Ok(())
}

/// `tracer record` of the program under mpirun, with its two procedures selected.
fn record(tracer: &Path, recording: &Path, program: &Path) -> Result<()> {
    run(Command::new(tracer)
        .args(["record", "-o"])
        .arg(recording)
        .args(["--func", "thread_slow", "--func", "thread_work"])
        .arg("--")
        .args(MPIRUN_NP)
        .arg(RANKS)
        .arg(program)
        .args(ARGS))
}
