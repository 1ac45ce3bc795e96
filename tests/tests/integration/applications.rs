//! Real applications that nobody here wrote, as Debian ships them: LAMMPS (a
//! Lennard-Jones melt, tests/apps/in.lj), GROMACS (a water box, tests/apps/gromacs: MPI
//! ranks of OpenMP threads, its library without a symbol table), hpcc
//! (tests/apps/hpccinf.txt: HPL, PTRANS, RandomAccess, FFT, STREAM, latency/bandwidth)
//! and an mpi4py program (Python ranks, MPI loaded with dlopen). Debian builds them all
//! against Open MPI only.
//!
//! Each run must hold what a user relies on: nothing lost; every message matched and
//! every collective complete; every rank known; the critical path no longer than the
//! run and no shorter than any participant thread's own work; every procedure's share at
//! most the path and its zeroing at most its share; the online profile, `analyze` and
//! `report` agree; `report`, `metrics` and `export` finish in bounded time; no probe
//! failed (a failure can corrupt results without losing an event). The message counts
//! of LAMMPS and GROMACS are also checked against an independent count taken in the
//! same run (tests/programs/pmpi_count.c, preloaded into the ranks).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracer_tests::netlab::{collect, ranks_with_their_nodes, token_file, Agent, NetLab};
use tracer_tests::profile::{check_report, tracer_json};
use tracer_tests::{program, root, tracer};
use xtask::lammps;

/// What one traced application run left.
struct AppRun {
    dir: PathBuf,
    recording: PathBuf,
    online: Value,
    summary: Value,
    /// What `tracer record` printed on stderr (with the application's own output), for
    /// the failure messages.
    printed: String,
}

