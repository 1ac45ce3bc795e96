//! What every stage uses: the workspace root and running commands.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The workspace root (xtask's parent directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs a command with inherited stdio, printing it first; fails unless it succeeds.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// Runs a command, returns its stdout; fails with its status and stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command quietly: its output is shown only if it fails (then in the error).
pub fn run_quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Runs a command as `run` does, ending it (its own process, by its pid) if it takes
/// longer than `limit`: a traced job that hangs must not hold a demo or a test forever.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{cmd:?} failed with {status}");
            }
            return Ok(());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} took more than {limit:?}: ended");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Open MPI's launcher as the demo runs it (as root, more ranks than CPUs allowed), up
/// to the rank count that follows.
pub const MPIRUN_NP: &[&str] = &[
    "mpirun.openmpi",
    "--allow-run-as-root",
    "--oversubscribe",
    "-np",
];
