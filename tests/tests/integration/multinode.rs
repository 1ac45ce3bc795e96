//! A job across nodes recorded node by node (docs/multinode.md): on the two-namespace lab
//! (tests/src/netlab.rs), an Open MPI job with a rank in each "node", each rank recorded
//! by a tracer of its own running in that rank's network namespace (as a node's tracer
//! would, `--pid` of the node's rank), and `tracer merge` making one recording of the
//! job, which the offline commands read as one program.
//!
//! The ranks run the gated pipeline (`mpi_pipeline ... GATE`, tests/programs): once
//! MPI_Init has returned they wait for the gate, so both tracers are attached before the
//! first item flows, and every message has its send on one node and its receive on the
//! other; they meet in a barrier before MPI_Finalize.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tracer_tests::netlab::{
    self as netlab, collect, ranks_with_their_nodes, report_text_names_each_rank_with_its_node,
    token_file, Agent, LabTracer, NetLab,
};
use tracer_tests::profile::{
    all_matched, all_matched_some_late, assert_near, length, ms, proc_row, tracer_json,
};
use tracer_tests::{program, tracer};

/// The pipeline's shape (tests/programs/mpi_pipeline.c): 5 items, rank 1 slow.
const ITEMS: f64 = 5.0;
const SLOW_MS: f64 = 60.0;
const FAST_MS: f64 = 20.0;

/// The ranks of the gated job: pid by world rank, for processes whose command line
/// holds `gate`.
fn rank_pids(gate: &str, mpi: Mpi) -> [u32; 2] {
    let mut pids = [0u32; 2];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(gate)
            || !String::from_utf8_lossy(&cmdline).contains("mpi_pipeline")
        {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let rank = environ
            .split(|&b| b == 0)
            .filter_map(|v| v.strip_prefix(mpi.rank_variable()))
            .find_map(|v| std::str::from_utf8(v).ok()?.parse::<usize>().ok());
        if let Some(r @ 0..=1) = rank {
            pids[r] = pid;
        }
    }
    assert!(pids.iter().all(|&p| p != 0), "ranks not found: {pids:?}");
    pids
}

/// Which MPI the job runs under, and the environment variable its launcher gives each
/// rank its world rank in.
#[derive(Clone, Copy)]
enum Mpi {
    OpenMpi,
    Mpich,
}

impl Mpi {
    fn rank_variable(self) -> &'static [u8] {
        match self {
            Mpi::OpenMpi => b"OMPI_COMM_WORLD_RANK=",
            Mpi::Mpich => b"PMI_RANK=",
        }
    }
}

#[test]
fn an_open_mpi_job_recorded_node_by_node_merges_into_one_critical_path() {
    recorded_node_by_node(Mpi::OpenMpi);
}

#[test]
fn an_mpich_job_recorded_node_by_node_merges_into_one_critical_path() {
    recorded_node_by_node(Mpi::Mpich);
}

