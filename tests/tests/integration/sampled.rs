//! Sampled stacks through the `tracer` binary, without tracing: a recording written here
//! holds one thread's 30 us of work and three SAMPLE records whose frames are addresses
//! of a real -O2 program compiled here (mapped where a PIE would be), so that the real
//! symbolizer names them. `tracer report` and `tracer export` must give every function
//! its time by construction: the thread's work is the whole critical path, sampled at
//! its CPU clock 10, 20 and 30 us, in `main > solve`, `main > solve`, `main > solve >
//! helper`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tracer_analysis::recording::{RecordingMeta, RecordingWriter};
use tracer_analysis::records::Record;
use tracer_analysis::{Mapping, ProcessInfo};
use tracer_common::{kind, unwind_end, EventHeader, SampleRecord, SwitchRecord};
use tracer_tests::tracer;

const SOURCE: &str = r#"
__attribute__((noinline)) long helper(long x) { return x * 3 + 1; }
__attribute__((noinline)) long solve(long x) { return helper(x) + 2; }
int main(int argc, char **argv) { (void)argv; return (int)solve(argc); }
"#;

/// Where the program's file offset 0 is mapped in the recorded process.
const BIAS: u64 = 0x5555_0000_0000;
const PID: u32 = 4242;

/// The program's symbols' addresses (`nm`), in its own address space.
fn symbol(exe: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(exe).output().expect("nm");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {text}"));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

fn header(kind: u16, ts_ns: u64, cpu_ns: u64) -> EventHeader {
    EventHeader {
        ts_ns,
        cpu_ns,
        tgid: PID,
        tid: PID,
        kind,
        call: 0,
        cpu: 0,
    }
}

/// Writes the recording: work from CPU clock 0 to 30 us, three samples.
fn write_recording(dir: &Path, exe: &Path) -> PathBuf {
    let at = |name: &str, offset: u64| BIAS + symbol(exe, name) + offset;
    // A return address is one past a call: the byte before it is in the caller.
    let main_ret = at("main", 1);
    let solve_ret = at("solve", 1);
    let stacks = [
        vec![at("solve", 0), main_ret],
        vec![at("solve", 0), main_ret],
        vec![at("helper", 0), solve_ret, main_ret],
    ];
    let path = dir.join("sampled.trace");
    let mut w = RecordingWriter::create(&path, &RecordingMeta::default()).unwrap();
    w.process(&ProcessInfo {
        pid: PID,
        ppid: 1,
        command: exe.display().to_string(),
        exe: exe.display().to_string(),
        mappings: vec![Mapping {
            path: exe.display().to_string(),
            bias: BIAS,
        }],
        ..Default::default()
    })
    .unwrap();
    let switch_out = |ts, cpu| SwitchRecord {
        header: header(kind::SWITCH_OUT, ts, cpu),
        prev_state: 1,
    };
    w.record(Record::SwitchOut(switch_out(1_000_000, 0)).as_bytes())
        .unwrap();
    for (i, frames) in stacks.iter().enumerate() {
        let cpu = 10_000 * (i as u64 + 1);
        let mut r = SampleRecord {
            header: header(kind::SAMPLE, 1_000_000 + cpu, cpu),
            depth: frames.len() as u16,
            end: unwind_end::COMPLETE,
            stack_bytes: 512,
            ..Default::default()
        };
        r.frames[..frames.len()].copy_from_slice(frames);
        w.record(Record::Sample(Box::new(r)).as_bytes()).unwrap();
    }
    w.record(Record::SwitchOut(switch_out(1_040_000, 30_000)).as_bytes())
        .unwrap();
    w.finish(&Default::default()).unwrap();
    path
}

fn run(args: &[&str]) -> String {
    let out = Command::new(tracer()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tracer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn report_and_exports_name_the_sampled_functions() {
    let dir = std::env::temp_dir().join(format!("tracer-sampled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("prog.c"), dir.join("prog"));
    std::fs::write(&src, SOURCE).unwrap();
    let status = Command::new("cc")
        .args(["-g", "-O2", "-fPIE", "-pie"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("cc");
    assert!(status.success());
    let rec = write_recording(&dir, &exe);
    let rec = rec.to_str().unwrap();

    let report: Value = serde_json::from_str(&run(&["report", "--json", rec])).unwrap();
    assert_eq!(report["critical_path"]["length_ns"], 30_000);
    let s = &report["sampled"];
    assert_eq!((&s["samples"], &s["complete"]), (&3.into(), &3.into()));
    let row = |name: &str| -> Vec<u64> {
        let f = s["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {s}"));
        ["cp_ns", "cpu_ns", "self_cp_ns", "samples", "zeroing_ns"]
            .map(|k| f[k].as_u64().unwrap())
            .to_vec()
    };
    assert_eq!(row("main"), [30_000, 30_000, 0, 3, 30_000]);
    assert_eq!(row("solve"), [30_000, 30_000, 20_000, 3, 30_000]);
    assert_eq!(row("helper"), [10_000, 10_000, 10_000, 1, 10_000]);
    let text = run(&["report", rec]);
    assert!(
        text.contains(
            "functions on the critical path (sampled): 3 samples, 3 unwound completely (100.00 %)"
        ),
        "{text}"
    );

    // The folded stacks: sampled by default, since the recording has samples.
    let folded = run(&["export", "--format", "folded", "-o", "-", rec]);
    let process = format!("prog pid {PID};tid {PID}");
    assert_eq!(
        folded,
        format!("{process};main;solve 20000\n{process};main;solve;helper 10000\n")
    );
    let html = dir.join("report.html");
    run(&["report", rec, "--html", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    for id in ["sampled-critical-path", "sampled-cpu", "sampled-difference"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(page.contains("<title>helper (10,000 ns, 33.33%)</title>"));
    let _ = std::fs::remove_dir_all(&dir);
}
