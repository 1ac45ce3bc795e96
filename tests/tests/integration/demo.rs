//! `cargo xtask demo`'s real application, run by the demo's own code (xtask's `lammps`
//! module): LAMMPS traced on 2 Open MPI ranks. The three lines the demo prints name
//! what the report holds, with its figures, and its last line is the HTML report.

use serde_json::Value;
use tracer_tests::tracer;
use xtask::lammps::{
    self, CallCount, ProcessName, NEIGHBOR_BUILD, NEIGHBOR_BUILD_NAME, PAIR_COMPUTE,
    PAIR_COMPUTE_NAME,
};

#[test]
fn lammps_demo_says_what_its_report_holds() {
    let out = std::env::temp_dir().join(format!("tracer-demo-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let traced = lammps::trace(&tracer(), &out).unwrap();
    let report = &traced.report;
    let lessons = lammps::lessons(report).unwrap();
    let [first, second, third] = &lessons.lines;
    assert_eq!(report["messages"]["unmatched"], 0, "{}", report["messages"]);

    // The force computation holds most of the path (the applications test checks it is
    // more than half), the neighbour lists come next: the first two rows of the table.
    let procedures = report["procedures"].as_array().unwrap();
    let row = |name: &str| {
        procedures
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no row {name} in {procedures:?}"))
    };
    let (pair, neighbor) = (row(PAIR_COMPUTE_NAME), row(NEIGHBOR_BUILD_NAME));
    // Named demangled, with the symbol --func selected beside.
    assert_eq!(pair["symbol"], PAIR_COMPUTE, "{pair}");
    assert_eq!(neighbor["symbol"], NEIGHBOR_BUILD, "{neighbor}");
    assert_eq!(lessons.top_procedure, PAIR_COMPUTE_NAME);
    assert_eq!(lessons.next_procedure.as_deref(), Some(NEIGHBOR_BUILD_NAME));
    let length_ms = ms(&report["critical_path"]["length_ns"]);
    assert_eq!(
        *first,
        format!(
            "{PAIR_COMPUTE_NAME} is {:.1} % of the critical path ({:.1} ms of {length_ms:.1} ms) and {:.1} % of all work: {}",
            pct(&pair["cp_pct"]),
            ms(&pair["cp_ns"]),
            pct(&pair["work_pct"]),
            if pct(&pair["cp_pct"]) > pct(&pair["work_pct"]) {
                "the path weighs it more than a CPU profile does"
            } else {
                "a CPU profile weighs it at least as much as the path does"
            }
        )
    );
    assert_eq!(
        *second,
        format!(
            "making it take no time would shorten the run by {:.1} % ({:.1} ms); {NEIGHBOR_BUILD_NAME} by {:.1} % ({:.1} ms)",
            pct(&pair["zeroing_pct"]),
            ms(&pair["zeroing_ns"]),
            pct(&neighbor["zeroing_pct"]),
            ms(&neighbor["zeroing_ns"]),
        )
    );

    // Where the ranks wait: a call the path really waits in from one rank to the other,
    // and the rank with the larger share of the path's work.
    let CallCount { call, count } = lessons.commonest_wait.clone().expect("the ranks wait");
    let rank_waits: Vec<&Value> = report["activities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "wait" && a["from_pid"] != a["to_pid"])
        .collect();
    assert_eq!(
        rank_waits.iter().filter(|a| a["call"] == call).count(),
        count,
        "{call}"
    );
    let latency_ns: u64 = rank_waits
        .iter()
        .map(|a| a["latency_ns"].as_u64().unwrap())
        .sum();
    assert!(call.starts_with("MPI_"), "{call}");
    let processes = report["processes"].as_array().unwrap();
    assert_eq!(processes.len(), lammps::RANKS, "{processes:?}");
    let busiest = processes
        .iter()
        .max_by_key(|p| p["cp_ns"].as_u64())
        .unwrap();
    let rank = busiest["rank"].as_u64().expect("a rank");
    assert_eq!(lessons.busiest, ProcessName::Rank(rank));
    assert!(
        third.starts_with(&format!(
            "along the path the ranks wait for each other {} times ({:.1} ms of measured latency), {count} of them in {call}; rank {rank} does {:.1} % of the path's work, rank ",
            rank_waits.len(),
            latency_ns as f64 / 1e6,
            pct(&busiest["cp_pct"])
        )),
        "{third}"
    );

    // The last line: the page of this run's report, which a browser opens.
    let last = lammps::report_link(&traced.html, false);
    let page = std::path::PathBuf::from(last.strip_prefix("file://").expect(&last));
    assert_eq!(page.extension().unwrap(), "html");
    let html = std::fs::read_to_string(&page).unwrap();
    let finding = report["diagnosis"][0]["text"].as_str().unwrap();
    assert!(
        html.contains(&escaped(finding)),
        "the page lacks the report's first finding {finding:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

fn ms(ns: &Value) -> f64 {
    ns.as_u64().unwrap() as f64 / 1e6
}

fn pct(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// Text as the HTML page writes it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
