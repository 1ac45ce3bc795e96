//! A recording is usable up to the last moment (issue 20): a tracer killed with SIGKILL
//! leaves a file every command reads up to about a second before the kill; a file cut by
//! hand, or with a bit flipped in a chunk, reads too, with a warning.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracer_analysis::recording::{Ending, Item, RecordingReader};
use tracer_tests::{program, tracer};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracer-it-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `tracer ARGS`; returns (success, stderr).
fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(tracer())
        .args(args)
        .output()
        .expect("run tracer");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every subcommand that reads a recording exits 0 on `file`; the stderr of `analyze`.
fn every_command_reads(file: &Path, dir: &Path) -> String {
    let f = file.to_str().unwrap();
    let export = dir.join("export.json");
    let export = export.to_str().unwrap();
    let (ok, analyze) = run(&["analyze", f]);
    assert!(ok, "analyze {f} failed:\n{analyze}");
    for args in [
        vec!["analyze", "--json", f],
        vec!["report", f],
        vec!["report", "--json", f],
        vec!["metrics", f],
        vec!["summary", f],
        vec!["dump", f],
        vec!["export", "-o", export, f],
        vec!["whatif", f],
    ] {
        let (ok, err) = run(&args);
        assert!(ok, "tracer {args:?} failed:\n{err}");
    }
    analyze
}

/// The processes whose parent is `pid`, and theirs.
fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut parents = vec![pid];
    while let Some(p) = parents.pop() {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            break;
        };
        for e in dir.flatten() {
            let Some(child) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: comm may hold spaces, so split after the ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if ppid == Some(p) {
                all.push(child);
                parents.push(child);
            }
        }
    }
    all
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// The last record's time after the recording's start, the number of records, and how
/// the file ended.
fn read_back(path: &Path) -> (u64, u64, Ending) {
    let mut r = RecordingReader::open(path).expect("open recording");
    let (mut last, mut n) = (0, 0);
    while let Some(item) = r.next_item().expect("read recording") {
        if let Item::Record(rec) = item {
            last = last.max(rec.header().ts_ns);
            n += 1;
        }
    }
    let start = r.meta.start_monotonic_ns;
    (last.saturating_sub(start), n, r.condition().ending)
}

#[test]
fn a_killed_tracer_leaves_a_recording_every_command_reads() {
    let dir = scratch("recovery-kill");
    let rec = dir.join("rec.trace");
    // Futex wakes paced at 20 000 a second for 3 s: events all along.
    let mut child = Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(&rec)
        .arg("--")
        .arg(program("bench_probe"))
        .args(["flood", "20000", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tracer");
    let pid = child.id();
    // Wait until it traces, then 1.5 s more.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !line.contains("tracer: tracing") {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 || Instant::now() > deadline {
            break;
        }
    }
    assert!(line.contains("tracer: tracing"), "the tracer did not start");
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    std::thread::sleep(Duration::from_millis(1500));
    let traced = descendants(pid);
    signal(pid, "-KILL");
    let killed_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let _ = child.wait();
    // Nothing the tracer started is left stopped: let it run out (it exits by itself).
    for p in &traced {
        signal(*p, "-CONT");
    }

    let stderr = every_command_reads(&rec, &dir);
    assert!(
        stderr.contains("recording cut short after"),
        "no cut-short message:\n{stderr}"
    );
    assert_eq!(
        stderr.matches("recording cut short").count(),
        1,
        "said more than once:\n{stderr}"
    );
    let (last_ns, events, ending) = read_back(&rec);
    assert!(
        matches!(ending, Ending::CutShort { .. }),
        "ending {ending:?}"
    );
    assert!(events > 0, "no events before the kill");
    let meta = RecordingReader::open(&rec).unwrap().meta;
    let kill_ns = (killed_at.as_nanos() - meta.start_unix_ns) as u64;
    assert!(
        last_ns + 1_200_000_000 >= kill_ns && last_ns <= kill_ns + 100_000_000,
        "last event at {:.3} s, kill at {:.3} s after the start ({events} events)",
        last_ns as f64 / 1e9,
        kill_ns as f64 / 1e9
    );

    // The same file cut by hand in its last chunk: that chunk is dropped, said so.
    let bytes = std::fs::read(&rec).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let stderr = every_command_reads(&cut, &dir);
    assert!(
        stderr.contains("the last partial chunk") && stderr.contains("was dropped"),
        "{stderr}"
    );
    for p in &traced {
        signal(*p, "-CONT");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Offsets of the chunks after the file header (version 3 framing).
fn chunk_offsets(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push((at, at + 16 + len));
        at += 16 + len;
    }
    out
}

#[test]
fn a_flipped_bit_loses_one_chunk() {
    let dir = scratch("recovery-flip");
    let rec = dir.join("rec.trace");
    let out = Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(&rec)
        .arg("--")
        .arg(program("bench_probe"))
        .args(["flood", "100000", "1"])
        .output()
        .expect("run tracer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bytes = std::fs::read(&rec).unwrap();
    let chunks = chunk_offsets(&bytes);
    assert!(chunks.len() >= 4, "{} chunks", chunks.len());
    let (_, all, _) = read_back(&rec);
    // A bit in the middle of the payload of a chunk in the middle.
    let (start, end) = chunks[chunks.len() / 2];
    bytes[(start + 16 + end) / 2] ^= 0x10;
    let flipped = dir.join("flipped.trace");
    std::fs::write(&flipped, &bytes).unwrap();
    let stderr = every_command_reads(&flipped, &dir);
    assert!(
        stderr.contains("recording has 1 corrupt chunk"),
        "no corrupt-chunk message:\n{stderr}"
    );
    assert!(!stderr.contains("cut short"), "{stderr}");
    let (_, events, ending) = read_back(&flipped);
    assert_eq!(ending, Ending::Complete);
    assert!(events <= all && events + 20_000 > all, "{events} of {all}");
    std::fs::remove_dir_all(&dir).unwrap();
}