fn recorded_node_by_node(mpi: Mpi) {
    let lab = NetLab::unshaped();
    let dir = std::env::temp_dir().join(format!(
        "tracer-multinode-{}-{}",
        std::process::id(),
        mpi.rank_variable()[0]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let gate = dir.join("gate");
    let gate_arg = gate.display().to_string();
    // `barrier`: the ranks meet before MPI_Finalize, and one MPICH leaves deadlocked in
    // it over UCX's TCP exits by itself (tests/programs/mpi_pipeline.c).
    let args = ["5", "1", "60", "20", gate_arg.as_str(), "barrier"];
    let cmd = match mpi {
        Mpi::OpenMpi => lab.openmpi(2, &program("mpi_pipeline.openmpi"), &args),
        Mpi::Mpich => lab.mpich(2, &program("mpi_pipeline.mpich"), &args),
    };
    let mut job = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let namespaces: Vec<String> = (0..2).map(|i| lab.namespace(i).to_string()).collect();
    let traces: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("node{i}.trace"))).collect();
    let tracers = record_each_rank(mpi, &gate, &namespaces, &traces);
    let start = Instant::now();
    while job.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = job.kill();
            panic!("the job did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(job.wait().unwrap().success());
    for t in tracers {
        t.finish(Duration::from_secs(60));
    }

    let all = dir.join("job.trace");
    merge(&traces, &all);

    let p = tracer_json(&["analyze"], &all);
    all_matched(&p);
    assert_eq!(p["messages"]["sent"], 5, "{}", p["messages"]);
    assert_eq!(p["messages"]["matched"], 5, "{}", p["messages"]);
    // 2 ranks: rank 0's first fast item, then rank 1's five slow ones.
    assert_near("critical path", length(&p), FAST_MS + ITEMS * SLOW_MS);
    assert_near(
        "stage_slow on the path",
        ms(&proc_row(&p, "stage_slow")["cp_ns"]),
        ITEMS * SLOW_MS,
    );
    let report = tracer_json(&["report"], &all);
    let top = &report["processes"][0];
    assert_eq!(top["rank"], 1, "the path runs through the slow rank: {top}");
    let ranks: Vec<i64> = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["rank"].as_i64())
        .collect();
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    assert_eq!(
        ranks_with_their_nodes(&report),
        [(0, 0), (1, 1)],
        "{report}"
    );
    report_text_names_each_rank_with_its_node(&all, &report);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_open_mpi_job_traced_live_by_a_collector_and_an_agent_has_one_critical_path() {
    let run = LiveRun::new(Mpi::OpenMpi, "plain", 5, &[], &[], None);
    sends_a_path_value_per_dependency_between_nodes(&run);
    run.has_the_pipelines_answer();
}

/// The next design simulated on the recording (`tracer path-values`): a value for each of
/// the 5 messages from rank 0 to rank 1, and for each exit from the barrier (one barrier,
/// two exits) on the other node's entry: 7 values; the path is the live one.
fn sends_a_path_value_per_dependency_between_nodes(run: &LiveRun) {
    let v = tracer_json(&["path-values"], &run.rec);
    assert_eq!(v["nodes"], 2, "{v}");
    assert_eq!(v["cross_node"], 7, "{v}");
    assert_eq!(
        v["critical_path_ns"], run.live["critical_path"]["length_ns"],
        "{v}"
    );
    let bytes = v["value_bytes"].as_u64().unwrap();
    assert!(bytes >= 7 * 10, "{v}");
}

#[test]
fn an_mpich_job_traced_live_by_a_collector_and_an_agent_has_one_critical_path() {
    let run = LiveRun::new(Mpi::Mpich, "plain", 5, &[], &[], None);
    run.has_the_pipelines_answer();
}

/// `--func` taken to the agent: the pipeline's slow stage runs only on the agent's node
/// (rank 1), probed there as the rank becomes traced, its fast stage only on the
/// collector's (rank 0). Live and from the recording, each gets its share of the one
/// critical path, and zeroing the slow stage what the construction says, as on one node
/// (`critical_path::pipeline_*`); each procedure is one procedure of the job.
#[test]
fn procedures_selected_on_the_collector_are_probed_on_every_node() {
    let funcs = ["--func", "stage_slow", "--func", "stage_fast"];
    let run = LiveRun::new(Mpi::OpenMpi, "funcs", 5, &[], &funcs, None);
    let offline = tracer_json(&["analyze"], &run.rec);
    for p in [&run.live, &offline] {
        all_matched(p);
        assert_near("critical path", length(p), FAST_MS + ITEMS * SLOW_MS);
        let (slow, fast) = (proc_row(p, "stage_slow"), proc_row(p, "stage_fast"));
        assert_near(
            "stage_slow on the path",
            ms(&slow["cp_ns"]),
            ITEMS * SLOW_MS,
        );
        assert_near("stage_fast on the path", ms(&fast["cp_ns"]), FAST_MS);
        assert_near("stage_fast CPU", ms(&fast["cpu_ns"]), ITEMS * FAST_MS);
        assert_near(
            "zeroing stage_slow",
            ms(&slow["zeroing_ns"]),
            ITEMS * SLOW_MS - (ITEMS - 1.0) * FAST_MS,
        );
        let rows = p["procedures"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "one row per procedure: {rows:?}");
    }
    run.clean_up();
}

/// The pipeline over three nodes, a rank on each, rank 1 (the first agent's node) the
/// slow stage, `--func` taken to both agents: the critical path is rank 0's first fast
/// item, rank 1's five slow ones and rank 2's last fast one, 2 x 20 + 5 x 60 ms; zeroing
/// the slow stage leaves 2 x 20 + 4 x 20 ms, as the construction says on one node
/// (tests/programs/mpi_pipeline.c); every message matched across the bridge.
#[test]
fn a_pipeline_over_three_nodes_has_the_answer_it_has_on_one_node() {
    pipeline_over_three_nodes(Mpi::OpenMpi);
}

/// The same under MPICH, its Hydra launching a proxy on each node.
#[test]
fn an_mpich_pipeline_over_three_nodes_has_the_answer_it_has_on_one_node() {
    pipeline_over_three_nodes(Mpi::Mpich);
}

fn pipeline_over_three_nodes(mpi: Mpi) {
    let funcs = ["--func", "stage_slow", "--func", "stage_fast"];
    let shape = PipelineShape {
        items: 5,
        slow_rank: 1,
        nodes: 3,
    };
    let run = LiveRun::gated_pipeline(mpi, "three", shape, &[], &funcs, None);
    let offline = tracer_json(&["analyze"], &run.rec);
    assert_eq!(
        offline["critical_path"]["length_ns"], run.live["critical_path"]["length_ns"],
        "online and offline lengths"
    );
    for p in [&run.live, &offline] {
        all_matched(p);
        assert_eq!(p["messages"]["sent"], 2 * 5, "{}", p["messages"]);
        assert_near("critical path", length(p), 2.0 * FAST_MS + ITEMS * SLOW_MS);
        let (slow, fast) = (proc_row(p, "stage_slow"), proc_row(p, "stage_fast"));
        assert_near(
            "stage_slow on the path",
            ms(&slow["cp_ns"]),
            ITEMS * SLOW_MS,
        );
        assert_near("stage_fast on the path", ms(&fast["cp_ns"]), 2.0 * FAST_MS);
        assert_near(
            "zeroing stage_slow",
            ms(&slow["zeroing_ns"]),
            ITEMS * SLOW_MS - (ITEMS - 1.0) * FAST_MS,
        );
    }
    every_rank_on_its_node(&run.rec, 3);
    let report = tracer_json(&["report"], &run.rec);
    assert_eq!(
        report["processes"][0]["rank"], 1,
        "the path runs through the slow rank"
    );
    assert!(!run.said.contains("warning"), "{}", run.said);
    assert!(run.said.contains(", 0 lost"), "{}", run.said);
    run.clean_up();
}

/// Load imbalance behind a collective, across nodes (tests/programs/mpi_imbalance.c: 4
/// times, rank 0 runs `heavy` for 60 ms on the collector's node while the other ranks
/// run `light` for 50 ms on the agents', then all meet in MPI_Allreduce): the path is
/// rank 0's `heavy` throughout, zeroing it gains only 4 x 10 ms (the others are close
/// behind), and `light` is never on it, as `critical_path::imbalance_*` finds on one
/// node.
#[test]
fn an_imbalance_across_nodes_has_the_answer_it_has_on_one_node() {
    imbalance_across(2);
}

#[test]
fn an_imbalance_across_three_nodes_has_the_answer_it_has_on_one_node() {
    imbalance_across(3);
}

fn imbalance_across(nodes: usize) {
    let (iters, a, b) = (4.0, 60.0, 50.0);
    let funcs = ["--func", "heavy", "--func", "light"];
    let program = Program {
        name: "mpi_imbalance",
        args: &["4", "60", "50"],
        nodes,
    };
    let dir = live_run_dir(Mpi::OpenMpi, &format!("imbalance-{nodes}"));
    let run = LiveRun::of(Mpi::OpenMpi, dir, program, &[], &funcs, None);
    let offline = tracer_json(&["analyze"], &run.rec);
    for p in [&run.live, &offline] {
        all_matched(p);
        assert_near("critical path", length(p), iters * a);
        let (heavy, light) = (proc_row(p, "heavy"), proc_row(p, "light"));
        assert_near("heavy on the path", ms(&heavy["cp_ns"]), iters * a);
        assert_near("zeroing heavy", ms(&heavy["zeroing_ns"]), iters * (a - b));
        assert_eq!(light["cp_ns"], 0, "light is never on the path");
        assert_eq!(
            p["messages"]["collectives"],
            nodes as u64 * 4,
            "{}",
            p["messages"]
        );
        assert_eq!(p["messages"]["collectives_incomplete"], 0);
    }
    every_rank_on_its_node(&run.rec, nodes);
    assert!(!run.said.contains("warning"), "{}", run.said);
    run.clean_up();
}

/// Each world rank of the recording's processes (its summary) on the node of its index
/// (rank i on node i), every node's rank there.
fn every_rank_on_its_node(recording: &std::path::Path, nodes: usize) {
    let summary = tracer_json(&["summary"], recording);
    let mut ranks: Vec<(u64, u64)> = summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["rank"].as_u64()?, p["node"]["index"].as_u64()?)))
        .collect();
    ranks.sort();
    let want: Vec<(u64, u64)> = (0..nodes as u64).map(|i| (i, i)).collect();
    assert_eq!(ranks, want, "{}", summary["processes"]);
}

