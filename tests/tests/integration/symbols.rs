//! Call sites and symbols (issue 8): the sites the probes record symbolize, offline from
//! the recording's mappings, to the program's own functions and source lines; `tracer
//! functions` lists what `--func` can select; C++ procedures selected by their symbols
//! are named demangled in every output.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tracer_analysis::recording::Item;
use tracer_analysis::records::Record;
use tracer_analysis::CodeLocation;
use tracer_analysis::{Mapping, ProcessInfo};
use tracer_common::{call, futex_waits};
use tracer_tests::profile::{assert_near, check_report, ms, proc_row, tracer_json};
use tracer_tests::{mpich, openmpi, program, record, root, tracer, tracer_fails, Traced};
use tracer_user::Symbolizer;

/// Each record with the mappings its process had then (the latest PROCESS chunk before
/// it: a pid can be a launcher's helper before it execs the program).
fn with_mappings(t: &Traced) -> Vec<(&Record, &[Mapping])> {
    let mut current: HashMap<u32, &ProcessInfo> = HashMap::new();
    let mut out = Vec::new();
    for item in &t.items {
        match item {
            Item::Process(p) => {
                current.insert(p.pid, p);
            }
            Item::Record(r) => {
                if let Some(p) = current.get(&r.header().tgid) {
                    out.push((r, p.mappings.as_slice()));
                }
            }
            Item::Probe(_) => {}
        }
    }
    out
}

/// Line numbers (1-based) of a source file's lines that contain `needle`.
fn lines_with(file: &Path, needle: &str) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// Every exit of MPI_Send, MPI_Recv and MPI_Comm_rank carries its call site (the return
/// address the kernel restores before the return probe), and it symbolizes to the
/// calling line. Entries of calls that can block carry it too, read from the stack (a
/// call that hangs has no exit); entries of calls that cannot block do not.
fn check_ring_sites(t: &Traced) {
    let source = root().join("tests/programs/mpi_ring.c");
    let send_lines = lines_with(&source, "MPI_Send(");
    let recv_lines = lines_with(&source, "MPI_Recv(");
    let rank_lines = lines_with(&source, "MPI_Comm_rank(");
    let mut symbolizer = Symbolizer::new();
    let mut checked = HashMap::new();
    // Per thread and call: the sites of its entries and of its exits, in order.
    let mut entry_sites: HashMap<(u32, u16), Vec<u64>> = HashMap::new();
    let mut exit_sites: HashMap<(u32, u16), Vec<u64>> = HashMap::new();
    for (r, mappings) in with_mappings(t) {
        let (c, is_entry) = match r {
            Record::CallEnter(c) => (c, true),
            Record::CallExit(c) => (c, false),
            _ => continue,
        };
        let id = tracer_analysis::calls::split_call_field(c.header.call).id;
        let lines = match id {
            call::MPI_SEND => &send_lines,
            call::MPI_RECV => &recv_lines,
            call::MPI_COMM_RANK => &rank_lines,
            _ => continue,
        };
        let key = (c.header.tid, id);
        if is_entry {
            if id == call::MPI_COMM_RANK {
                assert_eq!(c.site, 0, "{c:?}");
                continue;
            }
            entry_sites.entry(key).or_default().push(c.site);
        } else {
            exit_sites.entry(key).or_default().push(c.site);
            *checked.entry(id).or_insert(0) += 1;
        }
        assert_ne!(c.site, 0, "a call record without its site: {c:?}");
        let loc: CodeLocation = symbolizer
            .locate_return(mappings, c.site)
            .unwrap_or_else(|| panic!("site {:#x} does not symbolize", c.site));
        assert_eq!(loc.function, "main", "{loc:?}");
        assert!(
            loc.file
                .as_deref()
                .is_some_and(|f| f.ends_with("mpi_ring.c")),
            "{loc:?}"
        );
        assert!(
            loc.line.is_some_and(|l| lines.contains(&l)),
            "call {id} at {loc}, expected one of lines {lines:?}"
        );
    }
    // 5 rounds over 2 ranks.
    assert_eq!(checked.get(&call::MPI_SEND), Some(&10), "{checked:?}");
    assert_eq!(checked.get(&call::MPI_RECV), Some(&10), "{checked:?}");
    assert_eq!(checked.get(&call::MPI_COMM_RANK), Some(&2), "{checked:?}");
    // The two ways of finding a blocking call's site agree.
    exit_sites.retain(|(_, id), _| *id != call::MPI_COMM_RANK);
    assert_eq!(entry_sites, exit_sites);
}

#[test]
fn mpi_call_sites_symbolize_to_the_calling_line_mpich() {
    let t = record("sites-mpich", &[], &mpich(2, "mpi_ring", &["5", "64"]));
    check_ring_sites(&t);
}

#[test]
fn mpi_call_sites_symbolize_to_the_calling_line_openmpi() {
    let t = record("sites-openmpi", &[], &openmpi(2, "mpi_ring", &["5", "64"]));
    check_ring_sites(&t);
}

