//! Under sudo the command the tracer launches runs as the user who ran sudo, with that
//! user's HOME, USER and LOGNAME; `--user` chooses another (`--user root` keeps root);
//! the recording and summary are that user's, mode 0600. sudo is played by setting the
//! variables it sets (SUDO_USER, SUDO_UID, SUDO_GID) for the tracer, run as root.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tracer_common::call;
use tracer_tests::{program, read_recording, tracer, tracer_fails};

/// The unprivileged user the tests run commands as.
const USER: &str = "tracer-test";

/// The test user's uid and gid, created (a system user, no home) if missing.
fn test_user() -> (u32, u32) {
    let id = |flag: &str| {
        let out = Command::new("id").arg(flag).arg(USER).output().unwrap();
        out.status.success().then(|| {
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u32>()
                .unwrap()
        })
    };
    if id("-u").is_none() {
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .output()
            .expect("useradd");
        // Another test may have created it meanwhile (exit code 9: already exists).
        assert!(
            out.status.success() || out.status.code() == Some(9),
            "useradd {USER}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

/// A fresh directory everyone can enter, with copies of `programs` (the test programs'
/// directory may not be open to the test user), mode 0755.
fn open_dir(tag: &str, programs: &[&str]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracer-it-{}-runas-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    for p in programs {
        let to = d.join(p);
        std::fs::copy(program(p), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    d
}

/// `tracer record -o DIR/rec.trace --summary-json DIR/summary.json ARGS -- COMMAND` as
/// sudo would run it for the test user.
fn record_under_sudo(dir: &Path, args: &[&str], command: &[&str]) -> Output {
    let (uid, gid) = test_user();
    Command::new(tracer())
        .arg("record")
        .arg("-o")
        .arg(dir.join("rec.trace"))
        .arg("--summary-json")
        .arg(dir.join("summary.json"))
        .args(args)
        .arg("--")
        .args(command)
        .current_dir(dir)
        .env("SUDO_USER", USER)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env("SUDO_COMMAND", "tracer record")
        // mpirun must not be told that root may run it.
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
        .output()
        .expect("run tracer")
}

/// What `cmd args` prints, trimmed.
fn field(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "tracer failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the shell command `IDS` printed: `uid gid groups HOME USER LOGNAME`.
const IDS: &str =
    r#"echo "ids $(id -u) $(id -g) $(id -G | tr ' ' ,) $HOME $USER $LOGNAME $SUDO_COMMAND""#;

fn ids_line(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ids "))
        .unwrap_or_else(|| panic!("the command printed no ids: {stdout}"));
    line.split(' ').map(str::to_string).collect()
}

fn assert_private(path: &Path, uid: u32, gid: u32) {
    let m = std::fs::metadata(path).unwrap();
    assert_eq!(
        m.mode() & 0o777,
        0o600,
        "{} mode {:o}",
        path.display(),
        m.mode()
    );
    assert_eq!((m.uid(), m.gid()), (uid, gid), "{} owner", path.display());
}

#[test]
fn command_runs_as_the_sudo_user() {
    let (uid, gid) = test_user();
    let dir = open_dir("sudo", &[]);
    let out = record_under_sudo(&dir, &[], &["/bin/sh", "-c", IDS]);
    let ids = ids_line(&stdout_ok(&out));
    assert_eq!(ids[0], uid.to_string(), "uid: {ids:?}");
    assert_eq!(ids[1], gid.to_string(), "gid: {ids:?}");
    // initgroups: the user's groups only, none of root's.
    assert_eq!(
        ids[2],
        field("id", &["-G", USER]).replace(' ', ","),
        "groups: {ids:?}"
    );
    let home = field("getent", &["passwd", USER]);
    assert_eq!(
        Some(ids[3].as_str()),
        home.split(':').nth(5),
        "HOME: {ids:?}"
    );
    assert_eq!(
        (ids[4].as_str(), ids[5].as_str()),
        (USER, USER),
        "USER, LOGNAME: {ids:?}"
    );
    // The rest of the environment is as sudo gave it.
    assert_eq!(ids[6..].join(" "), "tracer record", "SUDO_COMMAND: {ids:?}");
    assert_private(&dir.join("rec.trace"), uid, gid);
    assert_private(&dir.join("summary.json"), uid, gid);
    // The tracer still saw the command (held at exec, continued by root, read in /proc).
    let t = read_recording(&dir.join("rec.trace"));
    assert!(
        t.meta.command.first().is_some_and(|c| c == "/bin/sh"),
        "{:?}",
        t.meta.command
    );
    assert!(t.records().count() > 0, "nothing recorded");
    // Under sudo an export is the user's too.
    let (uid_s, gid_s) = (uid.to_string(), gid.to_string());
    let out = Command::new(tracer())
        .arg("export")
        .arg(dir.join("rec.trace"))
        .arg("-o")
        .arg(dir.join("trace.json"))
        .env("SUDO_USER", USER)
        .env("SUDO_UID", &uid_s)
        .env("SUDO_GID", &gid_s)
        .output()
        .unwrap();
    stdout_ok(&out);
    assert_private(&dir.join("trace.json"), uid, gid);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn user_root_keeps_root() {
    let dir = open_dir("root", &[]);
    let out = record_under_sudo(&dir, &["--user", "root"], &["/bin/sh", "-c", IDS]);
    let ids = ids_line(&stdout_ok(&out));
    assert_eq!((ids[0].as_str(), ids[1].as_str()), ("0", "0"), "{ids:?}");
    assert_eq!(
        (ids[4].as_str(), ids[5].as_str()),
        ("root", "root"),
        "{ids:?}"
    );
    assert_private(&dir.join("rec.trace"), 0, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_user_is_one_line() {
    let (code, err) = tracer_fails(&["record", "--user", "nosuchuser", "--", "/usr/bin/id"]);
    assert_ne!(code, 0);
    assert_eq!(
        err.trim(),
        "tracer: error: no such user: nosuchuser",
        "{err}"
    );
}

#[test]
fn open_mpi_ranks_run_as_the_sudo_user() {
    let (uid, gid) = test_user();
    let (n, rounds) = (4, 10);
    let dir = open_dir("openmpi", &["mpi_ring.openmpi"]);
    let prog = dir.join("mpi_ring.openmpi").display().to_string();
    // Without --allow-run-as-root: mpirun refuses root, so it runs only as the user.
    let rank = r#"echo "rank-ids $(id -u) $(id -g)"; exec "$0" "$@""#;
    let command = [
        "mpirun.openmpi",
        "--oversubscribe",
        "-np",
        &n.to_string(),
        "/bin/sh",
        "-c",
        rank,
        &prog,
        &rounds.to_string(),
        "256",
    ];
    let out = record_under_sudo(&dir, &[], &command);
    let stdout = stdout_ok(&out);
    let ids: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("rank-ids "))
        .collect();
    assert_eq!(ids.len(), n, "{stdout}");
    for i in ids {
        assert_eq!(i, format!("{uid} {gid}"), "{stdout}");
    }
    assert_private(&dir.join("rec.trace"), uid, gid);
    let t = read_recording(&dir.join("rec.trace"));
    // Every rank sent and received (the `id` processes have a rank in their
    // environment too, but call nothing).
    let ranks = t.ranks();
    let sends = t.calls_of(call::MPI_SEND);
    let senders: BTreeSet<i64> = sends.iter().map(|c| ranks[&c.pid]).collect();
    assert_eq!(senders, (0..n as i64).collect(), "ranks: {ranks:?}");
    assert_eq!(sends.len(), rounds * n);
    assert_eq!(t.calls_of(call::MPI_RECV).len(), rounds * n);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_runs_the_ping_pong_as_the_sudo_user() {
    let (uid, gid) = test_user();
    let dir = open_dir("calibrate", &[]);
    let table = dir.join("net.csv");
    // Without --allow-run-as-root: Open MPI's mpirun refuses root.
    let out = Command::new(tracer())
        .arg("calibrate")
        .args([
            "--mpicc",
            "mpicc.openmpi",
            "--sizes",
            "0,8",
            "--iterations",
            "5",
        ])
        .arg("-o")
        .arg(&table)
        .args(["--", "mpirun.openmpi", "--oversubscribe", "-np", "2"])
        .env("SUDO_USER", USER)
        .env("SUDO_UID", uid.to_string())
        .env("SUDO_GID", gid.to_string())
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
        .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
        .output()
        .unwrap();
    stdout_ok(&out);
    assert_private(&table, uid, gid);
    let text = std::fs::read_to_string(&table).unwrap();
    assert!(text.contains("local,8,"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