/// MPI + threads across nodes (tests/programs/hybrid_mpi_threads.c: a rank per node x 2
/// threads, 5 rounds; one thread of one rank, rank r % NP in round r, runs `thread_slow`
/// for 40 ms, the others `thread_work` for 10 ms; joins, then MPI_Allreduce): the path
/// goes from a thread of one node through its rank's join and the collective to the
/// next round's slow thread on another node, 5 x 40 ms of `thread_slow`, and zeroing it
/// gains 150 ms, as `shared_memory::hybrid_mpi_threads_*` finds on one node; every rank
/// is on it.
#[test]
fn threads_of_ranks_on_two_nodes_make_one_critical_path() {
    threads_of_ranks_across(2);
}

#[test]
fn threads_of_ranks_on_three_nodes_make_one_critical_path() {
    threads_of_ranks_across(3);
}

fn threads_of_ranks_across(nodes: usize) {
    let funcs = ["--func", "thread_slow", "--func", "thread_work"];
    let program = Program {
        name: "hybrid_mpi_threads",
        args: &["2", "5", "40", "10", "-1"],
        nodes,
    };
    let dir = live_run_dir(Mpi::OpenMpi, &format!("hybrid-{nodes}"));
    let run = LiveRun::of(Mpi::OpenMpi, dir, program, &[], &funcs, None);
    let offline = tracer_json(&["analyze"], &run.rec);
    for p in [&run.live, &offline] {
        assert_near("critical path", length(p), 200.0);
        let (slow, work) = (proc_row(p, "thread_slow"), proc_row(p, "thread_work"));
        assert_near("thread_slow on the path", ms(&slow["cp_ns"]), 200.0);
        assert_near("zeroing thread_slow", ms(&slow["zeroing_ns"]), 150.0);
        assert_near("thread_work on the path", ms(&work["cp_ns"]), 0.0);
        assert_eq!(p["messages"]["collectives_incomplete"], 0);
    }
    every_rank_on_its_node(&run.rec, nodes);
    let report = tracer_json(&["report"], &run.rec);
    // Every rank has a slow round (5 rounds over 2 or 3 ranks): 40 ms of it at least.
    let on_path: Vec<&serde_json::Value> = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["rank"].is_i64() && p["cp_ns"].as_u64() > Some(30_000_000))
        .collect();
    assert_eq!(
        on_path.len(),
        nodes,
        "every rank is on the path: {on_path:?}"
    );
    assert!(!run.said.contains("warning"), "{}", run.said);
    run.clean_up();
}

