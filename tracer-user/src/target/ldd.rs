//! The shared libraries a program will load, as `ldd` resolves them: the one place the
//! tracer runs a helper program (the system's dynamic loader, or `ldd`). It runs while a
//! traced process is held at its exec, so it has a deadline: past it the helper is
//! killed and the program counts as needing nothing (its libraries are then probed when
//! it maps them, or not at all).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::target::elf_file::open_elf;

/// How long the helper may take. It takes 2 ms here (`ldd`: 6-11 ms); a program whose libraries are on a
/// hung network file system must not hold a rank (and the session) for longer.
pub(crate) const LDD_DEADLINE: Duration = Duration::from_secs(2);

/// How often a running helper is checked on.
const POLL: Duration = Duration::from_millis(2);

/// The absolute paths `ldd` resolves for the program at `exe`, with `LD_LIBRARY_PATH`
/// set to `ld_library_path` (None: unset), not canonicalized; empty when `ldd` fails,
/// finds nothing (a static program) or misses its deadline.
pub(crate) fn resolved_libraries(
    exe: &Path,
    ld_library_path: Option<&str>,
    deadline: Duration,
) -> Vec<PathBuf> {
    let mut cmd = match trusted_loader_of(exe) {
        Some(loader) => {
            let mut cmd = Command::new(loader);
            cmd.arg("--list");
            cmd
        }
        None => Command::new("ldd"),
    };
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

/// The system's dynamic loaders, as `ldd` knows them (its `RTLDLIST`). A program whose
/// interpreter is one of them has its libraries listed by that loader (`LOADER --list
/// PROGRAM`, what `ldd` runs after a shell script's checks: 2 ms instead of 6-11 ms, in
/// the hold of every program whose needs were not known before its exec). Any other
/// program goes through `ldd`, so that no loader a program names is ever run.
const SYSTEM_LOADERS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux.so.2",
    "/libx32/ld-linux-x32.so.2",
];

/// The system loader `exe` names as its interpreter (`PT_INTERP`), if it names one.
fn trusted_loader_of(exe: &Path) -> Option<PathBuf> {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let elf = open_elf(exe).ok()?;
    let data = object::ReadCache::new(elf.file);
    let file = ElfFile64::<object::Endianness, _>::parse(&data).ok()?;
    let endian = file.endian();
    let interpreter = file
        .elf_program_headers()
        .iter()
        .find_map(|ph| ph.interpreter(endian, &data).ok().flatten())?;
    // Run by the name the program gives it (under another name the loader lists itself
    // as one of the program's libraries).
    let named = PathBuf::from(std::str::from_utf8(interpreter).ok()?);
    let file = named.canonicalize().ok()?;
    SYSTEM_LOADERS
        .iter()
        .filter_map(|l| Path::new(l).canonicalize().ok())
        .any(|l| l == file)
        .then_some(named)
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

    /// The loader lists what `ldd` does, for a program that names the system's loader;
    /// a file that names none (most shared libraries, a script) goes to `ldd`.
    #[test]
    fn the_system_loader_resolves_what_ldd_does() {
        let ls = Path::new("/bin/ls");
        assert!(
            trusted_loader_of(ls).is_some(),
            "ls names the system loader"
        );
        let mut ldd = Command::new("ldd");
        ldd.arg(ls).stdout(Stdio::piped());
        let by_ldd = parse(&String::from_utf8_lossy(
            &output_within(ldd, LDD_DEADLINE).expect("ldd answers"),
        ));
        assert!(!by_ldd.is_empty());
        assert_eq!(resolved_libraries(ls, None, LDD_DEADLINE), by_ldd);
        // (glibc's libc.so.6 can run, and names the loader.)
        assert!(by_ldd.iter().any(|lib| trusted_loader_of(lib).is_none()));
        assert_eq!(trusted_loader_of(Path::new("/usr/bin/ldd")), None);
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
