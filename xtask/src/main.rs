//! Project automation. `cargo xtask setup` installs everything a fresh machine lacks
//! (idempotent and quick when it is all there); `test`, `demo` and `bench` run setup first.

mod bench;

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
    /// The overhead and throughput suite (docs/benchmarks.md): probe cost against empty
    /// programs, application slowdown, analyzer throughput, a live event flood, memory,
    /// recording size; then the offline graph analyses on a 10-million-arc graph.
    Bench {
        /// Only these stages (comma-separated or repeated).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<bench::Stage>,
        /// Runs of each configuration (default per stage: floor 5, slowdown 2,
        /// throughput 5, memory 2; flood and size run once).
        #[arg(long)]
        reps: Option<usize>,
        /// Seconds of each slowdown run's loop.
        #[arg(long, default_value_t = 1.0)]
        slowdown_secs: f64,
        /// Message rates of the slowdown stage (comma-separated; default 150,1000,10000).
        #[arg(long, value_delimiter = ',')]
        slowdown_rates: Vec<u64>,
        /// Numbers of selected procedures of the slowdown stage (comma-separated, each
        /// 0, 1, 8 or 32; default all four).
        #[arg(long, value_delimiter = ',', value_parser = procedure_count)]
        slowdown_procs: Vec<usize>,
        /// Seconds of the live flood (the documented figure uses 60).
        #[arg(long, default_value_t = 60.0)]
        flood_secs: f64,
        /// Events per second of the flood (and of the first recording-size run).
        #[arg(long, default_value_t = 500_000)]
        flood_rate: u64,
        /// Seconds of the shorter memory run; the longer runs ten times as long.
        #[arg(long, default_value_t = 2.0)]
        memory_secs: f64,
        /// Only the offline graph analyses (no root or MPI needed); same as --only graph.
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
    // Real applications the tests trace (tests/tests/applications.rs).
    "lammps",
    "hpcc",
    "python3-mpi4py",
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
        Cmd::Bench {
            only,
            reps,
            slowdown_secs,
            slowdown_rates,
            slowdown_procs,
            flood_secs,
            flood_rate,
            memory_secs,
            ..
        } => bench(
            &only,
            &bench::Options {
                reps,
                slowdown_secs,
                slowdown_rates,
                slowdown_procs,
                flood_secs,
                flood_rate,
                memory_secs,
            },
        ),
    }
}

/// `--slowdown-procs`: one of the selections the slowdown stage knows.
fn procedure_count(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(n @ (0 | 1 | 8 | 32)) => Ok(n),
        _ => Err(format!("{s:?}: want 0, 1, 8 or 32")),
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

/// The overhead and throughput suite (bench.rs), then the offline graph analyses.
fn bench(only: &[bench::Stage], opts: &bench::Options) -> Result<()> {
    use bench::Stage;
    let all = [
        Stage::Floor,
        Stage::Slowdown,
        Stage::Throughput,
        Stage::Flood,
        Stage::Memory,
        Stage::Size,
        Stage::Graph,
    ];
    let stages: Vec<Stage> = if only.is_empty() {
        all.to_vec()
    } else {
        all.into_iter().filter(|s| only.contains(s)).collect()
    };
    if stages.iter().any(|s| *s != Stage::Graph) {
        setup()?;
        build_release()?;
        let target = bench::target_dir(&root());
        let programs = target.join("test-programs");
        run(Command::new("make")
            .current_dir(root().join("tests/programs"))
            .arg(format!("OUT={}", programs.display()))
            .arg("-s"))?;
        let scratch = std::env::temp_dir().join("tracer-bench");
        std::fs::create_dir_all(&scratch)?;
        let env = bench::Env {
            tracer: std::env::var_os("XTASK_BENCH_TRACER")
                .map(PathBuf::from)
                .unwrap_or_else(|| target.join("release/tracer")),
            baseline: std::env::var_os("XTASK_BENCH_BASELINE").map(PathBuf::from),
            programs,
            scratch,
        };
        for &stage in stages.iter().filter(|s| **s != Stage::Graph) {
            bench::run_stage(stage, &env, opts)?;
        }
    }
    if stages.contains(&Stage::Graph) {
        graph_bench()?;
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
