//! `tracer metrics` on real MPI and threaded programs whose answers are known by
//! construction: the ring's exact message matrix, CPU time of threads spinning a known
//! amount of CPU, and the time a rank waits in MPI_Recv or MPI_Allreduce behind a slower
//! rank.
//!
//! Tolerance for times: 5 % of the expected value or 10 ms, whichever is larger (the
//! critical-path tests' rule: start-up outside the constructed part adds a few ms).
//! Blocked times are wall time, which other load on the machine stretches; they are
//! compared with the slower rank's measured procedure durations (wall time too), which
//! stretch the same way, and the nominal value is printed beside them.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tracer_analysis::recording::Item;
use tracer_analysis::records::Record;
use tracer_analysis::{Measures, Metrics, ProcessMetrics};
use tracer_common::call;
use tracer_tests::{mpich, openmpi, program, pvm, read_recording, tracer, Traced};

/// Records `command` (with `--func` selections), then computes the metrics twice: with
/// the library on the recording, and with `tracer metrics --json`; both must agree.
fn metrics(tag: &str, funcs: &[&str], command: &[String]) -> (Metrics, Traced) {
    let (m, t, _) = metrics_and_output(tag, funcs, command);
    (m, t)
}

/// [`metrics`], and what the traced command printed on its standard output.
fn metrics_and_output(tag: &str, funcs: &[&str], command: &[String]) -> (Metrics, Traced, String) {
    let dir = std::env::temp_dir().join(format!("tracer-metrics-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("r.trace");
    let mut cmd = Command::new(tracer());
    cmd.args(["record", "-q", "-o"]).arg(&rec);
    for f in funcs {
        cmd.args(["--func", f]);
    }
    let out = cmd.arg("--").args(command).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = tracer_metrics(&rec, true);
    // Shown only when the test fails.
    eprintln!("{}", String::from_utf8_lossy(&tracer_metrics(&rec, false)));
    let t = read_recording(&rec);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(t.lost, 0);
    let mut m = Metrics::from_items(&t.items, &t.meta);
    // The command also names the call sites (function, file and line).
    m.locate_sites(&mut tracer_user::Symbolizer::new());
    let cli: Value = serde_json::from_slice(&json).unwrap();
    let lib = serde_json::to_value(&m).unwrap();
    assert!(
        same(&cli, &lib),
        "tracer metrics --json and the library differ:\n{cli:#}\n{lib:#}"
    );
    assert_eq!(cli["schema_version"], 1);
    (m, t, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Times of the exits of procedure `name` in process `pid`, in order.
fn procedure_exits(t: &Traced, pid: u32, name: &str) -> Vec<u64> {
    let ids: Vec<u16> = t
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Probe(p) if p.symbol == name => Some(p.id),
            _ => None,
        })
        .collect();
    let mut v: Vec<u64> = t
        .records()
        .filter_map(|r| match r {
            Record::FuncExit(h) if h.tgid == pid && ids.contains(&h.call) => Some(h.ts_ns),
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
}

/// Entry times of call `id` in process `pid`, in order.
fn call_entries(t: &Traced, pid: u32, id: u16) -> Vec<u64> {
    let mut v: Vec<u64> = t
        .calls_of(id)
        .iter()
        .filter(|c| c.pid == pid)
        .map(|c| c.entry.header.ts_ns)
        .collect();
    v.sort_unstable();
    v
}

/// What a rank waits for in total when its i-th call `waits` (entered at `asks[i]`) can
/// only return once the other rank has finished its i-th stage (at `ready[i]`).
fn expected_wait_ms(asks: &[u64], ready: &[u64]) -> f64 {
    assert_eq!(asks.len(), ready.len());
    asks.iter()
        .zip(ready)
        .map(|(&a, &r)| ms(r.saturating_sub(a)))
        .sum()
}

/// Equal JSON values, floats within parsing error (the ratios are printed and read back).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        _ => a == b,
    }
}

fn tracer_metrics(rec: &Path, json: bool) -> Vec<u8> {
    let mut cmd = Command::new(tracer());
    cmd.arg("metrics").arg(rec);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn assert_near(what: &str, got_ms: f64, want_ms: f64) {
    let tol = (want_ms * 0.05).max(10.0);
    assert!(
        (got_ms - want_ms).abs() <= tol,
        "{what}: {got_ms:.3} ms, want {want_ms:.3} ms ± {tol:.1}"
    );
}

/// The MPI ranks, by rank: every rank 0..n exactly once, all in the program.
fn ranks(m: &Metrics, n: usize) -> Vec<&ProcessMetrics> {
    let mut v: Vec<&ProcessMetrics> = m.processes.iter().filter(|p| p.rank.is_some()).collect();
    v.sort_by_key(|p| p.rank);
    let got: Vec<i32> = v.iter().map(|p| p.rank.unwrap()).collect();
    assert_eq!(got, (0..n as i32).collect::<Vec<_>>());
    assert!(v.iter().all(|p| p.participant));
    assert_eq!(m.program.processes, n, "launchers are not the program");
    v
}

/// The ratios follow from the times, at every level.
fn assert_ratios(what: &str, x: &Measures, cpus: u32) {
    let (e, c, w) = (x.elapsed_ns as f64, x.cpu_ns as f64, x.cpu_wait_ns as f64);
    // A ratio with a zero denominator is absent.
    let close = |a: Option<f64>, n: f64, d: f64| match a {
        Some(a) => d > 0.0 && (a - n / d).abs() <= 1e-9 * (n / d).max(1.0),
        None => d == 0.0,
    };
    assert!(close(x.parallelism, c, e), "{what}: parallelism {x:?}");
    assert!(
        close(x.response_ratio, e, c),
        "{what}: response ratio {x:?}"
    );
    assert!(
        close(x.utilization, c, e * cpus as f64),
        "{what}: utilization {x:?}"
    );
    assert!(close(x.load_factor, c + w, c), "{what}: load factor {x:?}");
    assert!(x.work_ns <= x.cpu_ns, "{what}: work {x:?}");
    let b = &x.blocked;
    assert_eq!(
        b.total_ns,
        b.message_ns + b.collective_ns + b.futex_ns + b.other_ns,
        "{what}"
    );
}

/// The number after `prefix` on a line of a program's output.
fn printed_ms(stdout: &str, prefix: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} line: {stdout:?}"))
}

fn procedure<'a>(m: &'a Metrics, name: &str) -> &'a tracer_analysis::ProcedureMetrics {
    m.procedures
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no procedure {name}"))
}

