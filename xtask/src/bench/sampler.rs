//! The `sampler` stage: what sampling call stacks (`tracer record --sample HZ`, on by
//! default at 99 Hz) adds on top of tracing without it, and how fast the report
//! attributes samples to the critical path.
//!
//! - Slowdown: the slowdown stage's program (`bench_slowdown.mpich`, one rank on CPU 1,
//!   the tracer on CPU 0) at its three message rates, untraced, traced with `--sample 0`
//!   and traced with `--sample 99`, alternating; the sampler's share is the difference
//!   of the two traced slowdowns, in points of the untraced loop's CPU time.
//! - Attribution: `tracer report --json` on a recording of two spinning MPI ranks
//!   sampled at a high rate, in samples per second of the report's wall time.

use std::process::Command;

use anyhow::Result;

use super::{command, field, load, timed, Env, Mode, SlowdownLoop, Stats, RATES};
use crate::util::output;

/// Sampling rate of the slowdown runs: the default of `tracer record`.
const DEFAULT_HZ: &str = "99";
/// Sampling rate of the attribution recording: many samples from a short run.
const DENSE_HZ: &str = "4999";

pub(super) fn sampler(env: &Env, reps: usize, secs: f64) -> Result<()> {
    slowdown(env, reps, secs)?;
    attribution(env, reps)
}

fn slowdown(env: &Env, reps: usize, secs: f64) -> Result<()> {
    let work = SlowdownLoop::calibrated(env)?;
    println!(
        "bench_slowdown.mpich, one rank on CPU 1, tracer on CPU 0, {secs} s loops, no \
         selected procedure; slowdown = loop CPU time traced / untraced - 1; {reps} rounds, \
         each: untraced, `--sample 0`, `--sample {DEFAULT_HZ}`; load average {}.\n",
        load()
    );
    println!(
        "| msgs/s (nominal) | slowdown %, --sample 0 | slowdown %, --sample {DEFAULT_HZ} | sampler adds (points) |"
    );
    println!("|---|---|---|---|");
    for &rate in &RATES {
        let argv = work.argv(rate, secs);
        let cpu_secs = |mode: Mode, hz: &str| -> Result<f64> {
            let extra = if mode == Mode::Untraced {
                vec![]
            } else {
                vec!["--sample".to_string(), hz.to_string()]
            };
            field(
                &output(&mut command(env, mode, &extra, &argv, true))?,
                "cpu_secs",
            )
        };
        let (mut off, mut on, mut added) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            let base = cpu_secs(Mode::Untraced, "0")?;
            let without = (cpu_secs(Mode::Ours, "0")? / base - 1.0) * 100.0;
            let with = (cpu_secs(Mode::Ours, DEFAULT_HZ)? / base - 1.0) * 100.0;
            off.push(without);
            on.push(with);
            added.push(with - without);
        }
        println!(
            "| {rate} | {} | {} | {} |",
            Stats::of(&off).show(2),
            Stats::of(&on).show(2),
            Stats::of(&added).show(2)
        );
    }
    Ok(())
}

fn attribution(env: &Env, reps: usize) -> Result<()> {
    let rec = env.scratch.join("sampled.trace");
    output(
        Command::new(&env.tracer)
            .args(["record", "-q", "--sample", DENSE_HZ, "-o"])
            .arg(&rec)
            .args(["--", "mpirun.mpich", "-np", "2"])
            .arg(env.programs.join("mpi_busy.mpich"))
            .args(["400", "10"]),
    )?;
    // Counted from the records themselves, whatever the summary calls them.
    let dump = output(Command::new(&env.tracer).arg("dump").arg(&rec))?;
    let samples = dump
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "sample"))
        .count();
    let mut rates = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..reps {
        let mut c = Command::new(&env.tracer);
        c.args(["report", "--json"]).arg(&rec);
        let t = timed(&c)?;
        rates.push(samples as f64 / t.wall_s);
        rss.push(t.peak_kib / 1024.0);
    }
    println!(
        "\n`tracer report --json` on one recording of `tracer record --sample {DENSE_HZ} -- \
         mpirun.mpich -np 2 mpi_busy.mpich 400 10`, {reps} runs; load average {}.\n",
        load()
    );
    println!("| samples | samples/s of report time | peak RSS MiB |");
    println!("|---|---|---|");
    println!(
        "| {samples} | {} | {} |",
        Stats::of(&rates).show(0),
        Stats::of(&rss).show(1)
    );
    Ok(())
}
