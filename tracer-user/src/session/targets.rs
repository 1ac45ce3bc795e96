//! The session's first stage: what it is asked to trace, checked, and the processes it
//! traces from the start.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::launch::find_in_path;
use super::watchdog::Watchdog;
use super::{Analysis, RecordOptions, SessionError};
use crate::target::procfs;

pub(super) struct Targets {
    /// Every process on the machine (`--all`, or `--pid 1`), from its first MPI/PVM call
    /// or selected procedure on, nothing held.
    pub(super) system_wide: bool,
    /// The running processes traced from the start: the `--pid`s and their descendants,
    /// sorted, the tracer's own tree left out.
    pub(super) running: Vec<u32>,
    /// The command to launch, found in PATH.
    pub(super) program: Option<PathBuf>,
    /// Told of every process that may be held, to let it go if the tracer dies; None
    /// system-wide, where nothing is ever held.
    pub(super) watchdog: Option<Watchdog>,
}

impl Targets {
    /// Checks the options and finds the targets. The watchdog starts here, before any
    /// probe is loaded or process held, and knows the running targets when this returns.
    pub(super) fn find(opts: &RecordOptions) -> Result<Targets, SessionError> {
        check(opts)?;
        // Every process descends from init: `--pid 1` is the whole machine, traced as
        // with `--all`, not every exec on the machine held while its libraries are
        // probed.
        let system_wide = opts.system_wide || opts.pids.contains(&1);
        if system_wide && !opts.system_wide {
            log::warn!("--pid 1 is every process on the machine: tracing system-wide, as --all");
        }
        let pids: Vec<u32> = opts.pids.iter().copied().filter(|&p| p != 1).collect();
        let program = match opts.command.first() {
            Some(c) => {
                Some(find_in_path(c).ok_or_else(|| SessionError::CommandNotFound(c.clone()))?)
            }
            None => None,
        };
        let mut watchdog = if system_wide {
            None
        } else {
            Some(Watchdog::start()?)
        };
        // The tracer's tree now: itself and the watchdog (the command is launched later).
        let own_tree: HashSet<u32> = procfs::descendants(std::process::id())
            .into_iter()
            .collect();
        let mut running: Vec<u32> = pids
            .iter()
            .flat_map(|&p| procfs::descendants(p))
            .filter(|p| !own_tree.contains(p))
            .collect();
        running.sort_unstable();
        running.dedup();
        if let Some(w) = &mut watchdog {
            for &pid in &running {
                w.tell(pid);
            }
        }
        Ok(Targets {
            system_wide,
            running,
            program,
            watchdog,
        })
    }
}

/// Every output file can be written, and no two name the same file: found out before
/// anything runs, not once the program has run.
fn check_outputs(opts: &RecordOptions) -> Result<(), SessionError> {
    let outputs: Vec<(&'static str, &Path)> = [
        ("-o", opts.output.as_deref()),
        ("--summary-json", opts.summary_json.as_deref()),
        ("--profile-json", opts.profile_json.as_deref()),
    ]
    .into_iter()
    .filter_map(|(option, path)| path.map(|p| (option, p)))
    .collect();
    for (i, &(option, path)) in outputs.iter().enumerate() {
        writable(path).map_err(|source| SessionError::Unwritable {
            option,
            path: path.to_path_buf(),
            source,
        })?;
        let same = |p: &Path| p == path || same_file(p, path);
        if let Some(&(first, _)) = outputs[..i].iter().find(|(_, p)| same(p)) {
            return Err(SessionError::SameOutput {
                first,
                second: option,
                path: path.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Whether two existing paths are one file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino() && a.is_file(),
        _ => false,
    }
}

/// Whether `path` can be written, without creating or truncating it: an existing file
/// opens for writing; a new one's directory exists and can be written.
fn writable(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "it is a directory",
        ));
    }
    if path.exists() {
        return std::fs::OpenOptions::new().write(true).open(path).map(drop);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no directory {}", dir.display()),
        ));
    }
    let dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: access(2) on a NUL-terminated path.
    if unsafe { libc::access(dir.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Refuses a session that cannot run: not root, nothing to trace, options that do not
/// go together, a `--pid` that is not there or is the tracer's own.
fn check(opts: &RecordOptions) -> Result<(), SessionError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(SessionError::NotRoot);
    }
    if opts.pids.is_empty() && opts.command.is_empty() && !opts.system_wide {
        return Err(SessionError::NoTarget);
    }
    if opts.analysis == Analysis::AfterTracing {
        if opts.output.is_none() {
            return Err(SessionError::AnalyzeAfterWithoutRecording);
        }
        if opts.interval.is_some() {
            return Err(SessionError::AnalyzeAfterWithSamples);
        }
    }
    check_outputs(opts)?;
    for &pid in &opts.pids {
        if pid == 0 || !procfs::is_alive(pid) {
            return Err(SessionError::NoSuchProcess(pid));
        }
    }
    // The tracer never traces, holds or waits on itself or what it runs (`ldd`, the
    // watchdog): a `--pid` of one of them is refused, and a `--pid` of one of its
    // ancestors (the shell that started it, sudo) traces that process's tree without
    // the tracer's own.
    let own = procfs::descendants(std::process::id());
    match opts.pids.iter().find(|&p| own.contains(p)) {
        Some(&pid) => Err(SessionError::TracerItself(pid)),
        None => Ok(()),
    }
}