/// A procedure's (calls, elapsed ms, cpu ms) in process `pid`.
fn procedure_in(m: &Metrics, name: &str, pid: u32) -> (u64, f64, f64) {
    procedure(m, name)
        .processes
        .iter()
        .find(|r| r.pid == pid)
        .map(|r| (r.calls, ms(r.elapsed_ns), ms(r.cpu_ns)))
        .unwrap_or((0, 0.0, 0.0))
}

/// The message matrix as (from rank, to rank, messages, bytes), in matrix order.
fn rank_pairs(m: &Metrics) -> Vec<(i32, i32, u64, u64)> {
    m.traffic
        .processes
        .iter()
        .map(|p| {
            (
                p.from_rank.unwrap(),
                p.to_rank.unwrap(),
                p.messages,
                p.bytes,
            )
        })
        .collect()
}

fn ring(tag: &str, launch: fn(usize, &str, &[&str]) -> Vec<String>) {
    let (n, rounds, bytes) = (4usize, 10u64, 256u64);
    let (m, _) = metrics(tag, &[], &launch(n, "mpi_ring", &["10", "256"]));
    let ranks = ranks(&m, n);
    let t = &m.traffic;
    // Exactly one pair per rank: rank i sends `rounds` messages of `bytes` to i + 1.
    let mut pairs = rank_pairs(&m);
    pairs.sort();
    let want: Vec<(i32, i32, u64, u64)> = (0..n as i32)
        .map(|i| (i, (i + 1) % n as i32, rounds, rounds * bytes))
        .collect();
    assert_eq!(pairs, want, "the message matrix");
    for p in &t.processes {
        let from = ranks[p.from_rank.unwrap() as usize].pid;
        let to = ranks[p.to_rank.unwrap() as usize].pid;
        assert_eq!((p.from_pid, p.to_pid), (from, to));
    }
    let total = rounds * n as u64;
    assert_eq!(
        (t.messages, t.bytes, t.messages_unknown_size),
        (total, total * bytes, 0)
    );
    assert_eq!(t.matching.unmatched, 0);
    assert_eq!(t.latency.count, total);
    assert!(t.latency.p50_ns <= t.latency.p90_ns && t.latency.p99_ns <= t.latency.max_ns);
    assert_eq!(t.machines.len(), 1, "one host");
    assert_eq!(
        (t.machines[0].messages, t.machines[0].bytes),
        (total, total * bytes)
    );
    assert_eq!(t.machines[0].from, m.machines[0].name);
    // Every send and receive is one blocking interval, a message wait.
    for name in ["MPI_Send", "MPI_Recv"] {
        let c = m.calls.iter().find(|c| c.name == name).unwrap();
        assert_eq!(c.blocked.count, total, "{name}");
        assert_eq!(c.cause, tracer_analysis::Cause::Message);
        // Two source lines per call in mpi_ring.c (rank 0's branch: `rounds` calls, the
        // other ranks' branch: 3 x `rounds`), each one site across all ranks.
        let mut sites: Vec<(u64, &str)> = m
            .call_sites
            .iter()
            .filter(|s| s.name == name)
            .map(|s| (s.blocked.count, s.location.as_deref().unwrap_or_default()))
            .collect();
        sites.sort();
        assert_eq!(sites.len(), 2, "{sites:#?}");
        assert_eq!((sites[0].0, sites[1].0), (rounds, 3 * rounds), "{sites:#?}");
        for (_, at) in &sites {
            assert!(
                at.starts_with("main at ") && at.contains("mpi_ring.c:"),
                "{at}"
            );
        }
    }
    assert!(m.program.blocked.message_ns > 0);
    assert_eq!(m.program.blocked.collective_ns, 0);
    assert_ratios("program", &m.program, m.cpus);
    for p in &m.processes {
        assert_ratios(&format!("pid {}", p.pid), &p.measures, m.cpus);
    }
    let text = m.text();
    assert!(text.contains("messages from\\to"), "{text}");
}

