//! The command a session launches: found in PATH, forked and held until it is traced,
//! and reaped.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::output::create_private;
use super::watchdog::Watchdog;
use super::{CommandStatus, CommandTerminal, RunAs, SessionError};
use crate::probes::Probes;

pub(super) fn find_in_path(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}

/// Forks the command, holds it until its pid is in the traced set, then lets it exec,
/// as `run_as` when given (with its HOME, USER and LOGNAME; the rest of the environment
/// is ours). The tracer, root, can still stop and continue it, and read its /proc. Its
/// standard streams are the tracer's, or, `terminal` detached, /dev/null and the output
/// file, in a process group of its own (`tracer top` draws on the terminal and reads its
/// keys).
pub(super) fn launch(
    program: &Path,
    argv: &[String],
    terminal: &CommandTerminal,
    run_as: Option<&RunAs>,
    probes: &mut Probes,
    watchdog: Option<&mut Watchdog>,
) -> Result<u32, SessionError> {
    let prog = CString::new(program.as_os_str().as_encoded_bytes())?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut argp: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    // Built before the fork: the child may not allocate.
    let env: Option<Vec<CString>> = run_as
        .map(|u| {
            u.environment()
                .into_iter()
                .map(|(k, v)| {
                    let mut kv = k.into_encoded_bytes();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_encoded_bytes());
                    CString::new(kv)
                })
                .collect::<Result<_, _>>()
        })
        .transpose()?;
    let mut envp: Vec<*const libc::c_char> = env.iter().flatten().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    const BECOME_FAILED: &[u8] =
        b"tracer: cannot run the command as the user (setgroups, setgid or setuid failed)\n";
    const EXEC_FAILED: &[u8] = b"tracer: the user cannot execute the command (can they read and \
        execute it, and enter every directory above it?)\n";
    let dev_null = c"/dev/null";
    // Opened before the fork (the file is the user's, like every output), kept open
    // until the child has its copies.
    let output = match terminal {
        CommandTerminal::Shared => None,
        CommandTerminal::Detached { output } => Some(create_private(output, run_as).map_err(
            |source| SessionError::CommandOutput {
                path: output.clone(),
                source,
            },
        )?),
    };
    let output_fd = output.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: getpid has no preconditions.
    let tracer = unsafe { libc::getpid() };
    let mut fds = [0i32; 2];
    // SAFETY: no runtime yet, and the child only calls async-signal-safe functions before
    // exec (another thread, such as `tracer top`'s view, may hold a lock at the fork: the
    // child takes none).
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        if pid == 0 {
            libc::close(fds[1]);
            let mut b = 0u8;
            libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            if let Some(out) = output_fd {
                let null = libc::open(dev_null.as_ptr(), libc::O_RDONLY);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::close(null);
                }
                // dup2 leaves the copies open across exec (the file is O_CLOEXEC).
                libc::dup2(out, 1);
                libc::dup2(out, 2);
                // Out of the terminal's foreground group: the view's keys are not its.
                libc::setpgid(0, 0);
            }
            if let Some(u) = run_as {
                if u.become_user().is_err() {
                    libc::write(2, BECOME_FAILED.as_ptr().cast(), BECOME_FAILED.len());
                    libc::_exit(126);
                }
            }
            if output_fd.is_some() {
                // Out of the foreground group, the command would not get the SIGHUP of
                // a terminal that closes under the view: it gets one when the tracer
                // dies (set after the change of user, which clears it). A tracer dead
                // already: no command.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGHUP);
                if libc::getppid() != tracer {
                    libc::_exit(129);
                }
            }
            if run_as.is_some() {
                libc::execve(prog.as_ptr(), argp.as_ptr(), envp.as_ptr());
                libc::write(2, EXEC_FAILED.as_ptr().cast(), EXEC_FAILED.len());
            } else {
                libc::execv(prog.as_ptr(), argp.as_ptr());
            }
            libc::_exit(127);
        }
        libc::close(fds[0]);
        drop(output);
        let pid = pid as u32;
        // Before it may exec: its exec is held from here on.
        if let Some(w) = watchdog {
            w.tell(pid);
        }
        let traced = probes.trace_process(pid, &[pid]);
        libc::write(fds[1], [1u8].as_ptr().cast(), 1);
        libc::close(fds[1]);
        traced?;
        Ok(pid)
    }
}

/// How long a session stopped by a signal waits for the command it launched to end.
pub(super) const COMMAND_GRACE: Duration = Duration::from_millis(500);

/// Stops a command launched with a detached terminal, as a terminal's Ctrl-C stops the
/// command of `record`: SIGINT to its process group (the launcher and what it started,
/// unless they left the group).
pub(super) fn interrupt_group(pid: u32) {
    // SAFETY: a signal to the process group our child leads.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGINT);
    }
}

/// How our child `pid` ended, if it does within `grace`.
pub(super) fn reap_within(pid: u32, grace: Duration) -> Option<CommandStatus> {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = reap(pid) {
            return Some(status);
        }
        if started.elapsed() >= grace {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How our child `pid` ended, waiting as long as it takes; None if SIGINT or SIGTERM
/// comes first (or it is not our child).
pub(super) fn reap_unless_interrupted(pid: u32) -> Result<Option<CommandStatus>, SessionError> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut poll = tokio::time::interval(Duration::from_millis(20));
        loop {
            tokio::select! {
                _ = poll.tick() => {
                    if let Some(status) = reap(pid) {
                        return Ok(Some(status));
                    }
                    // SAFETY: plain kill(2) with signal 0, which only checks.
                    if unsafe { libc::kill(pid as i32, 0) } != 0 {
                        return Ok(None);
                    }
                }
                _ = sigint.recv() => return Ok(None),
                _ = sigterm.recv() => return Ok(None),
            }
        }
    })
}

/// How our child `pid` ended, if it has (without waiting).
pub(super) fn reap(pid: u32) -> Option<CommandStatus> {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    let reaped = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) } == pid as i32;
    reaped.then(|| CommandStatus::from_wait_status(status))
}