/// The agent's clock 37 ms behind the collector's (a hidden testing option shifts every
/// time it reports): the measured offset puts its records back, and the answer is the
/// same. Left uncorrected, the first item's receive (rank 1 waits for it, so it completes
/// within a message's latency of the send) comes 37 ms before its send started: it
/// waits for the send (its process held), and the answer is the same again, with that
/// message counted as corrected.
#[test]
fn a_node_whose_clock_is_37_ms_behind_gives_the_same_answer_once_corrected() {
    let shift = ["--testing-clock-shift-ns", "-37000000"];
    let run = LiveRun::new(Mpi::OpenMpi, "shifted", 5, &shift, &[], None);
    run.has_the_pipelines_answer();
    let uncorrected = ["--testing-clock-correction", "none"];
    LiveRun::new(Mpi::OpenMpi, "uncorrected", 5, &shift, &uncorrected, None)
        .waited_for_sends_the_clocks_put_late(FAST_MS + ITEMS * SLOW_MS);
}

/// The agent's clock 37 ms behind and slow by 50 ppm from its start (hidden testing
/// options): the collector measures it all along (every quarter second, then every
/// second) and follows its drift, and the answer is the one of a node on time. Here rank
/// 0 (this node) is the slow stage, so rank 1 waits for every item: each receive
/// completes within a message's latency of its send (tens of microseconds), all along
/// the 6 s job. Corrected by the offset measured at the start alone, the agent's later
/// records come up to 300 us early (50 ppm of 6 s): receives before their sends, which
/// wait for them (counted as corrected), and the same answer.
#[test]
fn a_node_whose_clock_drifts_gives_the_same_answer_once_followed() {
    const DRIFT_ITEMS: usize = 100;
    let skew = [
        "--testing-clock-shift-ns",
        "-37000000",
        "--testing-clock-drift-ppm",
        "-50",
    ];
    // Rank 0, this node, the slow stage.
    let shape = || PipelineShape {
        items: DRIFT_ITEMS,
        slow_rank: 0,
        nodes: 2,
    };
    let run = LiveRun::gated_pipeline(Mpi::OpenMpi, "drifting", shape(), &skew, &[], None);
    run.is_whole(DRIFT_ITEMS as u64);
    // Rank 0's slow stage for every item, then rank 1's fast stage of the last one.
    let known = DRIFT_ITEMS as f64 * SLOW_MS + FAST_MS;
    assert_near("live critical path", length(&run.live), known);
    run.clean_up();
    let offset_only = ["--testing-clock-correction", "offset"];
    let tag = "drift-unfollowed";
    LiveRun::gated_pipeline(Mpi::OpenMpi, tag, shape(), &skew, &offset_only, None)
        .waited_for_sends_the_clocks_put_late(known);
}

/// The link between the nodes down for 2 s a second into the job, then up again: the
/// job's and the agent's TCP connections wait and retransmit, the agent keeps its batches
/// until the collector acknowledges them, and nothing is lost or counted twice: the
/// recording holds the MPI calls the program makes, every message matched.
#[test]
fn a_link_cut_for_2_s_mid_job_loses_and_repeats_nothing() {
    const CUT_ITEMS: u64 = 50;
    let cut = Disturbance::CutLink {
        after: Duration::from_secs(1),
        down_for: Duration::from_secs(2),
    };
    let items = CUT_ITEMS as usize;
    let run = LiveRun::new(Mpi::OpenMpi, "link-cut", items, &[], &[], Some(cut));
    run.is_whole(CUT_ITEMS);
    // Each call the ranks make, once: a batch lost would lack some, one replayed would
    // count some twice.
    assert_eq!(mpi_calls(&run), pipeline_calls(CUT_ITEMS));
    run.clean_up();
}

/// The MPI calls in a live run's recording, by name, with their counts.
fn mpi_calls(run: &LiveRun) -> Vec<(String, u64)> {
    let summary = tracer_json(&["summary"], &run.rec);
    summary["calls"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("MPI_"))
        .map(|(name, n)| (name.clone(), n.as_u64().unwrap()))
        .collect()
}

/// The MPI calls the pipeline makes passing `items` items over two ranks: both Init,
/// Comm_rank, Comm_size, Barrier and Finalize; rank 0 sends every item, rank 1 receives
/// it.
fn pipeline_calls(items: u64) -> Vec<(String, u64)> {
    [
        ("MPI_Barrier", 2),
        ("MPI_Comm_rank", 2),
        ("MPI_Comm_size", 2),
        ("MPI_Finalize", 2),
        ("MPI_Init", 2),
        ("MPI_Recv", items),
        ("MPI_Send", items),
    ]
    .iter()
    .map(|(name, n)| (name.to_string(), *n))
    .collect()
}

/// The collector's connection to the agent destroyed twice while the job runs (a second
/// and two seconds in; the link itself stays up): both ends see it broken, the
/// collector opens a new one and takes the session up from the first batch it lacks,
/// and the agent sends again what it kept. Nothing is lost or counted twice: the
/// recording holds the MPI calls the program makes, every message matched.
#[test]
fn a_broken_connection_to_an_agent_is_taken_up_again_losing_and_repeating_nothing() {
    const ITEMS: u64 = 50;
    let breaks = Disturbance::BreakAgentConnection {
        at: [Duration::from_secs(1), Duration::from_secs(2)],
    };
    let run = LiveRun::new(
        Mpi::OpenMpi,
        "broken",
        ITEMS as usize,
        &[],
        &[],
        Some(breaks),
    );
    let restored = run.said.matches("link restored").count();
    assert_eq!(restored, 2, "{}", run.said);
    run.is_whole(ITEMS);
    assert_eq!(mpi_calls(&run), pipeline_calls(ITEMS));
    run.clean_up();
}