#[test]
fn ring_matrix_openmpi() {
    ring("ring-ompi", openmpi);
}

#[test]
fn ring_matrix_mpich() {
    ring("ring-mpich", mpich);
}

/// Time the hypervisor took from this machine's vCPUs so far, all CPUs together, in ms
/// (`/proc/stat`'s steal column, in USER_HZ ticks of 10 ms).
fn host_steal_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu = stat.lines().next().unwrap();
    let steal: u64 = cpu.split_whitespace().nth(8).unwrap().parse().unwrap();
    steal as f64 * 10.0
}

/// Two threads spin 200 ms of CPU each in work(): the process's CPU time is 400 ms plus
/// the main thread's little; a spinning thread is always running or runnable, so its
/// elapsed time is its CPU time plus its CPU wait, plus what the host stole from its vCPU
/// while it ran: the kernel leaves steal out of a thread's CPU time (paravirtual steal
/// accounting) and no switch marks it, so it is in neither (a CI run saw a worker's
/// elapsed time 14.6 ms above its CPU time and CPU wait). The steal of all CPUs over the
/// run bounds it.
#[test]
fn busy_threads_cpu_time_and_parallelism() {
    let (n, spin) = (2u64, 200.0);
    let steal_before = host_steal_ms();
    let (m, _) = metrics(
        "busy-threads",
        &["work"],
        &[program("threads_busy"), n.to_string(), "200".into()],
    );
    // One tick more: the counts are whole ticks, read at any point of one.
    let steal = host_steal_ms() - steal_before + 10.0;
    assert_eq!(m.processes.len(), 1);
    let p = &m.processes[0];
    assert_eq!(p.measures.threads, n as usize + 1);
    assert_near("process CPU", ms(p.measures.cpu_ns), n as f64 * spin);
    let work = procedure(&m, "work");
    assert_eq!(work.calls, n, "work() entered once per thread");
    assert_eq!(work.duration.count, n);
    assert_near("CPU in work()", ms(work.cpu_ns), n as f64 * spin);
    let workers: Vec<&Measures> = m
        .threads
        .iter()
        .filter(|t| t.tid != p.pid)
        .map(|t| &t.measures)
        .collect();
    assert_eq!(workers.len(), n as usize);
    for w in &workers {
        assert_near("worker CPU", ms(w.cpu_ns), spin);
        let (elapsed, accounted) = (ms(w.elapsed_ns), ms(w.cpu_ns + w.cpu_wait_ns));
        let tol = (accounted * 0.05).max(10.0);
        assert!(
            elapsed >= accounted - tol && elapsed <= accounted + tol + steal,
            "worker elapsed {elapsed:.3} ms, CPU + CPU wait {accounted:.3} ms \
             (± {tol:.1} ms, plus up to {steal:.0} ms stolen by the host meanwhile)"
        );
        assert_eq!(w.blocked.total_ns, 0, "a spinning thread never blocks");
    }
    // The main thread joins: it waits on a futex while the workers run.
    let main = &m.threads.iter().find(|t| t.tid == p.pid).unwrap().measures;
    assert!(ms(main.blocked.futex_ns) > 0.5 * spin, "{main:?}");
    // Parallelism: the known CPU over the measured elapsed time, never above the CPUs.
    assert_eq!(m.program, p.measures, "the program is this process");
    assert_ratios("program", &m.program, m.cpus);
    let par = m.program.parallelism.unwrap();
    let want = ms(m.program.cpu_ns) / ms(m.program.elapsed_ns);
    assert!((par - want).abs() < 1e-9);
    assert!(
        par <= m.cpus as f64 + 0.01,
        "parallelism {par} on {} CPUs",
        m.cpus
    );
    eprintln!(
        "parallelism {par:.2}, load factor {:.2}",
        m.program.load_factor.unwrap()
    );
}

