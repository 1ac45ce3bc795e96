//! `cargo xtask test` (what CI runs, `.ci/run`): the formatting and lint checks, then
//! every test, unit then root-only integration. `cargo xtask lint` runs the checks alone.

use std::process::Command;

use anyhow::{bail, Result};

use crate::build::{build_programs, build_release};
use crate::setup::setup;
use crate::util::{root, run};

/// The crates clippy checks: all but the eBPF one (bpfel target, nightly; tracer-user's
/// build script compiles it, with the workspace's lints).
const HOST_CRATES: &[&str] = &[
    "tracer-common",
    "tracer-analysis",
    "tracer-user",
    "xtask",
    "tracer-tests",
];

/// `cargo xtask lint`: setup (clippy needs the eBPF toolchain: tracer-user's build script
/// builds the probes), then the checks `test` runs first.
pub(crate) fn lint() -> Result<()> {
    setup()?;
    checks()
}

/// `cargo xtask test`: setup, the formatting and lint checks, the test programs, the unit
/// tests, the bounded fuzz runs, then the release build and the integration tests.
pub(crate) fn test() -> Result<()> {
    setup()?;
    checks()?;
    build_programs()?;
    // Unit tests: no root needed (they read installed libraries and recordings; xtask's
    // check the benchmarks' arithmetic).
    run(Command::new("cargo").current_dir(root()).args([
        "test",
        "-p",
        "tracer-common",
        "-p",
        "tracer-analysis",
        "-p",
        "tracer-user",
        "-p",
        "xtask",
    ]))?;
    // Every reader under the fuzzer, a bounded time each (no root needed).
    let readers: Vec<String> = crate::fuzz::TEST_TARGETS
        .iter()
        .map(|t| t.to_string())
        .collect();
    crate::fuzz::fuzz(crate::fuzz::TEST_SECONDS, &readers)?;
    // Integration tests: real kernel, real runtimes, one at a time (2 cores), with the
    // tracer built as users run it (tests/src/lib.rs says why).
    build_release()?;
    run(Command::new("cargo").current_dir(root()).args([
        "test",
        "-p",
        "tracer-tests",
        "--",
        "--test-threads=1",
    ]))
}

/// rustfmt, clippy with every warning an error, then the layout rules; each failure is
/// one line.
fn checks() -> Result<()> {
    check(
        Command::new("cargo")
            .current_dir(root())
            .args(["fmt", "--all", "--check"]),
        "formatting differs from rustfmt's (`cargo fmt --all --check`, diff above): run `cargo fmt --all`",
    )?;
    let mut clippy = Command::new("cargo");
    clippy.current_dir(root()).args(["clippy", "--all-targets"]);
    for c in HOST_CRATES {
        clippy.args(["-p", c]);
    }
    check(
        clippy.args(["--", "-D", "warnings"]),
        "clippy found problems (`cargo clippy --all-targets -- -D warnings` on the host crates, above); the lints are in Cargo.toml's [workspace.lints]",
    )?;
    // The fuzz targets are a workspace of their own (cargo-fuzz): neither rustfmt nor
    // clippy above sees them, and an API change would otherwise first break the fuzz step.
    check(
        Command::new("cargo")
            .current_dir(root().join("fuzz"))
            .args(["fmt", "--check"]),
        "the fuzz targets' formatting differs from rustfmt's: run `cd fuzz && cargo fmt`",
    )?;
    check(
        Command::new("cargo")
            .current_dir(root().join("fuzz"))
            .args(["+nightly", "check", "--bins"]),
        "the fuzz targets do not build (`cd fuzz && cargo +nightly check --bins`, above)",
    )?;
    crate::layout::check()
}

/// Runs `cmd` as `run` does; on failure, says `what` in one line.
fn check(cmd: &mut Command, what: &str) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => bail!("{what} [{s}]"),
        Err(e) => bail!("could not run {cmd:?}: {e}"),
    }
}
