//! `cargo xtask test` (what CI runs, `.ci/run`): every test, unit then root-only
//! integration.

use std::process::Command;

use anyhow::Result;

use crate::build::{build_programs, build_release};
use crate::setup::setup;
use crate::util::{root, run};

/// `cargo xtask test`: setup, the test programs, the unit tests, then the release build
/// and the integration tests.
pub fn test() -> Result<()> {
    setup()?;
    build_programs()?;
    // Unit tests: no root needed (they read installed libraries and recordings).
    run(Command::new("cargo").current_dir(root()).args([
        "test",
        "-p",
        "tracer-common",
        "-p",
        "tracer-user",
    ]))?;
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
