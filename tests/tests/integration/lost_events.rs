//! Losing events is loud: `tracer record` warns while it happens, and every command that
//! reads or writes a recording that lost events ends with a warning that says how many
//! of how many. The exit status stays the command's (0 here): the outputs are written,
//! incomplete, and the warning says so.
//!
//! To lose events for real, the tracer is stopped (SIGSTOP) for two seconds while a
//! program floods it with futex and scheduler events, as a tracer starved of CPU would
//! be: the probes' buffers fill up and the kernel side counts what it drops, as the
//! probes' ring-full failures, which the recording and `record` report by reason. The
//! default buffers, sized from the machine, keep a burst of that kind as long as it fits
//! them: nothing lost.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use tracer_analysis::recording;
use tracer_analysis::records::Record;
use tracer_common::ProbeFailure;
use tracer_tests::{program, tracer};

const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;
const SIGKILL: i32 = 9;

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// The warning every command ends with, for a recording of `recorded` events that lost
/// `lost`.
fn final_warning(recorded: u64, lost: u64) -> String {
    let produced = recorded + lost;
    format!(
        "tracer: warning: {lost} of {produced} events ({:.1} %) were lost (the tracer fell \
         behind and the probes' buffers filled up, or it passed its memory limit): calls \
         and messages among them are missing, so the results are incomplete",
        lost as f64 * 100.0 / produced as f64
    )
}

/// What a warning printed while recording says: "tracer: warning: N events lost so far
/// (P % of M): ...".
#[derive(Clone, Copy, Debug)]
struct LiveWarning {
    lost: u64,
    percent: f64,
    of: u64,
}

fn live_warning(line: &str) -> Option<LiveWarning> {
    let rest = line.strip_prefix("tracer: warning: ")?;
    let (lost, rest) = rest.split_once(" events lost so far (")?;
    let (percent, rest) = rest.split_once(" % of ")?;
    let (of, _) = rest.split_once("):")?;
    Some(LiveWarning {
        lost: lost.parse().ok()?,
        percent: percent.parse().ok()?,
        of: of.parse().ok()?,
    })
}