/// Two MPICH ranks each spin ITERS x MS ms in compute() and pass a token in exchange():
/// the CPU time of its compute() calls, which the rank prints, is compute()'s CPU time,
/// and the work of its main thread (CPU outside MPI calls) is what the rank counts outside
/// them (start-up is work too: the dynamic loader, a few ms that a loaded machine
/// stretches), from its exec record to its exit record; compute and exchange are entered
/// exactly ITERS times per rank. The answer is the program's own clock, not ITERS x MS: the kernel may
/// charge a stall of the host to a spinning thread, whose spin then ends late by its own
/// clock (docs/design-decisions.md; a CI run saw both ranks' work at 244 ms, one compute
/// of each 80 ms long).
#[test]
fn mpi_busy_work_time_and_call_counts() {
    let (iters, spin) = (5u64, 40.0);
    let (m, t, stdout) = metrics_and_output(
        "busy-mpi",
        &["compute", "exchange"],
        &mpich(2, "mpi_busy", &["5", "40"]),
    );
    for p in ranks(&m, 2) {
        let rank = p.rank.unwrap();
        let who = format!("rank {rank}");
        let own = printed_ms(&stdout, &format!("rank {rank} compute_cpu_ms "));
        assert!(own >= iters as f64 * spin, "{who} spun {own} ms");
        // The main thread's work is its CPU time outside MPI calls as it counted it up to
        // MPI_Finalize's return, less what it ran before its exec record (the launcher's
        // fork, the exec itself), plus what it ran from that return to its exit.
        let outside = printed_ms(&stdout, &format!("rank {rank} outside_mpi_cpu_ms "));
        let main_thread_cpu_at = |what: &str, found: Option<u64>| {
            ms(found.unwrap_or_else(|| panic!("{who}: no {what} record")))
        };
        let exec = main_thread_cpu_at(
            "exec",
            t.records().find_map(|r| match r {
                Record::Exec(e) if e.header.tid == p.pid => Some(e.header.cpu_ns),
                _ => None,
            }),
        );
        let finalized = main_thread_cpu_at(
            "MPI_Finalize exit",
            t.calls_of(call::MPI_FINALIZE)
                .iter()
                .find(|c| c.tid == p.pid)
                .map(|c| c.exit.header.cpu_ns),
        );
        let exit = main_thread_cpu_at(
            "exit",
            t.records().find_map(|r| match r {
                Record::Exit(e) if e.header.tid == p.pid => Some(e.header.cpu_ns),
                _ => None,
            }),
        );
        let main_thread = m.threads.iter().find(|t| t.tid == p.pid).unwrap();
        let work = ms(main_thread.measures.work_ns);
        let want = outside - exec + (exit - finalized);
        eprintln!(
            "{who}: main thread's work {work:.3} ms; outside MPI {outside:.3} ms, \
             {exec:.3} of it before exec, {:.3} after MPI_Finalize",
            exit - finalized
        );
        // Each MPI call's entry and return traps run on the thread's clock inside the
        // program's count of the call and outside the tracer's (the probes stamp the
        // call after the trap): up to ~10 us a call here, measured.
        let calls = 4 + 2 * iters;
        let tol = 2.0 + 0.02 * calls as f64;
        assert!(
            (work - want).abs() <= tol,
            "{who}: main thread's work {work:.3} ms, want {want:.3} ± {tol:.2}"
        );
        assert!(p.measures.work_ns >= main_thread.measures.work_ns);
        assert!(p.measures.cpu_ns >= p.measures.work_ns);
        let (calls, _, cpu) = procedure_in(&m, "compute", p.pid);
        assert_eq!(calls, iters, "{who}: compute calls");
        assert_near(&format!("{who} compute CPU"), cpu, own);
        assert_eq!(
            procedure_in(&m, "exchange", p.pid).0,
            iters,
            "{who}: exchange calls"
        );
        assert_ratios(&who, &p.measures, m.cpus);
    }
    assert_eq!(procedure(&m, "compute").calls, 2 * iters);
    assert_eq!(procedure(&m, "compute").duration.count, 2 * iters);
    // The token: one message each way per iteration.
    let pairs = rank_pairs(&m);
    assert_eq!(pairs, vec![(0, 1, iters, iters), (1, 0, iters, iters)]);
}

