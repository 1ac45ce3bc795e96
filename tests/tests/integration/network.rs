//! `tracer calibrate` on a real MPI over the network lab (two namespaces joined by a
//! veth, tests/src/netlab.rs): the table it measures on a tbf-shaped link follows the
//! link's rate, and small messages on the unshaped link are far faster.

use std::path::PathBuf;
use std::process::Command;

use tracer_analysis::network::{NetworkTable, Scope};
use tracer_tests::netlab::{calibrate, NetLab};
use tracer_tests::{tracer, tracer_fails};

/// Link rate of the shaped lab.
const RATE_BPS: u64 = 20_000_000;
/// Open MPI headers on a message over the TCP BTL: the ob1 match or rendezvous header,
/// the BTL's own, and for a rendezvous message (64 KiB and up, above the eager limit)
/// its last fragment's headers too. An estimate; the tolerance covers it.
const MPI_HEADERS: u64 = 100;
/// Measured within 1 % of the model on an idle machine; 10 % leaves room for a busy one.
const TOLERANCE: f64 = 0.10;
/// Seconds of round trips per size. Each size's latency is the median of its round
/// trips, so a competitor that takes the CPU from the ranks (each message then waits
/// for a time slice: 64 KiB measured 36 ms instead of 26.7 with two busy loops on this
/// 2-CPU machine, and 30 ms in a CI run) moves it only if it lasts half this long.
/// The 0.3 s this test used before gave a 64 KiB message on the shaped link just 5-6
/// round trips, and the default cap of 1000 round trips gave a small message on the
/// fast link only 16 ms.
const SECONDS_PER_SIZE: &str = "1.5";
/// Measurements of the shaped link at most. A busy machine slows the link itself, not
/// only the ranks: the kernel's packet processing (the tbf qdisc's dequeue, the veth's
/// receive) runs in softirq context and, under load, in ksoftirqd threads that compete for
/// the CPU. With two busy loops beside the test through all of it, 64 KiB took 36.000 ms
/// (model 26.67 ms) with the ranks at nice -15 as at nice 0, and 28.000 ms with the loops
/// at nice 19: whole scheduler ticks (4 ms), the packets waiting for ksoftirqd's turn. In
/// a CI run a moment of contention made it 30.06 ms. Contention only adds time, so each size keeps its lowest
/// median; a model that is wrong fails every measurement.
const MEASUREMENTS: usize = 3;
/// Enough round trips for a small message on the fast link to fill SECONDS_PER_SIZE.
const MOST_ROUND_TRIPS: &str = "200000";

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracer-net-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[test]
fn shaped_link_latency_follows_its_rate() {
    let dir = scratch("shape");
    let table = dir.join("net.csv");
    let t = table.to_str().unwrap();
    let sizes = "0,8,1024,65536,262144";

    // Baseline: both ranks on this machine (local), then the unshaped lab link (remote),
    // merged into one table with --append.
    let local: Vec<String> = ["mpirun.openmpi", "--allow-run-as-root", "-np", "2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    calibrate(&["--sizes", "0,8,65536", "-o", t], &local);
    let unshaped = NetLab::unshaped();
    let (_, err) = calibrate(
        &[
            "--scope",
            "remote",
            "--sizes",
            sizes,
            "--iterations",
            MOST_ROUND_TRIPS,
            "--seconds-per-size",
            SECONDS_PER_SIZE,
            "--append",
            "-o",
            t,
        ],
        &unshaped.openmpi_launcher(2),
    );
    eprintln!("unshaped lab:\n{err}");
    drop(unshaped);
    let base = NetworkTable::load(&table).unwrap();
    assert_eq!(base.rows(Scope::Local).count(), 3, "{}", base.to_csv());
    assert_eq!(base.rows(Scope::Remote).count(), 5, "{}", base.to_csv());

    // The shaped link, into its own table (printed on standard output), measured again
    // (up to MEASUREMENTS times) while a size is off the model: each size keeps its
    // lowest median.
    let shaped = NetLab::shaped(RATE_BPS);
    let large = [65536u64, 262144];
    let model = |bytes: u64| shaped.transfer_ns(bytes + MPI_HEADERS).unwrap();
    let near_model =
        |bytes: u64, measured: f64| (measured - model(bytes)).abs() <= TOLERANCE * model(bytes);
    let mut lowest = [f64::INFINITY; 2];
    for _ in 0..MEASUREMENTS {
        let (csv, shaped_err) = calibrate(
            &[
                "--scope",
                "remote",
                "--sizes",
                sizes,
                "--seconds-per-size",
                SECONDS_PER_SIZE,
            ],
            &shaped.openmpi_launcher(2),
        );
        eprintln!("shaped lab ({RATE_BPS} bit/s):\n{shaped_err}{csv}");
        let slow = NetworkTable::parse(&csv).unwrap();
        assert!(!slow.has(Scope::Local));
        for (low, bytes) in lowest.iter_mut().zip(large) {
            *low = low.min(slow.latency_ns(Scope::Remote, bytes).unwrap() as f64);
        }
        if lowest
            .iter()
            .zip(large)
            .all(|(&m, bytes)| near_model(bytes, m))
        {
            break;
        }
    }

    for (measured, bytes) in lowest.into_iter().zip(large) {
        let naive = bytes as f64 * 8.0 / RATE_BPS as f64 * 1e9;
        eprintln!(
            "{bytes} bytes: measured {:.3} ms, model {:.3} ms (bytes*8/rate {:.3} ms)",
            measured / 1e6,
            model(bytes) / 1e6,
            naive / 1e6
        );
        assert!(
            near_model(bytes, measured),
            "{bytes} bytes took {:.3} ms on the shaped link; expected {:.3} ms +- {:.0} %",
            measured / 1e6,
            model(bytes) / 1e6,
            TOLERANCE * 100.0
        );
    }

    // Small messages on the unshaped link are far below a large one on the shaped link,
    // and so is a large one on the unshaped link.
    let shaped_64k = lowest[0] as u64;
    for bytes in [0, 8] {
        let fast = base.latency_ns(Scope::Remote, bytes).unwrap();
        assert!(
            fast * 20 < shaped_64k,
            "{bytes} bytes: {:.3} ms on the unshaped link vs 64 KiB {:.3} ms shaped",
            ms(fast),
            ms(shaped_64k)
        );
    }
    let fast_64k = base.latency_ns(Scope::Remote, 65536).unwrap();
    assert!(
        fast_64k * 5 < shaped_64k,
        "64 KiB: {:.3} ms unshaped vs {:.3} ms shaped",
        ms(fast_64k),
        ms(shaped_64k)
    );
    drop(shaped);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibrate_errors_are_one_line() {
    let (code, err) = tracer_fails(&[
        "calibrate",
        "--mpicc",
        "/nonexistent",
        "--",
        "mpirun",
        "-np",
        "2",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("/nonexistent") && err.contains("not found"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let (code, err) = tracer_fails(&[
        "calibrate",
        "--mpicc",
        "mpicc.openmpi",
        "--sizes",
        "8",
        "--",
        "mpirun.openmpi",
        "--allow-run-as-root",
        "-np",
        "1",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("started 1 rank") && err.contains("needs 2"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let (_, err) = tracer_fails(&[
        "calibrate",
        "--mpicc",
        "mpicc.openmpi",
        "--",
        "/no/such/launcher",
    ]);
    assert!(
        err.contains("launcher `/no/such/launcher` not found"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // A bad table to append to fails before anything runs, naming file and line.
    let dir = scratch("bad-table");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "scope,bytes,latency_ns\nlocal,8\n").unwrap();
    let (_, err) = tracer_fails(&[
        "calibrate",
        "--append",
        "-o",
        bad.to_str().unwrap(),
        "--",
        "mpirun",
    ]);
    assert!(err.contains("bad.csv: line 2: expected 3 fields"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The lab's launchers put rank i in namespace i, for Open MPI and MPICH alike, and
/// MPICH's ping-pong runs over the veth too.
#[test]
fn ranks_run_in_their_namespaces() {
    let lab = NetLab::unshaped();
    let netns_of = |ns: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "readlink", "/proc/self/ns/net"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let expected = [netns_of(lab.namespace(0)), netns_of(lab.namespace(1))];
    assert_ne!(expected[0], expected[1]);
    for (launcher, rank_var) in [
        (lab.openmpi_launcher(2), "OMPI_COMM_WORLD_RANK"),
        (lab.mpich_launcher(2), "PMI_RANK"),
    ] {
        let script = format!("echo rank ${rank_var} $(readlink /proc/self/ns/net)");
        let out = Command::new(&launcher[0])
            .args(&launcher[1..])
            .args(["sh", "-c", &script])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{launcher:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut seen: Vec<&str> = text.lines().filter(|l| l.starts_with("rank ")).collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                format!("rank 0 {}", expected[0]),
                format!("rank 1 {}", expected[1])
            ],
            "{launcher:?}"
        );
    }
    let out = Command::new(tracer())
        .args(["calibrate", "--mpicc", "mpicc.mpich", "--scope", "remote"])
        .args(["--sizes", "8,65536", "--seconds-per-size", "0.2", "--"])
        .args(lab.mpich_launcher(2))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = NetworkTable::parse(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(table.rows(Scope::Remote).count(), 2, "{}", table.to_csv());
}
