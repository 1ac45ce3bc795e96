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

/// A scratch directory and a marker file in it that `touch MARKER`, the command of the
/// early-check tests, would create if the tracer launched it.
fn not_launched_dir(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tracer-early-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("launched");
    (dir, marker)
}

/// What can be checked before launching is: output paths that cannot be written, two
/// outputs naming one file, a `--func` that matches nothing in the program's files
/// (path-less or `PATH:SYMBOL`). Each fails with one line and the command never runs:
/// `touch MARKER` (an executable, so its files are searched) leaves no marker.
#[test]
fn what_can_be_checked_fails_before_the_command_runs() {
    let (dir, marker) = not_launched_dir("checks");
    let m = marker.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let rec = dir.join("r.trace");
    let r = rec.to_str().unwrap();
    let busy = format!("{}:no_such_function_xyz", program("threads_busy"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--summary-json", "/no/such/dir/s.json"],
            "--summary-json /no/such/dir/s.json cannot be written: no directory /no/such/dir",
        ),
        (
            vec!["--profile-json", d],
            "cannot be written: it is a directory",
        ),
        (
            vec!["-o", r, "--profile-json", r],
            "-o and --profile-json name the same file",
        ),
        (
            vec!["--func", "no_such_function_xyz"],
            "--func no_such_function_xyz matches no function in /usr/bin/touch",
        ),
        (vec!["--func", &busy], "matches no function in"),
    ];
    for (args, says) in cases {
        let mut all = vec!["record"];
        all.extend(&args);
        all.extend(["--", "touch", m]);
        let (code, err) = tracer_fails(&all);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?}: the command ran: {err}");
    }
    assert!(!rec.exists(), "no recording was started");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `--func` that is near a name the program has is told the near names, as `tracer
/// functions` lists them: gfortran's trailing underscore and the OpenMP outlined
/// function of tests/programs/omp_conj_grad_f.f90's `conj_grad`, and the C program's
/// `work` asked as `Work`.
#[test]
fn a_func_that_matches_nothing_names_the_near_names() {
    let (_, err) = tracer_fails(&[
        "record",
        "--func",
        "conj_grad",
        "--",
        &program("omp_conj_grad_f"),
    ]);
    assert!(
        err.contains("near names: conj_grad_, conj_grad_._omp_fn.0 (`tracer functions"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (_, err) = tracer_fails(&["record", "--func", "Work", "--", &program("threads_busy")]);
    assert!(err.contains("near names: work ("), "{err}");
}

/// Habits of perf, bpftrace and strace: `-p PID` and `-a`; a negative duration is a
/// number that is not positive, not a flag; a ring over the kernel's limit is refused
/// before anything is loaded, with the limit; `top --help` offers no option that does
/// not apply to it.
#[test]
fn command_line_habits() {
    let (code, err) = tracer_fails(&["record", "-p", "999999999"]);
    assert_eq!(code, 1);
    assert!(err.contains("no process with PID 999999999"), "{err}");
    let (code, err) = tracer_fails(&["record", "-a", "--duration", "-1"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "tracer: error: --duration must be a positive number of seconds, got -1"
    );
    let (code, err) = tracer_fails(&["record", "--buffer-mib", "4096", "--", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "tracer: error: --buffer-mib 4096 is over the kernel's limit: a ring buffer holds at \
         most 2048 MiB (its size is a 32-bit count of bytes)"
    );
    let help = std::process::Command::new(tracer())
        .args(["top", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--func"), "{help}");
    assert!(!help.contains("--analyze-after"), "{help}");
}