/// A two-rank pipeline, rank 0 slow (S ms per item), rank 1 fast (F ms): rank 1 asks
/// for each item (MPI_Recv) before rank 0 has finished it, and waits until it has: S for
/// the first item and S - F for the others, nominally S + (ITEMS-1)(S-F). Other load on
/// the machine stretches the stages (their spins count CPU time), so the expected wait is
/// taken from the recorded stage ends and receive starts; the nominal one is printed.
#[test]
fn pipeline_message_wait() {
    let (items, s, f) = (5u64, 60.0, 20.0);
    let (m, t) = metrics(
        "pipe",
        &["stage_*"],
        &mpich(2, "mpi_pipeline", &["5", "0", "60", "20"]),
    );
    let r = ranks(&m, 2);
    assert_eq!(procedure_in(&m, "stage_slow", r[0].pid).0, items);
    assert_eq!(procedure_in(&m, "stage_fast", r[1].pid).0, items);
    let want = expected_wait_ms(
        &call_entries(&t, r[1].pid, call::MPI_RECV),
        &procedure_exits(&t, r[0].pid, "stage_slow"),
    );
    let nominal = s + (items - 1) as f64 * (s - f);
    let got = ms(r[1].measures.blocked.message_ns);
    eprintln!(
        "rank 1 message wait {got:.3} ms; recorded stages give {want:.3}, nominal {nominal:.3}"
    );
    assert_near("rank 1 message wait", got, want);
    let first = ms(r[0].measures.blocked.message_ns);
    assert!(first < 10.0, "rank 0 only sends, eagerly: {first:.3} ms");
    assert_eq!(m.program.blocked.collective_ns, 0);
    let recv = m.calls.iter().find(|c| c.name == "MPI_Recv").unwrap();
    assert_eq!(recv.blocked.count, items);
    assert_eq!(m.traffic.messages, items);
}

