//! Project automation. `cargo xtask setup` installs everything a fresh machine lacks
//! (idempotent and quick when it is all there); `test`, `demo` and `bench` run setup first.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install Debian packages, the nightly's rust-src and bpf-linker (idempotent).
    Setup,
    /// Build the tracer (release) and the test programs.
    Build,
    /// Run every test: unit tests, then the root-only integration tests.
    Test,
    /// Trace a bundled MPI program and print what the tracer found.
    Demo,
    /// Probe cost (per-call time of MPI calls traced vs untraced, alternating runs),
    /// engine throughput, and the offline graph analyses on a 10-million-arc graph.
    Bench {
        /// Runs of each configuration (medians are reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Calls per run.
        #[arg(long, default_value_t = 200_000)]
        calls: usize,
        /// Only the offline graph analyses (no root or MPI needed).
        #[arg(long)]
        graph_only: bool,
    },
}

/// Debian packages: the parallel runtimes the tests trace, and tools.
const PACKAGES: &[&str] = &[
    "openmpi-bin",
    "libopenmpi-dev",
    "mpich",
    "libmpich-dev",
    "pvm",
    "pvm-dev",
    "pvm-examples",
    "make",
    "gfortran",
    "gcc",
    "bpftool",
    "time",
];

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Setup => setup(),
        Cmd::Build => {
            setup()?;
            build_release()?;
            build_programs().map(|_| ())
        }
        Cmd::Test => test(),
        Cmd::Demo => demo(),
        Cmd::Bench {
            graph_only: true, ..
        } => graph_bench(),
        Cmd::Bench { reps, calls, .. } => {
            bench(reps, calls)?;
            graph_bench()
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn setup() -> Result<()> {
    install_packages()?;
    install_rust_src()?;
    install_bpf_linker()?;
    Ok(())
}

fn install_packages() -> Result<()> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            let status = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !matches!(status, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn install_rust_src() -> Result<()> {
    if Command::new("rustc")
        .args(["+nightly", "--version"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
        ]))?;
    }
    let installed = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))?;
    if !installed.lines().any(|l| l.starts_with("rust-src")) {
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    Ok(())
}

/// bpf-linker must link against the same LLVM as the nightly rustc; build it against the
/// nightly's own libLLVM (see ../shared/docs/toolchain.md).
fn install_bpf_linker() -> Result<()> {
    let vv = output(Command::new("rustc").args(["+nightly", "-vV"]))?;
    let llvm_major = vv
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("rustc +nightly -vV printed no LLVM version")?
        .to_string();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let prefix = PathBuf::from(&home).join(".cache/ebpf-tracer/llvm");
    let stamp = prefix.join(format!("bpf-linker-llvm-{llvm_major}"));
    let linker_ok = Command::new("bpf-linker")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if linker_ok && stamp.exists() {
        return Ok(());
    }
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let lib = PathBuf::from(sysroot.trim()).join("lib");
    let libllvm = std::fs::read_dir(&lib)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libLLVM.so."))
        })
        .with_context(|| format!("no libLLVM.so.* in {}", lib.display()))?;
    let dest = prefix.join("lib");
    std::fs::create_dir_all(&dest)?;
    for link in [
        dest.join(libllvm.file_name().unwrap()),
        dest.join("libLLVM.so"),
    ] {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&libllvm, &link)?;
    }
    run(Command::new("cargo")
        .args([
            "+stable",
            "install",
            "bpf-linker",
            "--locked",
            "--force",
            "--no-default-features",
            "--features",
        ])
        .arg(format!("llvm-{llvm_major}"))
        .env("LLVM_PREFIX", &prefix))?;
    std::fs::write(&stamp, "")?;
    Ok(())
}

fn build_release() -> Result<()> {
    run(Command::new("cargo")
        .current_dir(root())
        .args(["build", "--release", "-p", "tracer-user"]))
}

/// Builds the C/MPI/PVM test programs; returns their directory.
fn build_programs() -> Result<PathBuf> {
    let out = root().join("target/test-programs");
    run(Command::new("make")
        .current_dir(root().join("tests/programs"))
        .arg(format!("OUT={}", out.display()))
        .arg("-s"))?;
    Ok(out)
}

fn test() -> Result<()> {
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
    // Integration tests: real kernel, real runtimes, one at a time (2 cores).
    run(Command::new("cargo").current_dir(root()).args([
        "build",
        "-p",
        "tracer-user",
        "--bin",
        "tracer",
    ]))?;
    run(Command::new("cargo").current_dir(root()).args([
        "test",
        "-p",
        "tracer-tests",
        "--",
        "--test-threads=1",
    ]))
}