/// Futex wait sites are found by scanning the user stack (docs/design-decisions.md): the
/// players' waits must name the program's line that called into pthreads, not libc.
/// Wakes are not scanned (docs/recording-format.md).
#[test]
fn futex_sites_name_the_calling_line() {
    let exe = program("threads_pingpong");
    // A 20 ms pause every 20th round: the other player is asleep in a wait by then.
    let t = record(
        "futex-sites",
        &[],
        &[exe.clone(), "200".into(), "20".into()],
    );
    let exe = Path::new(&exe).canonicalize().unwrap();
    let pthread_lines = lines_with(
        &root().join("tests/programs/threads_pingpong.c"),
        "pthread_",
    );
    let mut symbolizer = Symbolizer::new();
    let (mut total, mut in_program, mut wakes) = (0, 0, 0);
    let mut elsewhere: HashMap<String, usize> = HashMap::new();
    for (r, mappings) in with_mappings(&t) {
        let Record::FutexEnter(f) = r else { continue };
        if !futex_waits(f.op) {
            assert_eq!(f.site, 0, "a wake with a site: {f:?}");
            wakes += 1;
            continue;
        }
        total += 1;
        // Without MPI the recording has the mappings of exec time (the program and the
        // dynamic linker): a site left in libc does not symbolize.
        match symbolizer.locate_return(mappings, f.site) {
            Some(loc) if Path::new(&loc.object).canonicalize().ok().as_ref() == Some(&exe) => {
                assert!(
                    loc.line.is_some_and(|l| pthread_lines.contains(&l)),
                    "{loc} is not a pthread call (lines {pthread_lines:?})"
                );
                assert!(loc.function == "player" || loc.function == "main", "{loc}");
                in_program += 1;
            }
            other => {
                *elsewhere
                    .entry(format!("{:#x} {other:?}", f.site))
                    .or_default() += 1
            }
        }
    }
    eprintln!(
        "futex waits: {total}, site in the program: {in_program}; elsewhere: {elsewhere:?}; \
         wakes: {wakes}"
    );
    // The 20 paused rounds give a wait and a wake each; the others as the scheduler ran
    // the players.
    assert!(
        total >= 10 && wakes >= 10,
        "only {total} futex waits, {wakes} wakes"
    );
    assert!(
        in_program * 100 >= total * 95,
        "only {in_program} of {total} futex sites in the program: {elsewhere:?}"
    );
}