/// Waits until the command `tracer` launched runs `program` (it is held, stopped, at
/// its exec until the tracer has probed what it needs).
fn wait_until_running(tracer: u32, program: &str) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{tracer}/task/{tracer}/children"))
            .unwrap_or_default();
        let running = children.split_whitespace().find(|pid| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            // The state is the field after the parenthesized command name.
            exe == std::path::Path::new(program)
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    stat.rsplit_once(") ")
                        .is_some_and(|(_, rest)| !rest.starts_with('T'))
                })
        });
        if let Some(pid) = running {
            return pid.parse().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the traced program never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn losing_events_warns_while_recording_and_after_every_command() {
    let dir = std::env::temp_dir().join(format!("tracer-lost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("lost.trace");
    // 200,000 hand-offs between two threads: several seconds of about 500,000 events a
    // second, into the smallest buffers (1 MiB of ring, 1 MiB of slots): the default
    // ones hold 750,000 records or more on a machine of 12 GiB or more, over 1.5 s of
    // them.
    let mut t = Command::new(tracer())
        .args([
            "record",
            "--buffer-mib",
            "1",
            "-o",
            rec.to_str().unwrap(),
            "--",
        ])
        .args([program("threads_pingpong"), "200000".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("tracing (") {
        assert!(
            err.read_line(&mut printed).unwrap() > 0,
            "tracer exited before tracing: {printed}"
        );
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    // The tracer holds the program at its exec until it has looked at it: stopping the
    // tracer before then would stop the flood too.
    let _ = wait_until_running(t.id(), &program("threads_pingpong"));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: plain kill(2) to our own child.
    assert_eq!(unsafe { libc_kill(t.id() as i32, SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(unsafe { libc_kill(t.id() as i32, SIGCONT) }, 0);
    let status = t.wait().unwrap();
    printed.push_str(&rest.join().unwrap());
    assert_eq!(status.code(), Some(0), "{printed}");

    let trailer = recording::read_all(&rec)
        .expect("complete recording")
        .trailer;
    let (recorded, lost) = (trailer.events_total, trailer.events_lost);
    assert!(
        lost > 0,
        "nothing lost while the tracer was stopped:\n{printed}"
    );
    // The lost records are the probes' ring-full failures, kept by reason.
    let ring_full = ProbeFailure::RingFull.name();
    assert_eq!(
        trailer.probe_failures.get(ring_full),
        Some(&lost),
        "{:?}",
        trailer.probe_failures
    );
    let failures = printed
        .lines()
        .find(|l| l.starts_with("probe failures: "))
        .unwrap_or_else(|| panic!("no failures line:\n{printed}"));
    assert!(
        failures.contains(&format!("{ring_full} {lost}")),
        "{failures}"
    );

    // While recording: at least one warning, the counts so far within the final ones.
    let live: Vec<LiveWarning> = printed.lines().filter_map(live_warning).collect();
    assert!(!live.is_empty(), "no warning while recording:\n{printed}");
    for w in &live {
        assert!(
            w.lost > 0 && w.lost <= lost,
            "{w:?}, {lost} lost:\n{printed}"
        );
        assert!(
            w.of >= w.lost && w.of <= recorded + lost,
            "{w:?}:\n{printed}"
        );
        let want = w.lost as f64 * 100.0 / w.of as f64;
        assert!((w.percent - want).abs() <= 0.05, "{w:?}: want {want} %");
    }
    assert!(
        live.windows(2).all(|w| w[0].lost < w[1].lost),
        "a warning without new losses:\n{printed}"
    );
    let warning = final_warning(recorded, lost);
    assert_eq!(
        printed.lines().last(),
        Some(warning.as_str()),
        "record's last line:\n{printed}"
    );
    assert!(
        printed.contains(&format!("events: {recorded} recorded, {lost} lost")),
        "{printed}"
    );

    // Every command that reads the recording ends with the same warning, and succeeds.
    let export = dir.join("lost.json");
    let commands: [&[&str]; 7] = [
        &["summary"],
        &["analyze"],
        &["report"],
        &["metrics"],
        &["dump"],
        // A placement moves the program's processes: this one has none to move.
        &["whatif"],
        &["export", "-o", export.to_str().unwrap()],
    ];
    for args in commands {
        let out = Command::new(tracer())
            .arg(args[0])
            .arg(&rec)
            .args(&args[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "tracer {args:?}: {err}");
        assert_eq!(
            err.lines().last(),
            Some(warning.as_str()),
            "tracer {args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_complete_recording_has_no_warning() {
    let dir = std::env::temp_dir().join(format!("tracer-nolost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("ok.trace");
    let out = Command::new(tracer())
        .args(["record", "-o", rec.to_str().unwrap(), "--"])
        .args([program("threads_pingpong"), "100".into()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let trailer = recording::read_all(&rec)
        .expect("complete recording")
        .trailer;
    assert_eq!(trailer.events_lost, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(!trailer
        .probe_failures
        .contains_key(ProbeFailure::RingFull.name()));
    for command in ["summary", "analyze", "report", "metrics"] {
        let out = Command::new(tracer())
            .arg(command)
            .arg(&rec)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tracer {command}: {err}");
        assert!(!err.contains("warning"), "tracer {command}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_recording_cut_short_says_what_was_lost_before_the_cut() {
    let dir = std::env::temp_dir().join(format!("tracer-lostcut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("lostcut.trace");
    // The smallest buffers (1 MiB of ring, 1 MiB of slots): at the default size 2 s of
    // the ping-pong's events did not always fill them, and a CI run recorded no loss at
    // all.
    let mut t = Command::new(tracer())
        .args([
            "record",
            "--buffer-mib",
            "1",
            "-o",
            rec.to_str().unwrap(),
            "--",
        ])
        // Far more rounds than the 4 s the test takes (400,000 took as little as 1.5 s
        // while the tracer was stopped, and the session ended before the kill): the
        // program is killed at the end.
        .args([program("threads_pingpong"), "100000000".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut printed = String::new();
    while !printed.contains("tracing (") {
        assert!(
            err.read_line(&mut printed).unwrap() > 0,
            "tracer exited before tracing: {printed}"
        );
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let flood = wait_until_running(t.id(), &program("threads_pingpong"));
    std::thread::sleep(Duration::from_millis(300));
    // Stopped for 2 s the tracer loses events; resumed, it writes what it read and the
    // totals so far within a second; then it is killed before it can finish.
    // SAFETY: plain kill(2) to our own child.
    assert_eq!(unsafe { libc_kill(t.id() as i32, SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(unsafe { libc_kill(t.id() as i32, SIGCONT) }, 0);
    std::thread::sleep(Duration::from_millis(1500));
    t.kill().unwrap();
    t.wait().unwrap();
    // The watchdog let it go on; it would flood the tests that follow.
    // SAFETY: plain kill(2) of the program this test started, still running.
    assert_eq!(unsafe { libc_kill(flood as i32, SIGKILL) }, 0);

    let mut reader = recording::RecordingReader::open(&rec).unwrap();
    while reader.next_item().unwrap().is_some() {}
    assert!(
        matches!(
            reader.condition().ending,
            recording::Ending::CutShort { .. }
        ),
        "the recording is complete: the tracer was not killed in time"
    );
    let totals = reader.totals();
    assert!(totals.events_lost > 0, "no loss recorded before the cut");
    assert_eq!(
        totals
            .probe_failures
            .get(ProbeFailure::RingFull.name())
            .copied(),
        Some(totals.events_lost),
        "{:?}",
        totals.probe_failures
    );
    // Every command says both: cut short, and how many were lost.
    for command in ["summary", "analyze", "report", "metrics"] {
        let out = Command::new(tracer())
            .arg(command)
            .arg(&rec)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tracer {command}: {err}");
        assert!(
            err.contains("recording cut short"),
            "tracer {command}: {err}"
        );
        assert!(
            err.contains(&format!("warning: {} of ", totals.events_lost)),
            "tracer {command}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The tracer stopped while a program makes 300,000 futex calls (600,000 records, an
/// entry and an exit each, in a fraction of a second, as fast as one CPU makes them;
/// about 2.5 s of GROMACS at 2 ranks of 2 threads): the default buffers keep them all on
/// a machine of at least 12 GiB (a ring of 32 MiB or more, and the slots: 750,000 such
/// records). A ring of 16 MiB, the default of 2 CPUs before the ring grew with the
/// memory, kept about 390,000 and lost a third.
#[test]
fn a_burst_while_the_reader_is_stopped_is_kept() {
    let memory_gib = tracer_user::machine_memory_bytes().expect("MemTotal") >> 30;
    assert!(
        memory_gib >= 12,
        "this test states the default buffers of a machine of 12 GiB or more; this one has {memory_gib} GiB"
    );
    let calls: u64 = 300_000;
    let dir = std::env::temp_dir().join(format!("tracer-burst-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("burst.trace");
    let mut t = Command::new(tracer())
        .args(["record", "-q", "-o", rec.to_str().unwrap(), "--"])
        .arg(program("futex_burst"))
        .arg(calls.to_string())
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(t.stdout.take().unwrap()));
    let err = read_all(Box::new(t.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let wait_for = |name: &str| {
        while !dir.join(name).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "no {name} from futex_burst"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Traced from its exec: its probes are in before it creates `ready`.
    wait_for("ready");
    // SAFETY: plain kill(2) to our own child. `Resume` sends SIGCONT whatever happens
    // next (a panic would leave it stopped otherwise).
    assert_eq!(unsafe { libc_kill(t.id() as i32, SIGSTOP) }, 0);
    let resume = Resume(t.id() as i32);
    std::fs::write(dir.join("go"), "").unwrap();
    wait_for("done");
    drop(resume);
    let status = t.wait().unwrap();
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.code(), Some(0), "{err}");
    let whole = recording::read_all(&rec).expect("complete recording");
    assert_eq!(
        whole.trailer.events_lost, 0,
        "{:?}\n{err}",
        whole.trailer.probe_failures
    );
    // Every call of the burst is in the recording: an entry on the program's word each.
    let word = out
        .lines()
        .find_map(|l| l.strip_prefix("word 0x"))
        .and_then(|w| u64::from_str_radix(w.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no word address: {out}"));
    let on_word = whole
        .items
        .iter()
        .filter(|i| matches!(i, recording::Item::Record(Record::FutexEnter(f)) if f.uaddr == word))
        .count() as u64;
    assert_eq!(on_word, calls, "futex entries on the burst's word");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends SIGCONT to a stopped process when dropped.
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) to the test's own child.
        unsafe { libc_kill(self.0, SIGCONT) };
    }
}