fn demo() -> Result<()> {
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

/// Runs the probe-cost program once; returns (ns per MPI_Comm_rank, ns per
/// Isend+Recv+Wait iteration).
fn probe_cost_run(launch: &[String], traced: bool) -> Result<(f64, f64)> {
    let mut cmd = if traced {
        let mut c = Command::new(root().join("target/release/tracer"));
        c.args(["record", "-q", "--"]).args(launch);
        c
    } else {
        let mut c = Command::new(&launch[0]);
        c.args(&launch[1..]);
        c
    };
    let out = output(&mut cmd)?;
    let field = |name: &str| -> Result<f64> {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in {out:?}"))
    };
    Ok((field("comm_rank_ns=")?, field("isend_recv_wait_ns=")?))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bench(reps: usize, calls: usize) -> Result<()> {
    setup()?;
    build_release()?;
    let programs = build_programs()?;
    let n = calls.to_string();
    let mpis: [(&str, Vec<String>); 2] = [
        (
            "Open MPI",
            vec![
                "mpirun.openmpi".into(),
                "--allow-run-as-root".into(),
                "-np".into(),
                "1".into(),
                programs
                    .join("mpi_probe_cost.openmpi")
                    .display()
                    .to_string(),
                n.clone(),
            ],
        ),
        (
            "MPICH",
            vec![
                "mpirun.mpich".into(),
                "-np".into(),
                "1".into(),
                programs.join("mpi_probe_cost.mpich").display().to_string(),
                n.clone(),
            ],
        ),
    ];
    engine_throughput(&programs)?;
    println!();
    println!("| MPI | call | untraced ns/call | traced ns/call | probe cost ns/call | spread traced (min-max) |");
    println!("|---|---|---|---|---|---|");
    for (name, launch) in &mpis {
        let (mut u, mut t) = (Vec::new(), Vec::new());
        // Alternate untraced and traced runs so drift on a shared machine hits both.
        for _ in 0..reps {
            u.push(probe_cost_run(launch, false)?);
            t.push(probe_cost_run(launch, true)?);
        }
        for (label, pick, calls_per_iter) in [
            ("MPI_Comm_rank", 0usize, 1.0),
            ("Isend+Recv+Wait (3 calls)", 1, 3.0),
        ] {
            let get = |v: &Vec<(f64, f64)>| {
                v.iter()
                    .map(|p| if pick == 0 { p.0 } else { p.1 })
                    .collect::<Vec<f64>>()
            };
            let (uv, tv) = (get(&u), get(&t));
            let (um, tm) = (median(uv.clone()), median(tv.clone()));
            let lo = tv.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = tv.iter().cloned().fold(0.0, f64::max);
            println!(
                "| {name} | {label} | {um:.1} | {tm:.1} | {:.0} | {lo:.1}-{hi:.1} |",
                (tm - um) / calls_per_iter
            );
        }
    }
    Ok(())
}

/// The offline graph analyses (graph building, critical path method, k longest paths
/// against a baseline, maximum benefit) on a synthetic 10-million-arc trace graph, each
/// step in a process of its own (docs/benchmarks.md, "Offline graph analyses").
fn graph_bench() -> Result<()> {
    run(Command::new("cargo").current_dir(root()).args([
        "run",
        "--release",
        "-p",
        "tracer-user",
        "--example",
        "graph_bench",
        "--",
        "suite",
    ]))
}

/// Engine throughput: record a large real run once, then time `tracer analyze` on it
/// (decode + reorder + match + online engine, one thread) and read its peak memory.
fn engine_throughput(programs: &Path) -> Result<()> {
    let tracer = root().join("target/release/tracer");
    let dir = std::env::temp_dir().join("tracer-bench");
    std::fs::create_dir_all(&dir)?;
    let rec = dir.join("ring.trace");
    run(Command::new(&tracer)
        .args(["record", "-q", "--func", "compute", "-o"])
        .arg(&rec)
        .args(["--", "mpirun.mpich", "-np", "2"])
        .arg(programs.join("mpi_busy.mpich"))
        .args(["200000", "0.001"]))?;
    let bytes = std::fs::metadata(&rec)?.len();
    println!("| run | events | recording MiB | seconds | events/s | peak RSS MiB |");
    println!("|---|---|---|---|---|---|");
    for i in 0..3 {
        let start = std::time::Instant::now();
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(&tracer)
            .args(["analyze", "--json"])
            .arg(&rec)
            .output()?;
        let secs = start.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!(
                "tracer analyze failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let profile: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let events = profile["events"]["total"].as_u64().unwrap_or(0);
        let rss_kib: f64 = String::from_utf8_lossy(&out.stderr)
            .trim()
            .lines()
            .last()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0.0);
        println!(
            "| {} | {events} | {:.1} | {secs:.3} | {:.0} | {:.1} |",
            i + 1,
            bytes as f64 / (1 << 20) as f64,
            events as f64 / secs,
            rss_kib / 1024.0
        );
    }
    Ok(())
}