/// Imbalance behind a collective, two ranks: rank 0 runs heavy(A), rank 1 light(B), then
/// both meet in MPI_Allreduce; rank 1 waits there until rank 0 has finished heavy(),
/// nominally A - B per iteration (expected from the recorded ends of heavy() and entries
/// of MPI_Allreduce, as above).
#[test]
fn imbalance_collective_wait() {
    let (iters, a, b) = (4u64, 60.0, 20.0);
    let (m, t) = metrics(
        "imbalance",
        &["heavy", "light"],
        &mpich(2, "mpi_imbalance", &["4", "60", "20"]),
    );
    let r = ranks(&m, 2);
    assert_eq!(procedure_in(&m, "heavy", r[0].pid).0, iters);
    assert_eq!(procedure_in(&m, "light", r[1].pid).0, iters);
    let want = expected_wait_ms(
        &call_entries(&t, r[1].pid, call::MPI_ALLREDUCE),
        &procedure_exits(&t, r[0].pid, "heavy"),
    );
    let nominal = iters as f64 * (a - b);
    let got = ms(r[1].measures.blocked.collective_ns);
    eprintln!(
        "rank 1 collective wait {got:.3} ms; recorded stages give {want:.3}, nominal {nominal:.3}"
    );
    assert_near("rank 1 collective wait", got, want);
    // Rank 0 arrives last; it waits only if rank 1 is off its CPU just then.
    let first = ms(r[0].measures.blocked.collective_ns);
    assert!(first < (0.1 * got).max(10.0), "rank 0 waits {first:.3} ms");
    assert_eq!(m.program.blocked.message_ns, 0);
    let allreduce = m.calls.iter().find(|c| c.name == "MPI_Allreduce").unwrap();
    assert_eq!(allreduce.blocked.count, 2 * iters);
    assert_eq!(allreduce.cause, tracer_analysis::Cause::Collective);
    // Every rank calls Allreduce from one line: one site for both ranks.
    let sites: Vec<_> = m
        .call_sites
        .iter()
        .filter(|s| s.name == "MPI_Allreduce")
        .collect();
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(sites[0].blocked.count, 2 * iters);
    assert!(sites[0]
        .object
        .as_deref()
        .unwrap()
        .ends_with("mpi_imbalance.mpich"));
}

/// PVM manager/worker (tests/programs/pvm_master.c): per round the master sends every
/// worker 4 packed ints (16 bytes) and each replies with 2 (8 bytes); then one multicast
/// of 1 int (4 bytes) to all and one pvm_psend of 8 ints (32 bytes) back from each.
#[test]
fn pvm_matrix() {
    let (workers, rounds) = (3u64, 4u64);
    let (m, _) = metrics(
        "pvm",
        &[],
        &pvm(&[&workers.to_string(), &rounds.to_string()]),
    );
    // Task ids come from pvm_mytid (the `pvm` console that halts the daemon has one too).
    let task = |name: &str| -> Vec<u32> {
        m.processes
            .iter()
            .filter(|p| p.pvm_tid.is_some() && p.command.contains(name))
            .map(|p| p.pid)
            .collect()
    };
    assert_eq!(task("pvm_worker").len() as u64, workers);
    let master = task("pvm_master")[0];
    let mut to_master = 0;
    for p in &m.traffic.processes {
        if p.from_pid == master {
            assert_eq!(
                (p.messages, p.bytes),
                (rounds + 1, 16 * rounds + 4),
                "{p:?}"
            );
        } else {
            assert_eq!(p.to_pid, master, "workers talk only to the master: {p:?}");
            assert_eq!(
                (p.messages, p.bytes),
                (rounds + 1, 8 * rounds + 32),
                "{p:?}"
            );
            to_master += 1;
        }
    }
    assert_eq!(to_master, workers);
    assert_eq!(m.traffic.processes.len() as u64, 2 * workers);
    assert_eq!(m.traffic.messages, 2 * workers * (rounds + 1));
    assert_eq!(m.traffic.messages_unknown_size, 0);
    assert_eq!(m.traffic.matching.unmatched, 0);
}

