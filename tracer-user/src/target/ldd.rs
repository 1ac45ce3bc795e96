//! The shared libraries a program will load, as `ldd` resolves them: the one place the
//! tracer runs a helper program. It runs while a traced process is held at its exec, so
//! it has a deadline: past it `ldd` is killed and the program counts as needing nothing
//! (its libraries are then probed when it maps them, or not at all).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `ldd` may take. It takes 6-9 ms here; a program whose libraries are on a
/// hung network file system must not hold a rank (and the session) for longer.
pub(crate) const LDD_DEADLINE: Duration = Duration::from_secs(2);

/// How often a running `ldd` is checked on.
const POLL: Duration = Duration::from_millis(2);

/// The absolute paths `ldd` resolves for the program at `exe`, with `LD_LIBRARY_PATH`
/// set to `ld_library_path` (None: unset), not canonicalized; empty when `ldd` fails,
/// finds nothing (a static program) or misses its deadline.
pub(crate) fn resolved_libraries(
    exe: &Path,
    ld_library_path: Option<&str>,
    deadline: Duration,
) -> Vec<PathBuf> {
    let mut cmd = Command::new("ldd");
    cmd.arg(exe)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    match ld_library_path {
        Some(p) => cmd.env("LD_LIBRARY_PATH", p),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let Some(stdout) = output_within(cmd, deadline) else {
        return Vec::new();
    };
    parse(&String::from_utf8_lossy(&stdout))
}

/// The standard output of `cmd` if it exits within `deadline`; else it is killed and
/// reaped, and None. The output is read after the exit: `ldd` writes a few kilobytes,
/// well within a pipe's buffer.
fn output_within(mut cmd: Command, deadline: Duration) -> Option<Vec<u8>> {
    let mut child = cmd.spawn().ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < deadline => std::thread::sleep(POLL),
            _ => {
                log::warn!(
                    "ldd {:?} did not answer within {deadline:?}: killed",
                    cmd.get_args().next().unwrap_or_default()
                );
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = Vec::new();
    child.stdout.take()?.read_to_end(&mut out).ok()?;
    Some(out)
}

/// The paths after `=>` in `ldd`'s lines ("libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6
/// (0x...)"); "not found" and the vdso's line have none.
fn parse(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            Some(PathBuf::from(
                l.split("=> ").nth(1)?.split_whitespace().next()?,
            ))
        })
        .filter(|p| p.is_absolute())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_paths_are_read_from_ldd_lines() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibmpi.so.40 => /usr/lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f)\n\
                    \tlibgone.so => not found\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse(text),
            [PathBuf::from("/usr/lib/x86_64-linux-gnu/libmpi.so.40")]
        );
    }

    #[test]
    fn a_helper_past_its_deadline_is_killed_and_yields_nothing() {
        let mut cmd = Command::new("sleep");
        cmd.arg("10").stdout(Stdio::piped());
        let start = Instant::now();
        assert_eq!(output_within(cmd, Duration::from_millis(100)), None);
        assert!(start.elapsed() < Duration::from_secs(5));
        let mut cmd = Command::new("echo");
        cmd.arg("hi").stdout(Stdio::piped());
        assert_eq!(
            output_within(cmd, Duration::from_secs(5)).as_deref(),
            Some(&b"hi\n"[..])
        );
    }
}