/// Another job on the agent's node, running before the collector's starts and calling
/// MPI all along (a rank of mpi_sleeper): the agent leaves it out (it traces the
/// processes that start after its session did), and the collector's job has its answer
/// as on a node of its own. With `--all` the same agent traces it: what the first run
/// left out was there to see.
#[test]
fn an_agent_traces_the_collectors_job_not_another_running_on_its_node() {
    let other = |run: &LiveRun| sleepers_recorded(run).len();
    let job_only = LiveRun::new(
        Mpi::OpenMpi,
        "job-only",
        5,
        &[],
        &[],
        Some(Disturbance::AnotherJobOnNode1),
    );
    assert_eq!(other(&job_only), 0, "{}", job_only.said);
    job_only.has_the_pipelines_answer();
    let all = LiveRun::new(
        Mpi::OpenMpi,
        "all",
        5,
        &[],
        &["--all"],
        Some(Disturbance::AnotherJobOnNode1),
    );
    assert!(other(&all) >= 1, "{}", all.said);
    all.clean_up();
}

/// Another job started on the agent's node while the collector's job runs (its ranks
/// started, the collector told its agents the job's name): the agent leaves its
/// processes out, by the job their launcher names, and the collector's job has its
/// answer.
#[test]
fn an_agent_leaves_out_a_job_started_on_its_node_during_the_session() {
    let run = LiveRun::new(
        Mpi::OpenMpi,
        "job-later",
        5,
        &[],
        &[],
        Some(Disturbance::AnotherJobOnNode1WhileItRuns),
    );
    let others = sleepers_recorded(&run);
    assert!(others.is_empty(), "{others:?}");
    run.has_the_pipelines_answer();
}

/// The processes of the other job (mpi_sleeper) in a live run's recording.
fn sleepers_recorded(run: &LiveRun) -> Vec<serde_json::Value> {
    let summary = tracer_json(&["summary"], &run.rec);
    summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["command"].as_str().unwrap_or("").contains("mpi_sleeper"))
        .cloned()
        .collect()
}

/// The agent killed while the job runs: the collector names the node at once, goes on
/// with the rest, warns that a node was lost, and its recording is complete.
#[test]
fn an_agent_killed_mid_job_is_named_and_the_rest_goes_on() {
    // 50 items of 60 ms at the slow rank: 3 s; the agent dies after 1.
    let run = LiveRun::new(
        Mpi::OpenMpi,
        "killed",
        50,
        &[],
        &[],
        Some(Disturbance::KillAgentAfter(Duration::from_secs(1))),
    );
    assert!(
        run.said.contains(&format!("({}) lost", run.agent_address)),
        "{}",
        run.said
    );
    assert!(
        run.said
            .contains("1 nodes' links failed before their sessions ended"),
        "{}",
        run.said
    );
    // What rank 0 (this node) did is all there: its 50 sends.
    assert_eq!(run.live["messages"]["sent"], 50, "{}", run.live["messages"]);
    let offline = tracer_json(&["analyze"], &run.rec);
    assert_eq!(offline["messages"]["sent"], 50);
    run.clean_up();
}

/// What a test does to a live run while its job runs, counted from rank 1's return from
/// MPI_Init (the gated pipeline's mark `GATE.1`).
#[derive(Clone, Copy)]
enum Disturbance {
    /// SIGKILL to the agent.
    KillAgentAfter(Duration),
    /// The lab's link down for `down_for`, then up again.
    CutLink { after: Duration, down_for: Duration },
    /// The collector's connection to the agent destroyed (the link staying up) at each
    /// of these times.
    BreakAgentConnection { at: [Duration; 2] },
    /// Another job on node 1 (a rank of mpi_sleeper, calling MPI all along), started
    /// before the collector and ended after it.
    AnotherJobOnNode1,
    /// The same job started while the collector's ranks wait at the gate (each has
    /// started and named its job), which opens once its rank calls MPI.
    AnotherJobOnNode1WhileItRuns,
    /// Each rank also recorded by a tracer of its own node (`record --pid RANK -o`, as
    /// `recorded_node_by_node` does), started while the ranks wait at the gate, which
    /// opens once both trace.
    AlsoRecordedNodeByNode,
}

/// How many items the pipeline passes, which rank is its slow stage, over how many
/// nodes (a rank on each).
struct PipelineShape {
    items: usize,
    slow_rank: usize,
    nodes: usize,
}

/// Whether a rank of mpi_sleeper runs (the other job of `AnotherJobOnNode1`).
fn sleeper_running() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| c.starts_with(program("mpi_sleeper.openmpi").as_bytes()))
    })
}

/// A test program and its arguments, a rank on each of `nodes` nodes.
struct Program<'a> {
    name: &'a str,
    args: &'a [&'a str],
    nodes: usize,
}

/// `tracer merge` of two nodes' recordings into `out`.
fn merge(traces: &[PathBuf], out: &std::path::Path) {
    let merged = Command::new(tracer())
        .arg("merge")
        .args(traces)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&merged.stderr);
    assert!(merged.status.success(), "{said}");
    assert!(said.contains("merged 2 recordings (2 nodes"), "{said}");
}

/// Opens the gated pipeline's gate when dropped (whatever happens, so that the job
/// never waits forever).
struct OpenOnDrop(PathBuf);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, b"");
    }
}