#[test]
fn corrupt_recording_is_one_line() {
    let dir = std::env::temp_dir().join(format!("tracer-metrics-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("bad.trace");
    // A header, then the first chunk's header cut short (its sync word and half a tag).
    let mut bytes = tracer_analysis::recording::MAGIC.to_vec();
    bytes.extend(tracer_analysis::recording::VERSION.to_le_bytes());
    bytes.extend([0, 0, 0, 0]);
    bytes.extend(tracer_analysis::recording::SYNC);
    bytes.extend([1, 0]);
    std::fs::write(&rec, bytes).unwrap();
    let out = Command::new(tracer())
        .arg("metrics")
        .arg(&rec)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("truncated") && err.contains("bad.trace"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// One thread's work as `tracer metrics --json` or `tracer report --json` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ThreadWork {
    tid: u64,
    work_ns: u64,
}

/// The `threads` of a metrics or report JSON document, by tid.
fn thread_work(doc: &Value) -> Vec<ThreadWork> {
    let mut rows: Vec<ThreadWork> = doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| ThreadWork {
            tid: t["tid"].as_u64().unwrap(),
            work_ns: t["work_ns"].as_u64().unwrap(),
        })
        .collect();
    rows.sort_unstable();
    rows
}

fn tracer_report_json(rec: &Path) -> Value {
    let out = Command::new(tracer())
        .args(["report", "--json"])
        .arg(rec)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A thread's work is the same in `tracer metrics` and `tracer report`: both count it
/// from where the analysis starts the thread (a launched rank at its exec, not at the
/// launcher's fork before it; a thread cloned while traced at its clone) to its exit
/// (not the kernel's teardown after it). Exactly, on real recordings of MPI ranks with
/// threads (Open MPI and MPICH launchers, helper threads, pthreads created and joined
/// every round).
#[test]
fn thread_work_agrees_with_the_report() {
    // With the least number of threads that work: the ranks' main threads, and in the
    // hybrid run the 2 threads each rank creates in each of 5 rounds.
    let jobs = [
        (
            "hybrid-mpich",
            mpich(2, "hybrid_mpi_threads", &["2", "5", "40", "10", "-1"]),
            2 + 2 * 2 * 5,
        ),
        ("ring-openmpi", openmpi(2, "mpi_ring", &["200", "64"]), 2),
    ];
    for (tag, job, working_threads) in jobs {
        let dir = std::env::temp_dir().join(format!("tracer-work-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rec = dir.join("r.trace");
        let out = Command::new(tracer())
            .args(["record", "-q", "-o"])
            .arg(&rec)
            .arg("--")
            .args(&job)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{tag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(read_recording(&rec).lost, 0, "{tag}");
        let metrics = thread_work(&serde_json::from_slice(&tracer_metrics(&rec, true)).unwrap());
        let report = thread_work(&tracer_report_json(&rec));
        // The report lists the threads that did work; the metrics list every thread.
        let working: Vec<ThreadWork> = metrics.into_iter().filter(|t| t.work_ns > 0).collect();
        assert_eq!(working, report, "{tag}: metrics, then report");
        assert!(report.len() >= working_threads, "{tag}: {report:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
