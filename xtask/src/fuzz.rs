//! `cargo xtask fuzz`: every reader under libFuzzer (cargo-fuzz on the nightly) for a
//! bounded time each, on a copy of the corpus kept in the repository (fuzz/corpus/TARGET),
//! plus the inputs of past findings (fuzz/regressions/TARGET, named, never merged away):
//! what a run finds stays in target/ and never dirties the tree. A crash, a hang or an
//! allocation past the limits fails the run with the reproducer's path.
//! `cargo xtask test` runs it with [`TEST_SECONDS`] per target.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util::{root, run};

/// The fuzz targets (fuzz/fuzz_targets/NAME.rs), what each reads.
pub(crate) const TARGETS: &[&str] = &[
    // The recording reader (format/recording.rs), decoding and skimming.
    "recording",
    // The record decoder (format/records.rs): recording, ring and slot forms.
    "records",
    // `NetworkTable::parse` and its lookups (predict/network.rs).
    "network_table",
    // `--placement` (predict/placement.rs).
    "placement",
    // `--scale` (graph/whatif.rs).
    "scale",
    // Read + the whole analysis: profile, graph, metrics, report.
    "analysis",
];

/// The targets `cargo xtask test` runs: every reader. Not yet `analysis`: each run of it
/// still finds another sum or product of a damaged recording's times that overflows in
/// the analysis (with overflow checks; a release build wraps), and a test must not fail
/// by chance; `cargo xtask fuzz --target analysis` runs it.
pub(crate) const TEST_TARGETS: &[&str] = &[
    "recording",
    "records",
    "network_table",
    "placement",
    "scale",
];

/// Seconds per target in `cargo xtask test`: five targets add about three minutes to CI
/// (with the build).
pub(crate) const TEST_SECONDS: u64 = 30;

/// The limits every run has: one input may take 10 s and a single allocation 512 MB, the
/// whole process 2 GB; past that libFuzzer stops with a reproducer, as for a panic.
const LIMITS: &[&str] = &["-timeout=10", "-rss_limit_mb=2048", "-malloc_limit_mb=512"];

/// Runs `targets` (all when empty) for `seconds` each.
pub(crate) fn fuzz(seconds: u64, targets: &[String]) -> Result<()> {
    let chosen = chosen(targets)?;
    let fuzz_dir = root().join("fuzz");
    let work = root().join("target/fuzz");
    for target in chosen {
        let corpus = work.join("corpus").join(target);
        let artifacts = work.join("artifacts").join(target);
        // A fresh copy each run: inputs found last time are not kept (merge them by
        // hand, `cargo xtask fuzz --minimize`, if they are worth keeping).
        let _ = std::fs::remove_dir_all(&corpus);
        copy_dir(&fuzz_dir.join("corpus").join(target), &corpus)?;
        std::fs::create_dir_all(&artifacts)?;
        let mut cmd = cargo_fuzz();
        cmd.args(["run", target]).arg(&corpus);
        // libFuzzer writes new inputs to the first directory only.
        let regressions = fuzz_dir.join("regressions").join(target);
        if regressions.is_dir() {
            cmd.arg(regressions);
        }
        cmd.arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .args(LIMITS);
        eprintln!("xtask: {cmd:?}");
        let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
        if !status.success() {
            let found = std::fs::read_dir(&artifacts)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            bail!(
                "fuzz target {target} failed [{status}]: reproducer {found}; replay it with \
                 `cd fuzz && cargo +nightly fuzz run {target} FILE`"
            );
        }
    }
    Ok(())
}

/// Minimizes the corpus kept in the repository (`-merge=1`: the smallest set of inputs
/// that covers what all of them cover), adding what the last runs found in target/fuzz.
pub(crate) fn minimize(targets: &[String]) -> Result<()> {
    let fuzz_dir = root().join("fuzz");
    for target in chosen(targets)? {
        let kept = fuzz_dir.join("corpus").join(target);
        let found = root().join("target/fuzz/corpus").join(target);
        let merged = root().join("target/fuzz/merged").join(target);
        let _ = std::fs::remove_dir_all(&merged);
        std::fs::create_dir_all(&merged)?;
        let mut cmd = cargo_fuzz();
        cmd.args(["run", target]).arg(&merged).arg(&kept);
        if found.is_dir() {
            cmd.arg(&found);
        }
        run(cmd.args(["--", "-merge=1"]).args(LIMITS))?;
        std::fs::remove_dir_all(&kept)?;
        copy_dir(&merged, &kept)?;
    }
    Ok(())
}

/// cargo-fuzz on the nightly, in fuzz/ (its own workspace).
fn cargo_fuzz() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root().join("fuzz"))
        .args(["+nightly", "fuzz"]);
    cmd
}

fn chosen(targets: &[String]) -> Result<Vec<&'static str>> {
    if let Some(t) = targets.iter().find(|t| !TARGETS.contains(&t.as_str())) {
        bail!("no fuzz target {t} (there are: {})", TARGETS.join(", "));
    }
    Ok(TARGETS
        .iter()
        .copied()
        .filter(|t| targets.is_empty() || targets.iter().any(|c| c == t))
        .collect())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}