#[test]
fn functions_lists_the_procedures_of_a_binary() {
    let exe = program("mpi_pipeline.mpich");
    let out = Command::new(tracer())
        .args(["functions", &exe])
        .output()
        .expect("run tracer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for f in ["stage_slow", "stage_fast", "main"] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(f))
            .unwrap_or_else(|| panic!("{f} missing:\n{text}"));
        assert!(line.contains("mpi_pipeline.c:"), "{line}");
    }
    // JSON, ranked by a profile of a real run.
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-functions", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("profile.json");
    let status = Command::new(tracer())
        .args(["record", "--func", "stage_*", "--profile-json"])
        .arg(&profile)
        .arg("--")
        .args(mpich(4, "mpi_pipeline", &["3", "1", "60", "10"]))
        .output()
        .expect("run tracer");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let out = Command::new(tracer())
        .args(["functions", &exe, "--json", "--profile"])
        .arg(&profile)
        .output()
        .expect("run tracer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = v["functions"].as_array().unwrap();
    // stage_slow: 3 items x 60 ms; stage_fast: 3 ranks x 3 items x 10 ms.
    assert_eq!(f[0]["name"], "stage_slow", "{v:#}");
    assert_eq!(f[1]["name"], "stage_fast", "{v:#}");
    assert!(f[0]["cpu_ns"].as_u64().unwrap() > 170_000_000, "{v:#}");
    assert!(f[0]["cp_pct"].as_f64().unwrap() > 50.0, "{v:#}");
    assert!(f[0]["file"].as_str().unwrap().ends_with("mpi_pipeline.c"));
    assert!(
        f[2]["cpu_ns"].is_null(),
        "main is not in the profile: {v:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn functions_of_a_running_process_and_errors() {
    let mut child = Command::new(program("threads_busy"))
        .args(["1", "2000"])
        .spawn()
        .expect("start threads_busy");
    let out = Command::new(tracer())
        .args(["functions", &child.id().to_string()])
        .output()
        .expect("run tracer");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("threads_busy.c:"));

    let (code, err) = tracer_fails(&["functions", "999999999"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "tracer: error: no process with PID 999999999");
    let (_, err) = tracer_fails(&["functions", "/etc/passwd"]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("not an ELF"), "{err}");
    let (_, err) = tracer_fails(&["functions", "/no/such/binary"]);
    assert_eq!(err.trim(), "tracer: error: no such file /no/such/binary");
}

/// `cpp_stages`' procedures: their symbols (what `--func` selects) and their names as
/// every output shows them.
const RELAX_SYMBOL: &str = "_ZN6stages6Solver5relaxEi";
const RELAX_NAME: &str = "stages::Solver::relax(int)";
const NORM_SYMBOL: &str = "_ZN6stages4normIdEET_RKSt6vectorIS1_SaIS1_EEd";
const NORM_NAME: &str =
    "double stages::norm<double>(std::vector<double, std::allocator<double> > const&, double)";

#[test]
fn cpp_procedures_are_named_demangled_in_every_output() {
    // 4 rounds of relax (40 ms of CPU) then norm (20 ms), on one thread: the path is all
    // of its work, 160 ms of it in relax and 80 ms in norm.
    let (rounds, relax_ms, norm_ms): (u64, u64, u64) = (4, 40, 20);
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-cpp-names", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rec, online, summary) = (
        dir.join("r.trace"),
        dir.join("online.json"),
        dir.join("summary.json"),
    );
    let exe = program("cpp_stages");
    let out = Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(&rec)
        .arg("--profile-json")
        .arg(&online)
        .arg("--summary-json")
        .arg(&summary)
        .args(["--func", &format!("{exe}:{RELAX_SYMBOL}")])
        .args(["--func", NORM_SYMBOL])
        .arg("--")
        .arg(&exe)
        .args([rounds, relax_ms, norm_ms].map(|n| n.to_string()))
        .output()
        .expect("run tracer");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // record's live profile: the table's rows are the demangled names.
    for name in [RELAX_NAME, NORM_NAME] {
        assert!(
            said.lines().any(|l| l.starts_with(name)),
            "no row {name}:\n{said}"
        );
    }
    assert!(!said.contains("_ZN6stages"), "a symbol shown:\n{said}");

    // The JSON rows: the name, and the symbol as the binary has it.
    let read = |p: &std::path::Path| -> Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let online = read(&online);
    let report = tracer_json(&["report"], &rec);
    let metrics = tracer_json(&["metrics"], &rec);
    for (name, symbol, want_ms) in [
        (RELAX_NAME, RELAX_SYMBOL, (rounds * relax_ms) as f64),
        (NORM_NAME, NORM_SYMBOL, (rounds * norm_ms) as f64),
    ] {
        for (what, json) in [
            ("profile", &online),
            ("report", &report),
            ("metrics", &metrics),
        ] {
            let row = proc_row(json, name);
            assert_eq!(row["symbol"], symbol, "{what}: {row}");
        }
        assert_near(name, ms(&proc_row(&report, name)["cp_ns"]), want_ms);
        assert_eq!(proc_row(&metrics, name)["calls"], rounds, "{name}");
    }
    check_report(&online, &report, &rec);
    let entries = &read(&summary)["functions"];
    assert_eq!(entries[RELAX_NAME], rounds, "{entries}");
    assert_eq!(entries[NORM_NAME], rounds, "{entries}");
    // A what-if names the procedure by its name or by its symbol, alike.
    let by_name = tracer_json(&["report", "--scale", &format!("{RELAX_NAME}=0")], &rec);
    let by_symbol = tracer_json(&["report", "--scale", &format!("{RELAX_SYMBOL}=0")], &rec);
    assert_eq!(by_name["whatif"], by_symbol["whatif"]);
    assert_eq!(
        by_name["whatif"]["predicted_ns"].as_u64().unwrap(),
        report["critical_path"]["length_ns"].as_u64().unwrap()
            - proc_row(&report, RELAX_NAME)["zeroing_ns"]
                .as_u64()
                .unwrap()
    );

    // The what-if's shares of the predicted path: the name and the symbol.
    let whatif = tracer_json(&["whatif"], &rec);
    let shares = whatif["predicted_path"]["procedures"].as_array().unwrap();
    for (name, symbol) in [(RELAX_NAME, RELAX_SYMBOL), (NORM_NAME, NORM_SYMBOL)] {
        let share = shares
            .iter()
            .find(|s| s["procedure"] == name)
            .unwrap_or_else(|| panic!("no share of {name}: {whatif}"));
        assert_eq!(share["symbol"], symbol, "{share}");
    }

    // The folded stacks' frames are the names.
    let folded = Command::new(tracer())
        .arg("export")
        .arg(&rec)
        .args(["--format", "folded", "-o", "-"])
        .output()
        .expect("run tracer");
    assert!(folded.status.success(), "{folded:?}");
    let folded = String::from_utf8_lossy(&folded.stdout);
    for name in [RELAX_NAME, NORM_NAME] {
        assert!(
            folded.lines().any(|l| l.contains(&format!(";{name} "))),
            "no stack of {name}:\n{folded}"
        );
    }
    assert!(!folded.contains("_ZN6stages"), "{folded}");
    let _ = std::fs::remove_dir_all(&dir);
}