/// Starts `job` (another job's mpirun on node 1) and waits until its rank of mpi_sleeper
/// runs, and half a second more (it calls MPI all along).
fn start_another_job(mut job: Command) -> std::process::Child {
    let mut job = job.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sleeper_running() {
        assert!(Instant::now() < deadline, "mpi_sleeper did not start");
        assert!(job.try_wait().unwrap().is_none(), "the other job ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    job
}

/// Once both ranks wait at `gate`, a tracer in node i's namespace records rank i
/// (`record --pid`, the pipeline's stages selected) into `traces[i]`; then the gate
/// opens (whatever happens, so that the job never waits forever). The tracers, to be
/// finished once the job is over.
fn record_each_rank(
    mpi: Mpi,
    gate: &std::path::Path,
    namespaces: &[String],
    traces: &[PathBuf],
) -> Vec<LabTracer> {
    let _opener = OpenOnDrop(gate.to_path_buf());
    assert_eq!(namespaces.len(), 2, "rank_pids finds two ranks");
    let gate_arg = gate.display().to_string();
    let start = Instant::now();
    while !(0..namespaces.len()).all(|r| PathBuf::from(format!("{gate_arg}.{r}")).exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the ranks did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pids = rank_pids(&gate_arg, mpi);
    namespaces
        .iter()
        .zip(pids)
        .zip(traces)
        .map(|((ns, pid), trace)| {
            let args: Vec<String> = [
                "record",
                "--func",
                "stage_slow",
                "--func",
                "stage_fast",
                "--pid",
                &pid.to_string(),
                "-o",
                &trace.display().to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            LabTracer::start(
                ns,
                &args,
                "tracer: tracing",
                Duration::from_secs(60),
                "the node's tracer",
            )
        })
        .collect()
}

/// A fresh directory for a live run's files.
fn live_run_dir(mpi: Mpi, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tracer-live-nodes-{}-{}-{tag}",
        std::process::id(),
        mpi.rank_variable()[0]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One job traced live: an agent in namespace 1, the collector in namespace 0 launching
/// it (the agent traces its rank from MPI_Init on), rank i in namespace i.
struct LiveRun {
    said: String,
    live: serde_json::Value,
    rec: PathBuf,
    /// Node i's recording of its rank, with `AlsoRecordedNodeByNode`.
    node_traces: Vec<PathBuf>,
    dir: PathBuf,
    agent_address: String,
}

impl LiveRun {
    /// The gated pipeline (its gate open) with `items` items, rank 1 slow.
    fn new(
        mpi: Mpi,
        tag: &str,
        items: usize,
        agent_args: &[&str],
        collector_args: &[&str],
        disturbance: Option<Disturbance>,
    ) -> LiveRun {
        LiveRun::gated_pipeline(
            mpi,
            tag,
            PipelineShape {
                items,
                slow_rank: 1,
                nodes: 2,
            },
            agent_args,
            collector_args,
            disturbance,
        )
    }

    /// The gated pipeline (its gate open) of `shape`.
    fn gated_pipeline(
        mpi: Mpi,
        tag: &str,
        shape: PipelineShape,
        agent_args: &[&str],
        collector_args: &[&str],
        disturbance: Option<Disturbance>,
    ) -> LiveRun {
        let dir = live_run_dir(mpi, tag);
        let gate = dir.join("gate");
        // Opened by the node's tracers once they trace, once the other job runs, or now.
        if !matches!(
            disturbance,
            Some(Disturbance::AlsoRecordedNodeByNode | Disturbance::AnotherJobOnNode1WhileItRuns)
        ) {
            std::fs::write(&gate, b"").unwrap();
        }
        let gate_arg = gate.display().to_string();
        let (items_arg, slow_arg) = (shape.items.to_string(), shape.slow_rank.to_string());
        let args = [
            items_arg.as_str(),
            slow_arg.as_str(),
            "60",
            "20",
            gate_arg.as_str(),
            "barrier",
        ];
        let program = Program {
            name: "mpi_pipeline",
            args: &args,
            nodes: shape.nodes,
        };
        LiveRun::of(mpi, dir, program, agent_args, collector_args, disturbance)
    }

    /// `program`, rank i in namespace i, traced live (an agent on every node but
    /// node 0, the collector's); the results in `dir`.
    fn of(
        mpi: Mpi,
        dir: PathBuf,
        program: Program<'_>,
        agent_args: &[&str],
        collector_args: &[&str],
        disturbance: Option<Disturbance>,
    ) -> LiveRun {
        let lab = match program.nodes {
            2 => NetLab::unshaped(),
            n => NetLab::bridged(n),
        };
        let token = token_file(&dir, "a-token-shared-by-the-lab");
        let mut agents: Vec<Agent> = (1..program.nodes)
            .map(|i| {
                let address = format!("{}:7421", lab.address(i));
                Agent::start(lab.namespace(i), &address, &token, agent_args)
            })
            .collect();
        // Node 1's agent: the one a disturbance kills or cuts off.
        let agent = &agents[0];
        let agent_killed = matches!(disturbance, Some(Disturbance::KillAgentAfter(_)));
        let other_job = || {
            let mut job = lab.command_on(1, "mpirun.openmpi", &["--allow-run-as-root", "-np", "1"]);
            job.arg(tracer_tests::program("mpi_sleeper.openmpi"))
                .arg("120")
                .stdout(Stdio::null());
            job
        };
        // Started now (before the collector), or by the disturber.
        let another_job = std::sync::Arc::new(std::sync::Mutex::new(
            matches!(disturbance, Some(Disturbance::AnotherJobOnNode1))
                .then(|| start_another_job(other_job())),
        ));
        let another_job_later = another_job.clone();
        let mut later_job = other_job();
        let node_traces: Vec<PathBuf> = (0..program.nodes)
            .map(|i| dir.join(format!("node{i}.trace")))
            .collect();
        let disturber = disturbance.map(|d| {
            let pid = agent.pid().to_string();
            let link = lab.link_switch();
            let namespaces: Vec<String> = (0..program.nodes)
                .map(|i| lab.namespace(i).to_string())
                .collect();
            let gate = dir.join("gate");
            let rank_1_started = dir.join("gate.1");
            let traces = node_traces.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !rank_1_started.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                match d {
                    Disturbance::KillAgentAfter(after) => {
                        std::thread::sleep(after);
                        let _ = Command::new("kill").args(["-KILL", &pid]).status();
                    }
                    Disturbance::CutLink { after, down_for } => {
                        std::thread::sleep(after);
                        link.cut();
                        std::thread::sleep(down_for);
                        link.restore();
                    }
                    Disturbance::BreakAgentConnection { at } => {
                        let started = Instant::now();
                        for t in at {
                            std::thread::sleep(t.saturating_sub(started.elapsed()));
                            link.break_connections_from(7421);
                        }
                    }
                    Disturbance::AnotherJobOnNode1 => {}
                    Disturbance::AnotherJobOnNode1WhileItRuns => {
                        let _opener = OpenOnDrop(gate.clone());
                        let rank_0_started = gate.with_extension("0");
                        while !rank_0_started.exists() && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        // The collector names its job within a tick of a rank's start.
                        std::thread::sleep(Duration::from_millis(500));
                        let job = start_another_job(std::mem::replace(
                            &mut later_job,
                            Command::new("true"),
                        ));
                        *another_job_later.lock().unwrap() = Some(job);
                    }
                    Disturbance::AlsoRecordedNodeByNode => {
                        return record_each_rank(mpi, &gate, &namespaces, &traces);
                    }
                }
                Vec::new()
            })
        });
        let agent_address = agent.address.clone();
        let cmd = match mpi {
            Mpi::OpenMpi => {
                let path = tracer_tests::program(&format!("{}.openmpi", program.name));
                lab.openmpi(program.nodes, &path, program.args)
            }
            Mpi::Mpich => {
                let path = tracer_tests::program(&format!("{}.mpich", program.name));
                lab.mpich(program.nodes, &path, program.args)
            }
        };
        let rec = dir.join("job.trace");
        let live = dir.join("live.json");
        let mut args = netlab::collector_args(&agents, &token, &rec, &live);
        args.extend(collector_args.iter().map(|s| s.to_string()));
        let out = collect(
            lab.namespace(0),
            &args,
            &cmd,
            &dir,
            Duration::from_secs(180),
        );
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        // What the collector printed, for `--nocapture` (the README's example).
        eprintln!("{said}");
        assert!(out.status.success(), "collector: {said}");
        let live: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&live).unwrap()).unwrap();
        let node_recorders = disturber.map(|d| d.join().unwrap()).unwrap_or_default();
        let recorded_node_by_node = !node_recorders.is_empty();
        for t in node_recorders {
            t.finish(Duration::from_secs(60));
        }
        if let Some(job) = &mut *another_job.lock().unwrap() {
            // mpirun forwards the signal to its rank.
            let _ = Command::new("kill")
                .args(["-TERM", &job.id().to_string()])
                .status();
            let _ = job.wait();
        }
        if agent_killed {
            agents.remove(0);
        }
        for agent in agents {
            agent.stop();
        }
        LiveRun {
            said,
            live,
            rec,
            node_traces: if recorded_node_by_node {
                node_traces
            } else {
                Vec::new()
            },
            dir,
            agent_address,
        }
    }

    /// The whole job's answer, live and from the recording: every message matched, the
    /// pipeline's critical path (rank 0's first fast item, then rank 1's five slow
    /// ones), each rank on its node (the node is the id's high bits,
    /// docs/multinode.md); no warning, nothing lost.
    fn has_the_pipelines_answer(self) {
        let (said, p) = (&self.said, &self.live);
        assert!(!said.contains("warning"), "{said}");
        assert!(said.contains(", 0 lost"), "{said}");
        all_matched(p);
        assert_eq!(p["messages"]["sent"], 5, "{}", p["messages"]);
        assert_near("live critical path", length(p), FAST_MS + ITEMS * SLOW_MS);
        // What the collector recorded is what it analyzed live.
        let offline = tracer_json(&["analyze"], &self.rec);
        assert_eq!(
            offline["critical_path"]["length_ns"], p["critical_path"]["length_ns"],
            "online and offline lengths"
        );
        all_matched(&offline);
        let report = tracer_json(&["report"], &self.rec);
        assert_eq!(
            ranks_with_their_nodes(&report),
            [(0, 0), (1, 1)],
            "{}",
            report["processes"]
        );
        assert_eq!(
            report["processes"][0]["rank"], 1,
            "the path runs through the slow rank"
        );
        report_text_names_each_rank_with_its_node(&self.rec, &report);
        // The summary names each rank's node and the pid that node gave it, in its JSON
        // and in what the collector printed.
        let summary = tracer_json(&["summary"], &self.rec);
        let ranks = summary["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| Some((p["rank"].as_u64()?, p)));
        assert_eq!(ranks.clone().count(), 2, "{summary}");
        for (rank, p) in ranks {
            let pid = p["pid"].as_u64().unwrap();
            let node = &p["node"];
            assert_eq!(node["index"], rank, "{p}");
            // Each node of the lab has a host name of its own (its UTS namespace).
            assert_eq!(node["hostname"], format!("node{rank}"), "{p}");
            assert_eq!(node["pid"], pid & ((1 << 22) - 1), "{p}");
            let line = format!(
                "pid {:>7} on node {rank} ({}) rank {rank} ",
                node["pid"].as_u64().unwrap(),
                node["hostname"].as_str().unwrap()
            );
            assert!(said.contains(&line), "no {line:?} in {said}");
        }
        self.clean_up();
    }

    /// Nothing lost, no warning, `sent` messages, every one matched live and in the
    /// recording, whose offline critical path is the live one.
    fn is_whole(&self, sent: u64) {
        let (said, p) = (&self.said, &self.live);
        assert!(!said.contains("warning"), "{said}");
        assert!(said.contains(", 0 lost"), "{said}");
        all_matched(p);
        assert_eq!(p["messages"]["sent"], sent, "{}", p["messages"]);
        let offline = tracer_json(&["analyze"], &self.rec);
        assert_eq!(
            offline["critical_path"]["length_ns"], p["critical_path"]["length_ns"],
            "online and offline lengths"
        );
        all_matched(&offline);
    }

    /// A clock left wrong: some receive came before its send, and waited for it; every
    /// message matched and the critical path `known_ms` long, live and offline.
    fn waited_for_sends_the_clocks_put_late(self, known_ms: f64) {
        let late = all_matched_some_late(&self.live);
        assert!(late >= 1, "{}", self.live["messages"]);
        assert_near("live critical path", length(&self.live), known_ms);
        let offline = tracer_json(&["analyze"], &self.rec);
        assert_eq!(
            offline["messages"], self.live["messages"],
            "online and offline"
        );
        assert_eq!(
            offline["critical_path"]["length_ns"], self.live["critical_path"]["length_ns"],
            "online and offline lengths"
        );
        self.clean_up();
    }

    fn clean_up(self) {
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

/// The same run traced twice: live, by a collector and an agent, and by a tracer on each
/// node recording its rank (`record --pid -o`, started while the ranks wait at the gate),
/// whose recordings `tracer merge` makes one. Both see every message matched and give
/// each stage the same share of the critical path, the same zeroing and the same CPU,
/// within 1 ms (they differ by 1-15 us: two tracers' probes stamp the same calls), each
/// near the construction: the merged recording is the live answer. Their spans differ by
/// what comes before the gate (the live one traced the job from its launch), which the
/// path does not go through.
#[test]
fn recordings_made_on_each_node_merge_into_the_live_collectors_answer() {
    let funcs = ["--func", "stage_slow", "--func", "stage_fast"];
    let run = LiveRun::new(
        Mpi::OpenMpi,
        "merge",
        5,
        &[],
        &funcs,
        Some(Disturbance::AlsoRecordedNodeByNode),
    );
    run.is_whole(5);
    assert_eq!(run.node_traces.len(), 2);
    let all = run.dir.join("merged.trace");
    merge(&run.node_traces, &all);
    let merged = tracer_json(&["analyze"], &all);
    all_matched(&merged);
    assert_eq!(merged["messages"], run.live["messages"], "merged and live");
    let live = &run.live;
    assert_near(
        "merged critical path, against the live one",
        length(&merged),
        length(live),
    );
    for (name, cp_ms) in [("stage_slow", ITEMS * SLOW_MS), ("stage_fast", FAST_MS)] {
        let (m, l) = (proc_row(&merged, name), proc_row(live, name));
        eprintln!("{name}: merged {m}, live {l}");
        // The same calls, stamped by two tracers' probes a few microseconds apart.
        for field in ["cp_ns", "zeroing_ns", "cpu_ns"] {
            let (merged_ms, live_ms) = (ms(&m[field]), ms(&l[field]));
            assert!(
                (merged_ms - live_ms).abs() <= 1.0,
                "{name} {field}: merged {merged_ms:.3} ms, live {live_ms:.3} ms"
            );
        }
        assert_near(
            &format!("{name} on the merged path"),
            ms(&m["cp_ns"]),
            cp_ms,
        );
    }
    let report = tracer_json(&["report"], &all);
    assert_eq!(
        ranks_with_their_nodes(&report),
        [(0, 0), (1, 1)],
        "{}",
        report["processes"]
    );
    run.clean_up();
}

/// A collector with the wrong token is refused by the agent, in one line naming it,
/// before its command is launched.
#[test]
fn a_collector_with_the_wrong_token_is_refused_before_its_command_runs() {
    let lab = NetLab::unshaped();
    let dir = std::env::temp_dir().join(format!("tracer-live-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let right = token_file(&dir, "the-agents-token");
    let wrong = token_file(&dir, "not-the-agents-token!");
    let agent = Agent::start(
        lab.namespace(1),
        &format!("{}:7421", lab.address(1)),
        &right,
        &[],
    );
    let ran = dir.join("ran");
    let out = collect(
        lab.namespace(0),
        &[
            "--agent".to_string(),
            agent.address.clone(),
            "--token-file".to_string(),
            wrong.display().to_string(),
        ],
        &["touch".to_string(), ran.display().to_string()],
        &dir,
        Duration::from_secs(60),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!("agent {} refused our token", agent.address)),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    assert!(!ran.exists(), "the command ran");
    let agent_said = agent.stop();
    assert!(
        agent_said.contains("token"),
        "the agent says it refused: {agent_said}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
