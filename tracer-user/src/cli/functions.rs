//! `tracer functions PID|BINARY`: what could be selected with `--func` (docs/functions.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::print::say;
use clap::Args;
use serde::Serialize;
use tracer_analysis::ms_text;
use tracer_user::candidates::{self, Candidate, ProfileRanks, Target};

#[derive(Args)]
pub(super) struct FunctionsArgs {
    /// A running process (its executable) or an executable or shared object file (a
    /// number is a PID: write `./123` for a file named 123).
    target: String,
    /// Rank by CPU time from a profile (`tracer record --profile-json`, `tracer analyze
    /// --json`) and show each procedure's share of the critical path.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Also list the program's own shared objects (not libc, the dynamic linker, libm,
    /// compiler runtimes, MPI or PVM, nor anything in the system library directories).
    #[arg(long)]
    all: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Output<'a> {
    target: &'a str,
    profile: Option<String>,
    functions: &'a [Candidate],
}

fn location(c: &Candidate) -> String {
    match (&c.file, c.line) {
        (Some(f), Some(l)) => format!("{f}:{l}"),
        (Some(f), None) => f.clone(),
        _ => "-".into(),
    }
}

fn ms(ns: Option<u64>) -> String {
    ns.map(ms_text).unwrap_or_else(|| "-".into())
}

pub(super) fn run(a: FunctionsArgs) -> anyhow::Result<ExitCode> {
    let target = Target::parse(&a.target);
    let mut list = candidates::list(&target, a.all)?;
    let matched = match &a.profile {
        Some(p) => Some(candidates::rank_by_profile(
            &mut list,
            &ProfileRanks::read(p)?,
        )),
        None => None,
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    if a.json {
        let o = Output {
            target: &a.target,
            profile: a.profile.as_ref().map(|p| p.display().to_string()),
            functions: &list,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&o)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let several_objects = list.windows(2).any(|w| w[0].object != w[1].object);
    let mut lines = Vec::with_capacity(list.len() + 1);
    let object = |c: &Candidate| {
        if several_objects {
            format!("  [{}]", c.object)
        } else {
            String::new()
        }
    };
    if matched.is_some() {
        lines.push(format!(
            "{:>10} {:>7} {:>10} {:>7}  {:<32} location",
            "cpu ms", "size", "cp ms", "cp %", "function"
        ));
        for c in &list {
            lines.push(format!(
                "{:>10} {:>7} {:>10} {:>7}  {:<32} {}{}",
                ms(c.cpu_ns),
                c.size,
                ms(c.cp_ns),
                c.cp_pct
                    .map(|p| format!("{p:.2}"))
                    .unwrap_or_else(|| "-".into()),
                c.name,
                location(c),
                object(c)
            ));
        }
    } else {
        lines.push(format!("{:>7}  {:<32} location", "size", "function"));
        for c in &list {
            lines.push(format!(
                "{:>7}  {:<32} {}{}",
                c.size,
                c.name,
                location(c),
                object(c)
            ));
        }
    }
    for l in lines {
        if writeln!(out, "{l}").is_err() {
            break; // closed pipe (e.g. `| head`)
        }
    }
    if let Some(n) = matched {
        say!("{} functions, {n} of them in the profile", list.len());
    } else if let (false, Some(first)) = (several_objects, list.first()) {
        say!("{} functions in {}", list.len(), first.object);
    } else {
        say!("{} functions", list.len());
    }
    Ok(ExitCode::SUCCESS)
}
