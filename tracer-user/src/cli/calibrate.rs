//! `tracer calibrate`: measure a network cost table (docs/network-table.md) with an MPI
//! ping-pong between ranks 0 and 1, launched by the user's own launcher.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};

use super::print::say;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use tracer_analysis::network::{NetworkTable, Scope};
use tracer_user::session::{self, RunAs};

/// The ping-pong program, compiled at run time with the MPI the user picks.
const PINGPONG_C: &str = include_str!("../../assets/calibrate_pingpong.c");

const DEFAULT_SIZES: &str = "0,8,64,512,4096,32768,65536,262144,1048576";

#[derive(Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    /// Ranks 0 and 1 on the same node.
    Local,
    /// Ranks 0 and 1 on different nodes.
    Remote,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Scope {
        match s {
            ScopeArg::Local => Scope::Local,
            ScopeArg::Remote => Scope::Remote,
        }
    }
}

#[derive(Args)]
pub(super) struct CalibrateArgs {
    /// Write the table to FILE (standard output otherwise).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Merge the measured rows into the table already in FILE (rows of the same scope
    /// and size are replaced), e.g. to add remote rows to a table of local ones.
    #[arg(long, requires = "output")]
    append: bool,
    /// Label of the measured rows: ranks 0 and 1 on the same node or on different nodes.
    #[arg(long, value_enum, default_value = "local")]
    scope: ScopeArg,
    /// Message sizes in bytes, comma-separated.
    #[arg(long, value_name = "LIST", default_value = DEFAULT_SIZES, value_parser = parse_sizes)]
    sizes: Sizes,
    /// Most timed round trips per size.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    iterations: u32,
    /// Fewer round trips for a size when this many would take longer (at least 5 are
    /// timed).
    #[arg(long, value_name = "SECS", default_value_t = 0.5)]
    seconds_per_size: f64,
    /// Untimed round trips before each size.
    #[arg(long, value_name = "N", default_value_t = 3)]
    warmups: u32,
    /// The MPI compiler wrapper that builds the ping-pong program (e.g. mpicc.openmpi,
    /// mpicc.mpich); it must match the launcher's MPI.
    #[arg(long, value_name = "CMD", default_value = "mpicc")]
    mpicc: String,
    /// Build the program in DIR and keep it there (a directory every node sees, for
    /// remote rows); a temporary directory, removed afterwards, otherwise.
    #[arg(long, value_name = "DIR")]
    build_dir: Option<PathBuf>,
    /// Build and run the ping-pong as USER (a name or a numeric id). Under sudo the
    /// default is the user who ran sudo; `--user root` keeps root.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// The launcher, with its options; the program path and its arguments are appended
    /// (e.g. `-- mpirun.openmpi --allow-run-as-root -np 2`).
    #[arg(last = true, required = true, value_name = "LAUNCHER")]
    launcher: Vec<String>,
}

#[derive(Clone)]
pub(super) struct Sizes(Vec<u64>);

fn parse_sizes(s: &str) -> Result<Sizes, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let n: u64 = part
            .parse()
            .map_err(|_| format!("`{part}` is not a size in bytes"))?;
        if n > i32::MAX as u64 {
            return Err(format!("{n} is larger than an MPI count ({})", i32::MAX));
        }
        if !v.contains(&n) {
            v.push(n);
        }
    }
    Ok(Sizes(v))
}

/// One line of the ping-pong's output.
#[derive(Debug, PartialEq)]
struct Measured {
    bytes: u64,
    iterations: u64,
    median_ns: u64,
    mean_ns: u64,
}