/// Runs `command` (an `mpirun.openmpi` job) under `tracer record` in `cwd`.
fn record_app(tag: &str, funcs: &[&str], command: &[String], cwd: &Path) -> AppRun {
    let dir = std::env::temp_dir().join(format!("tracer-app-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let recording = dir.join("app.trace");
    let online = dir.join("online.json");
    let summary = dir.join("summary.json");
    let mut cmd = Command::new(tracer());
    cmd.current_dir(cwd)
        .args(["record", "-q", "-o"])
        .arg(&recording)
        .arg("--profile-json")
        .arg(&online)
        .arg("--summary-json")
        .arg(&summary);
    for f in funcs {
        cmd.args(["--func", f]);
    }
    cmd.arg("--").args(command);
    let out = bounded(&mut cmd, Duration::from_secs(300));
    assert!(
        out.status.success(),
        "tracer record {tag}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    AppRun {
        online: read(&online),
        summary: read(&summary),
        printed: String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
        recording,
    }
}

/// Runs a command to completion, failing the test if it takes longer than `limit`.
fn bounded(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Drain the pipes on threads of their own: a full pipe would stall the child.
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (read_all(Box::new(out)), read_all(Box::new(err)));
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return std::process::Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{cmd:?} took more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn openmpi_job(np: usize, args: &[&str]) -> Vec<String> {
    [
        "mpirun.openmpi",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(std::iter::once(np.to_string()))
    .chain(args.iter().map(|s| s.to_string()))
    .collect()
}

/// The promises every application run keeps (see the module's doc).
fn check_application(run: &AppRun, ranks: usize) {
    let p = &run.online;
    assert_eq!(p["events"]["lost"], 0, "events lost");
    let m = &p["messages"];
    assert_eq!(m["unmatched"], 0, "unmatched messages: {m}");
    assert_eq!(
        m["collectives_incomplete"], 0,
        "incomplete collectives: {m}"
    );
    assert_eq!(m["sent"], m["matched"], "{m}");
    assert_eq!(m["received"], m["matched"], "{m}");
    // Every rank known, each once.
    let mut known: Vec<i64> = run.summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["rank"].as_i64())
        .collect();
    known.sort();
    assert_eq!(
        known,
        (0..ranks as i64).collect::<Vec<_>>(),
        "{}",
        run.summary
    );

    // The same answer online, offline and in the report (check_report: equal length,
    // shares and zeroing; the path's activities add up to it; what-if of the top
    // procedure at 0 predicts its zeroing).
    let analyze = tracer_json(&["analyze"], &run.recording);
    assert_eq!(*p, analyze, "online and offline profiles differ");
    let report = report_bounded(&run.recording);
    check_report(p, &report, &run.recording);
    // No probe failed, and no thread's calls had to be put back in order.
    assert!(
        report["critical_path"].get("probe_failures").is_none(),
        "{}",
        report["critical_path"]
    );
    assert!(
        p["events"].get("calls_resynchronised").is_none(),
        "{}",
        p["events"]
    );

    // The path is at most the run, and at least any participant thread's own work.
    let len = p["critical_path"]["length_ns"].as_u64().unwrap();
    let elapsed = p["critical_path"]["elapsed_ns"].as_u64().unwrap();
    assert!(len <= elapsed, "path {len} ns > elapsed {elapsed} ns");
    let participants: Vec<u64> = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    let most_work = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| participants.contains(&t["pid"].as_u64().unwrap()))
        .map(|t| t["work_ns"].as_u64().unwrap())
        .max()
        .expect("participant threads");
    assert!(
        len >= most_work,
        "path {len} ns < a thread's work {most_work} ns"
    );
    for row in p["procedures"].as_array().unwrap() {
        let (share, zero) = (
            row["cp_ns"].as_u64().unwrap(),
            row["zeroing_ns"].as_u64().unwrap(),
        );
        assert!(share <= len && zero <= share, "{row}");
    }

    // Metrics and an export, in bounded time.
    for args in [
        vec!["metrics".to_string(), "--json".into()],
        vec![
            "export".into(),
            "--format".into(),
            "chrome".into(),
            "-o".into(),
            run.dir.join("app.json").display().to_string(),
        ],
    ] {
        let out = bounded(
            Command::new(tracer()).args(&args).arg(&run.recording),
            Duration::from_secs(120),
        );
        assert!(
            out.status.success(),
            "tracer {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn report_bounded(recording: &Path) -> Value {
    let out = bounded(
        Command::new(tracer())
            .args(["report", "--paths", "5", "--json"])
            .arg(recording),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// An independent count of the messages a job's ranks send: tests/programs/pmpi_count.c,
/// preloaded into every rank, writes `sends N` to `rank-R.txt` in its directory.
struct PmpiCount {
    dir: PathBuf,
}

impl PmpiCount {
    fn new(tag: &str) -> PmpiCount {
        let dir =
            std::env::temp_dir().join(format!("tracer-app-{}-{tag}-pmpi", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        PmpiCount { dir }
    }

    /// The `mpirun.openmpi` options that preload the counter into the ranks.
    fn mpirun_options(&self) -> Vec<String> {
        vec![
            "-x".into(),
            format!("LD_PRELOAD={}", program("pmpi_count.openmpi.so")),
            "-x".into(),
            format!("PMPI_COUNT_DIR={}", self.dir.display()),
        ]
    }

    /// The messages sent by ranks 0 to `ranks - 1`, as they counted them.
    fn sends(&self, ranks: usize) -> u64 {
        (0..ranks)
            .map(|r| {
                let text = std::fs::read_to_string(self.dir.join(format!("rank-{r}.txt"))).unwrap();
                text.trim()
                    .strip_prefix("sends ")
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum()
    }
}

impl Drop for PmpiCount {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn lammps_lennard_jones_melt() {
    // The demo's run (xtask's `lammps` module: its command, input and procedures), on 3
    // ranks and with the independent count.
    let counts = PmpiCount::new("lammps");
    let ranks = 3;
    let mut args = counts.mpirun_options();
    args.extend(lammps::LMP.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let procedures = lammps::procedures();
    let run = record_app(
        "lammps",
        &procedures.each_ref().map(String::as_str),
        &openmpi_job(ranks, &args),
        &lammps::apps_dir(),
    );
    check_application(&run, ranks);
    // The force computation is where LAMMPS spends its time: most of the path.
    let p = &run.online;
    let len = p["critical_path"]["length_ns"].as_u64().unwrap();
    let pair_row = p["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == lammps::PAIR_COMPUTE_NAME)
        .expect("PairLJCut::compute probed");
    assert_eq!(pair_row["symbol"], lammps::PAIR_COMPUTE, "{pair_row}");
    assert!(pair_row["cp_ns"].as_u64().unwrap() * 2 > len, "{pair_row}");
    let sends = counts.sends(ranks);
    assert!(sends > 1000, "{sends} sends");
    assert_eq!(p["messages"]["sent"], sends, "tracer vs PMPI count");
    let _ = std::fs::remove_dir_all(&run.dir);
}

/// LAMMPS with a rank on each of the two "nodes" of the lab (network namespaces, TCP
/// between them), traced live: an agent in the second namespace, the collector in the
/// first launching the job. Every message matched across the nodes, equal to the
/// independent PMPI count, nothing lost, each rank on its node (docs/multinode.md).
#[test]
fn lammps_across_two_nodes_traced_live_matches_every_message() {
    let lab = NetLab::unshaped();
    let counts = PmpiCount::new("lammps-nodes");
    let dir = std::env::temp_dir().join(format!("tracer-app-{}-lammps-nodes", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let token = token_file(&dir, "the-lab-token");
    let agent = Agent::start(
        lab.namespace(1),
        &format!("{}:7421", lab.address(1)),
        &token,
        &[],
    );
    let ranks = 2;
    let mut command = lab.openmpi_launcher(ranks);
    command.extend(counts.mpirun_options());
    command.extend(lammps::LMP.iter().map(|s| s.to_string()));
    let (rec, live) = (dir.join("job.trace"), dir.join("live.json"));
    let out = collect(
        lab.namespace(0),
        &agent.collector_args(&token, &rec, &live),
        &command,
        &lammps::apps_dir(),
        Duration::from_secs(300),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "collector: {said}");
    assert!(!said.contains("warning"), "{said}");
    let p: Value = serde_json::from_slice(&std::fs::read(&live).unwrap()).unwrap();
    assert_eq!(p["events"]["lost"], 0, "events lost");
    let m = &p["messages"];
    assert_eq!(m["unmatched"], 0, "unmatched messages: {m}");
    assert_eq!(m["collectives_incomplete"], 0, "{m}");
    assert_eq!(m["sent"], m["matched"], "{m}");
    assert_eq!(m["received"], m["matched"], "{m}");
    let sends = counts.sends(ranks);
    assert!(sends > 1000, "{sends} sends");
    assert_eq!(m["sent"], sends, "tracer vs PMPI count");
    let report = tracer_json(&["report"], &rec);
    assert_eq!(
        ranks_with_their_nodes(&report),
        [(0, 0), (1, 1)],
        "{}",
        report["processes"]
    );
    agent.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `gmx_mpi` (GROMACS built for Open MPI) with `args` in `dir`, to completion.
fn gmx(dir: &Path, args: &[&str]) {
    let out = bounded(
        Command::new("gmx_mpi")
            .current_dir(dir)
            .env("GMX_MAXBACKUP", "-1")
            .args(args),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "gmx_mpi {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn gromacs_water_box() {
    // A 3 nm box of 884 water molecules (gmx solvate), 500 steps of 2 fs with PME; 2
    // ranks of 2 OpenMP threads. Debian's libgromacs has no symbol table: its outlined
    // functions are probed as their regions first start, while the threads run. Its
    // message count varies from run to run (dynamic load balancing), hence the count
    // in the same run.
    let work = std::env::temp_dir().join(format!("tracer-app-{}-gromacs-cwd", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    for file in ["topol.top", "md.mdp"] {
        std::fs::copy(
            root().join("tests/apps/gromacs").join(file),
            work.join(file),
        )
        .unwrap();
    }
    gmx(
        &work,
        &[
            "solvate",
            "-cs",
            "spc216.gro",
            "-box",
            "3",
            "3",
            "3",
            "-o",
            "water.gro",
            "-p",
            "topol.top",
        ],
    );
    gmx(
        &work,
        &[
            "grompp",
            "-f",
            "md.mdp",
            "-c",
            "water.gro",
            "-p",
            "topol.top",
            "-o",
            "md.tpr",
        ],
    );
    let counts = PmpiCount::new("gromacs");
    let ranks = 2;
    let mut args = counts.mpirun_options();
    args.extend(
        [
            "-x",
            "OMP_NUM_THREADS=2",
            "-x",
            "GMX_MAXBACKUP=-1",
            "gmx_mpi",
            "mdrun",
            "-s",
            "md.tpr",
            "-ntomp",
            "2",
            "-nb",
            "cpu",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = record_app("gromacs", &[], &openmpi_job(ranks, &args), &work);
    assert!(
        work.join("confout.gro").exists(),
        "mdrun wrote no final coordinates"
    );
    check_application(&run, ranks);
    // Halo exchanges (MPI_Sendrecv) and the PME grid's transposes (MPI_Alltoall) at
    // every step.
    let sends = counts.sends(ranks);
    assert!(sends > 1000, "{sends} sends");
    assert_eq!(
        run.online["messages"]["sent"], sends,
        "tracer vs PMPI count"
    );
    let calls = &run.summary["calls"];
    assert!(calls["MPI_Alltoall"].as_u64() >= Some(2 * 500), "{calls}");
    // The OpenMP regions are seen: the masters join their teams.
    assert!(
        run.online["sync"]["omp_joins"].as_u64() >= Some(2 * 500),
        "{}\n{}",
        run.online["sync"],
        run.printed
    );
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&run.dir);
}

#[test]
fn hpcc_small_problem() {
    // hpcc reads hpccinf.txt and writes hpccoutf.txt in its working directory.
    let work = std::env::temp_dir().join(format!("tracer-app-{}-hpcc-cwd", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(
        root().join("tests/apps/hpccinf.txt"),
        work.join("hpccinf.txt"),
    )
    .unwrap();
    let ranks = 2;
    let run = record_app("hpcc", &[], &openmpi_job(ranks, &["hpcc"]), &work);
    let out = std::fs::read_to_string(work.join("hpccoutf.txt")).unwrap();
    assert!(out.contains("Success=1"), "hpcc itself failed:\n{out}");
    check_application(&run, ranks);
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&run.dir);
}

#[test]
fn mpi4py_ranks() {
    let ranks = 3;
    let script = root().join("tests/apps/mpi4py_exchange.py");
    let run = record_app(
        "mpi4py",
        &[],
        &openmpi_job(ranks, &["/usr/bin/python3", script.to_str().unwrap(), "20"]),
        &std::env::temp_dir(),
    );
    check_application(&run, ranks);
    // Python loads MPI with dlopen: still every call from MPI_Init_thread on is seen.
    let calls = &run.summary["calls"];
    assert_eq!(calls["MPI_Init_thread"], ranks, "{calls}");
    assert_eq!(calls["MPI_Finalize"], ranks, "{calls}");
    let _ = std::fs::remove_dir_all(&run.dir);
}
