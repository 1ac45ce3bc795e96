//! Bad input: one clear line and a non-zero exit.

use tracer_tests::{program, tracer, tracer_fails};

#[test]
fn unknown_pid() {
    let (code, err) = tracer_fails(&["record", "--pid", "999999999"]);
    assert_eq!(code, 1);
    assert!(err.contains("no process with PID 999999999"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn symbol_that_matches_nothing_is_named() {
    let prog = program("threads_busy");
    let (_, err) = tracer_fails(&[
        "record",
        "--func",
        "no_such_function_xyz",
        "--",
        &prog,
        "1",
        "1",
    ]);
    assert!(err.contains("no_such_function_xyz"), "{err}");
}

#[test]
fn missing_command_and_library() {
    let (_, err) = tracer_fails(&["record", "--", "/no/such/program"]);
    assert!(err.contains("command not found"), "{err}");
    let (_, err) = tracer_fails(&[
        "record",
        "--lib",
        "/no/such/libmpi.so",
        "--all",
        "--duration",
        "1",
    ]);
    assert!(err.contains("/no/such/libmpi.so"), "{err}");
}

/// `--analyze-after` reads the recording back: it needs one, and has no profile to sample
/// while tracing. Both are refused before anything is traced.
#[test]
fn analyze_after_needs_a_recording_and_no_samples() {
    let prog = program("threads_busy");
    let (code, err) = tracer_fails(&["record", "--analyze-after", "--", &prog, "1", "1"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--analyze-after") && err.contains("-o FILE"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = std::env::temp_dir().join(format!("tracer-after-{}.trace", std::process::id()));
    let out = out.to_str().unwrap();
    let (code, err) = tracer_fails(&[
        "record",
        "--analyze-after",
        "-o",
        out,
        "--interval",
        "1",
        "--",
        &prog,
        "1",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--interval"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!std::path::Path::new(out).exists(), "nothing was recorded");
}

#[test]
fn not_root() {
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(tracer())
        .args(["record", "--all", "--duration", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs root"), "{err}");
}

#[test]
fn truncated_and_corrupt_recordings() {
    let dir = std::env::temp_dir().join(format!("tracer-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("r.trace");
    let ok = std::process::Command::new(tracer())
        .args(["record", "-q", "-o"])
        .arg(&rec)
        .args(["--", &program("threads_busy"), "2", "5"])
        .status()
        .unwrap();
    assert!(ok.success());
    let bytes = std::fs::read(&rec).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    // A recording cut short is read up to its last complete chunk, with a warning
    // (docs/reliability.md); recovery.rs checks what is read.
    let out = std::process::Command::new(tracer())
        .arg("summary")
        .arg(&cut)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("cut short").count(), 1, "{err}");
    let junk = dir.join("junk.trace");
    std::fs::write(&junk, b"hello world, not a trace").unwrap();
    let (_, err) = tracer_fails(&["dump", junk.to_str().unwrap()]);
    assert!(err.contains("not a recording"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