pub(super) fn run(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    if a.seconds_per_size.is_nan() || a.seconds_per_size < 0.0 {
        bail!("--seconds-per-size must be >= 0");
    }
    // Read the table to merge into first: a bad one fails before minutes of measuring.
    let mut table = match &a.output {
        Some(out) if a.append && out.exists() => NetworkTable::load(out)?,
        _ => NetworkTable::default(),
    };

    let run_as = RunAs::resolve(a.user.as_deref())?.filter(|u| !u.is_root());
    let (dir, temporary, created) = match &a.build_dir {
        Some(d) => {
            let existed = d.exists();
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            (d.clone(), false, !existed)
        }
        None => {
            let d = std::env::temp_dir().join(format!("tracer-calibrate-{}", std::process::id()));
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            (d, true, true)
        }
    };
    // The user builds the program in it: a directory we made is theirs.
    if let Some(u) = run_as.as_ref().filter(|_| created) {
        u.chown(&dir)
            .with_context(|| format!("giving {} to {}", dir.display(), u.name))?;
    }
    let result = measure(&a, &dir, run_as.as_ref());
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let measured = result?;

    let scope = Scope::from(a.scope);
    for m in &measured {
        table.insert(scope, m.bytes, m.median_ns);
    }
    table.add_comment(&format!(
        "{scope}: tracer calibrate, half the median round trip per size (at least {} round trips each), launcher: {}",
        measured.iter().map(|m| m.iterations).min().unwrap_or(0),
        a.launcher.join(" ")
    ));
    let csv = table.to_csv();
    match &a.output {
        Some(out) => {
            write_atomically(out, &csv, run_as.as_ref())
                .with_context(|| format!("writing {}", out.display()))?;
            say!(
                "tracer: {} {scope} sizes measured; wrote {}",
                measured.len(),
                out.display()
            );
        }
        None => {
            std::io::stdout().write_all(csv.as_bytes())?;
        }
    }
    for m in &measured {
        say!(
            "  {scope} {:>9} bytes  {:>12.3} us one-way (median of {}, mean {:.3} us)",
            m.bytes,
            m.median_ns as f64 / 1e3,
            m.iterations,
            m.mean_ns as f64 / 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the program in `dir`, runs it under the launcher, parses its lines.
fn measure(a: &CalibrateArgs, dir: &Path, run_as: Option<&RunAs>) -> anyhow::Result<Vec<Measured>> {
    let source = dir.join("tracer-pingpong.c");
    let program = dir.join("tracer-pingpong");
    std::fs::write(&source, PINGPONG_C).with_context(|| format!("writing {}", source.display()))?;
    let as_user = |mut cmd: Command| {
        if let Some(u) = run_as {
            u.apply(&mut cmd);
        }
        cmd
    };
    let compiled = as_user(Command::new(&a.mpicc))
        .arg("-O2")
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .output();
    let compiled = match compiled {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "MPI compiler wrapper `{}` not found (name one with --mpicc, e.g. --mpicc mpicc.openmpi)",
            a.mpicc
        ),
        Err(e) => bail!("running `{}`: {e}", a.mpicc),
    };
    if !compiled.status.success() {
        bail!(
            "compiling the ping-pong program with `{}` failed ({}): {}",
            a.mpicc,
            status(&compiled),
            tail(&compiled.stderr)
        );
    }

    let sizes: Vec<String> = a.sizes.0.iter().map(u64::to_string).collect();
    let mut cmd = as_user(Command::new(&a.launcher[0]));
    cmd.args(&a.launcher[1..])
        .arg(&program)
        .arg(sizes.join(","))
        .arg(a.iterations.max(1).to_string())
        .arg(a.seconds_per_size.to_string())
        .arg(a.warmups.to_string())
        .stdin(std::process::Stdio::null());
    let launched = a.launcher.join(" ");
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("launcher `{}` not found", a.launcher[0])
        }
        Err(e) => bail!("running the launcher `{launched}`: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let PingPongOutput { ranks, measured } = parse_output(&stdout);
    if let Some(n) = ranks.filter(|&n| n < 2) {
        bail!(
            "the launcher `{launched}` started {n} rank{}; the ping-pong needs 2 (e.g. `-np 2`)",
            if n == 1 { "" } else { "s" }
        );
    }
    if !out.status.success() {
        bail!(
            "the launcher `{launched}` failed ({}): {}",
            status(&out),
            tail(&out.stderr)
        );
    }
    if ranks.is_none() {
        bail!(
            "the launcher `{launched}` ran, but the ping-pong printed nothing (does it start \
             the program it is given?): {}",
            tail(&out.stderr)
        );
    }
    let missing: Vec<&String> = sizes
        .iter()
        .filter(|s| !measured.iter().any(|m| m.bytes.to_string() == **s))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the ping-pong under `{launched}` measured no latency for size(s) {}: {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
            tail(&out.stderr)
        );
    }
    Ok(measured)
}

/// What the ping-pong printed: its rank count (if it printed it) and its measurements.
struct PingPongOutput {
    ranks: Option<u64>,
    measured: Vec<Measured>,
}

/// The rank count and the measurements in the ping-pong's output (other lines ignored).
fn parse_output(stdout: &str) -> PingPongOutput {
    let mut ranks = None;
    let mut measured = Vec::new();
    for line in stdout.lines() {
        let Some(rest) = line.trim().strip_prefix("tracer-pingpong ") else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            rest.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        if let Some(n) = field("ranks") {
            ranks = Some(n);
        } else if let (Some(bytes), Some(iterations), Some(median_ns), Some(mean_ns)) = (
            field("bytes"),
            field("iterations"),
            field("median_ns"),
            field("mean_ns"),
        ) {
            measured.push(Measured {
                bytes,
                iterations,
                median_ns,
                mean_ns,
            });
        }
    }
    PingPongOutput { ranks, measured }
}

fn status(o: &Output) -> String {
    match o.status.code() {
        Some(c) => format!("exit status {c}"),
        None => format!("{}", o.status),
    }
}

/// The last non-empty lines of a program's error output, on one line.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '-' || c == '*'))
        .collect();
    if lines.is_empty() {
        return "no error output".into();
    }
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    const MAX: usize = 400;
    if tail.len() > MAX {
        let mut cut = tail.len() - MAX;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        format!("...{}", &tail[cut..])
    } else {
        tail
    }
}

/// Written mode 0600 and given to `owner` (its comment names the launcher command line).
fn write_atomically(path: &Path, text: &str, owner: Option<&RunAs>) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    session::write_private(&tmp, text.as_bytes(), owner)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_pingpong_output() {
        let out = "noise\ntracer-pingpong ranks=2\n\
                   tracer-pingpong bytes=0 iterations=1000 median_ns=265 mean_ns=293 min_ns=219 max_ns=11050\n\
                   [vm:1] some warning\n\
                   tracer-pingpong bytes=65536 iterations=6 median_ns=34326979 mean_ns=35328776 min_ns=1 max_ns=2\n";
        let PingPongOutput { ranks, measured: m } = parse_output(out);
        assert_eq!(ranks, Some(2));
        assert_eq!(
            m,
            [
                Measured {
                    bytes: 0,
                    iterations: 1000,
                    median_ns: 265,
                    mean_ns: 293
                },
                Measured {
                    bytes: 65536,
                    iterations: 6,
                    median_ns: 34326979,
                    mean_ns: 35328776
                }
            ]
        );
        assert_eq!(parse_output("tracer-pingpong ranks=1\n").ranks, Some(1));
    }

    #[test]
    fn sizes_and_tails() {
        assert_eq!(parse_sizes("0, 8,8,1048576").unwrap().0, [0, 8, 1048576]);
        assert!(parse_sizes("8,1k").is_err());
        assert!(parse_sizes("4294967296").is_err());
        assert_eq!(tail(b"a\n\n---\nb\nc\nd\n"), "b | c | d");
        assert_eq!(tail(b""), "no error output");
    }
}
