//! `cargo xtask build`: the tracer (release) and the C/MPI/PVM test programs.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::setup::setup;
use crate::util::{root, run};

/// `cargo xtask build`: setup, then the tracer and the test programs.
pub(crate) fn build() -> Result<()> {
    setup()?;
    build_release()?;
    build_programs().map(|_| ())
}

/// The tracer, optimized (`target/release/tracer`), with the probes embedded.
pub(crate) fn build_release() -> Result<()> {
    run(Command::new("cargo")
        .current_dir(root())
        .args(["build", "--release", "-p", "tracer-user"]))
}

/// Builds one test program (`NAME.openmpi`, `NAME.mpich`, or a threads program's
/// name) into target/test-programs; returns its path.
pub(crate) fn build_program(name: &str) -> Result<PathBuf> {
    let path = root().join("target/test-programs").join(name);
    run(Command::new("make")
        .current_dir(root().join("tests/programs"))
        .arg(format!(
            "OUT={}",
            root().join("target/test-programs").display()
        ))
        .arg("-s")
        .arg(&path))?;
    Ok(path)
}

/// Builds the C/MPI/PVM test programs; returns their directory.
pub(crate) fn build_programs() -> Result<PathBuf> {
    let out = root().join("target/test-programs");
    run(Command::new("make")
        .current_dir(root().join("tests/programs"))
        .arg(format!("OUT={}", out.display()))
        .arg("-s"))?;
    Ok(out)
}
