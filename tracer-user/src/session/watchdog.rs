//! The watchdog: a process forked at session start that lets every process the tracer
//! may have stopped (the probes' exec and dlopen holds) go on once the tracer is gone,
//! however it ended, SIGKILL included (docs/reliability.md, "No process left stopped").
//!
//! The tracer holds the only write end of a pipe and writes to it the id of every
//! process it traces (the launched command, `--pid` targets, each fork and exec the
//! probes report). The kernel closes that end when the tracer dies, whatever kills it:
//! the watchdog's read() then returns end-of-file. It waits until the tracer has fully
//! exited (it is then no longer the watchdog's parent: by then the kernel has closed
//! every probe, so no new hold can come) and sends SIGCONT to each process it was told
//! of and to their descendants; SIGCONT to a running process does nothing.
//!
//! The child runs between fork and exit without allocating or taking a lock (raw system
//! calls into memory allocated before the fork), so it is safe even if the caller of
//! `record` had other threads.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// What the tracer writes when it ends normally, every probe detached: the watchdog then
/// sweeps once more (an exec between the last read of the ring and the detaching was
/// held with nobody left to let it go) and exits without waiting for late holds.
const BYE: u32 = 0;

/// How often the watchdog lets the told processes go while the dead tracer's exit is
/// still closing probes (uprobes take about 0.1 s each to remove): the exec probe may
/// stop a process again until the last one is gone.
const SWEEP_WHILE_EXITING: Duration = Duration::from_millis(100);

/// Sweeps after the tracer is gone: a probe program that was running on another CPU as
/// its link closed may still send its SIGSTOP after the first sweep.
const LATE_SWEEPS: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(300)];

/// The largest process id the watchdog remembers (the kernel's own limit on 64-bit).
const PID_LIMIT: usize = 1 << 22;

#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    #[error("cannot create the watchdog's pipe")]
    Pipe(#[source] std::io::Error),
    #[error("cannot fork the watchdog process")]
    Fork(#[source] std::io::Error),
}

/// The tracer's end of the watchdog.
pub(crate) struct Watchdog {
    /// The write end; non-blocking, so that a watchdog that does not read (stopped by
    /// someone) never stalls the reader.
    pipe: OwnedFd,
    /// Ids the watchdog could not be told of (the pipe was full, or it is gone).
    untold: u64,
}

impl Watchdog {
    /// Forks the watchdog. Call it before any probe is loaded (the watchdog must hold no
    /// probe's file descriptor, or the probes would outlive the tracer) and before any
    /// process is held.
    pub(crate) fn start() -> Result<Watchdog, WatchdogError> {
        let limit = pid_limit();
        // The watchdog's memory, allocated here: it must not allocate after the fork.
        let mut told = vec![0u64; limit.div_ceil(64)];
        let mut buf = vec![0u8; 1 << 16];
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(WatchdogError::Pipe(std::io::Error::last_os_error()));
        }
        // SAFETY: both fds were just created and are owned here only.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let tracer = std::process::id();
        // SAFETY: the child only makes system calls on memory allocated before the fork
        // and ends with _exit, never returning into the caller.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(WatchdogError::Fork(std::io::Error::last_os_error()));
        }
        if pid == 0 {
            watch(read_end.as_raw_fd(), tracer, &mut told, &mut buf)
        }
        drop(read_end);
        // SAFETY: fcntl on our own fd.
        unsafe {
            let flags = libc::fcntl(write_end.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(
                write_end.as_raw_fd(),
                libc::F_SETFL,
                flags | libc::O_NONBLOCK,
            );
        }
        Ok(Watchdog {
            pipe: write_end,
            untold: 0,
        })
    }

    /// Tells the watchdog that the tracer traces `pid`, a process (or thread: SIGCONT to
    /// a thread reaches its process) it may stop.
    pub(crate) fn tell(&mut self, pid: u32) {
        if pid != BYE {
            self.write(pid);
        }
    }

    /// The session ended and every probe is detached: the watchdog sweeps once and
    /// leaves when the tracer exits.
    pub(crate) fn finish(mut self) {
        self.write(BYE);
        if self.untold > 0 {
            log::warn!(
                "the watchdog was not told of {} traced processes",
                self.untold
            );
        }
    }

    fn write(&mut self, value: u32) {
        let bytes = value.to_ne_bytes();
        // SAFETY: write(2) of a local buffer to our fd; 4 bytes are written whole or not
        // at all (less than PIPE_BUF).
        let n = unsafe { libc::write(self.pipe.as_raw_fd(), bytes.as_ptr().cast(), 4) };
        if n != 4 {
            if self.untold == 0 {
                log::warn!(
                    "cannot tell the watchdog of process {value}: {}",
                    std::io::Error::last_os_error()
                );
            }
            self.untold += 1;
        }
    }
}

/// The kernel's largest process id plus one, at most [`PID_LIMIT`].
fn pid_limit() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .map_or(PID_LIMIT, |n| (n + 1).min(PID_LIMIT))
}

/// The watchdog process: reads ids until the tracer is gone, then lets them all go on.
/// Only in the child of a fork: it never returns.
fn watch(pipe: i32, tracer: u32, told: &mut [u64], buf: &mut [u8]) -> ! {
    detach_from_tracer(pipe);
    let mut bye = false;
    // Bytes of an id split across two reads (never happens with whole 4-byte writes; kept
    // for safety).
    let mut carry = [0u8; 4];
    let mut carried = 0usize;
    loop {
        // SAFETY: read(2) into our own buffer.
        let n = unsafe { libc::read(3, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            break;
        }
        if n < 0 {
            // SAFETY: the calling thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            break;
        }
        for &b in &buf[..n as usize] {
            carry[carried] = b;
            carried += 1;
            if carried == 4 {
                carried = 0;
                match u32::from_ne_bytes(carry) {
                    BYE => bye = true,
                    pid => mark(told, pid),
                }
            }
        }
    }
    // The tracer's end is closed: it exited, or is exiting and closing its probes.
    // SAFETY: getppid has no preconditions.
    while unsafe { libc::getppid() } as u32 == tracer {
        sweep(told);
        pause(SWEEP_WHILE_EXITING);
    }
    sweep(told);
    for late in LATE_SWEEPS
        .iter()
        .take(if bye { 1 } else { LATE_SWEEPS.len() })
    {
        pause(*late);
        sweep(told);
    }
    // SAFETY: the child ends here, running no exit handler of the tracer's.
    unsafe { libc::_exit(0) }
}

/// Leaves the tracer's session (Ctrl-C at a terminal reaches the tracer's process group,
/// not the watchdog), names itself, keeps only the pipe (as fd 3) and points stdin,
/// stdout and stderr at /dev/null: an inherited pipe would keep whoever reads the
/// tracer's output waiting until the watchdog exits.
fn detach_from_tracer(pipe: i32) {
    // SAFETY: plain system calls on our own file descriptors and constant strings.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"tracer-watchdog".as_ptr(), 0, 0, 0);
        if pipe != 3 {
            libc::dup2(pipe, 3);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
    }
}

fn mark(told: &mut [u64], pid: u32) {
    if let Some(word) = told.get_mut(pid as usize / 64) {
        *word |= 1 << (pid % 64);
    }
}

fn is_marked(told: &[u64], pid: u32) -> bool {
    told.get(pid as usize / 64)
        .is_some_and(|w| w & (1 << (pid % 64)) != 0)
}

/// Marks the descendants of the told processes (a process stopped at its exec before the
/// tracer read the record is a child of a told one), then sends SIGCONT to every marked
/// process that is stopped: one that runs is left alone (mpirun forwards every SIGCONT
/// it gets to its job and says so on the terminal, over the tracer's last lines).
fn sweep(told: &mut [u64]) {
    // A pass marks the children of marked processes; a few passes reach grandchildren
    // whose ids are lower than their parents'.
    for _ in 0..8 {
        if !mark_children(told) {
            break;
        }
    }
    for (i, &word) in told.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            let bit = w.trailing_zeros();
            w &= w - 1;
            let pid = (i * 64) as u32 + bit;
            if stat_of(pid).is_some_and(|s| s.state == b'T') {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            }
        }
    }
}

/// One pass over /proc: marks each process whose parent is marked. True if it marked any.
fn mark_children(told: &mut [u64]) -> bool {
    // SAFETY: open(2) of a constant path.
    let proc_dir = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if proc_dir < 0 {
        return false;
    }
    let mut marked = false;
    let mut entries = [0u8; 8192];
    loop {
        // SAFETY: getdents64 fills our own buffer, at most its length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                proc_dir,
                entries.as_mut_ptr(),
                entries.len(),
            )
        };
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
            let reclen = u16::from_ne_bytes([entries[at + 16], entries[at + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &entries[at + 19..(at + reclen).min(n as usize)];
            if let Some(pid) = parse_u32(name) {
                if !is_marked(told, pid) && stat_of(pid).is_some_and(|s| is_marked(told, s.parent))
                {
                    mark(told, pid);
                    marked = true;
                }
            }
            at += reclen;
        }
    }
    // SAFETY: our own fd.
    unsafe { libc::close(proc_dir) };
    marked
}

/// What the watchdog reads of a process in /proc/PID/stat.
struct ProcessStat {
    /// 'R', 'S', 'T' (stopped), ...
    state: u8,
    parent: u32,
}

/// The state and parent of `pid`, from /proc/PID/stat ("pid (comm) state ppid ...").
fn stat_of(pid: u32) -> Option<ProcessStat> {
    let mut path = [0u8; 32];
    let mut len = 0;
    for &b in b"/proc/" {
        path[len] = b;
        len += 1;
    }
    len += write_u32(&mut path[len..], pid);
    for &b in b"/stat\0" {
        path[len] = b;
        len += 1;
    }
    // SAFETY: a NUL-terminated path in a local buffer.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut stat = [0u8; 512];
    // SAFETY: read(2) into a local buffer, then close our own fd.
    let n = unsafe {
        let n = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return None;
    }
    let stat = &stat[..n as usize];
    // The command name may hold spaces and parentheses: the last ')' ends it.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let parent = parse_u32(fields.next()?)?;
    Some(ProcessStat { state, parent })
}

/// A decimal number that is the whole of `s` (up to a NUL).
fn parse_u32(s: &[u8]) -> Option<u32> {
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    let digits = &s[..end];
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')),
    )
}

/// Writes `n` in decimal at the start of `out`; returns the number of digits.
fn write_u32(out: &mut [u8], n: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut len = 0;
    let mut n = n;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

/// Sleeps without the standard library (nanosleep, restarted when a signal cuts it).
fn pause(d: Duration) {
    let mut ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    let mut rest = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: nanosleep reads and writes local structs.
    while unsafe { libc::nanosleep(&ts, &mut rest) } != 0 {
        ts = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        let mut out = [0u8; 10];
        for n in [0, 7, 10, 4_194_303] {
            let len = write_u32(&mut out, n);
            assert_eq!(parse_u32(&out[..len]), Some(n));
        }
        assert_eq!(parse_u32(b"12\0junk"), Some(12));
        assert_eq!(parse_u32(b"self"), None);
        assert_eq!(parse_u32(b""), None);
    }

    #[test]
    fn marks() {
        let mut told = vec![0u64; 4];
        mark(&mut told, 65);
        assert!(is_marked(&told, 65) && !is_marked(&told, 64) && !is_marked(&told, 1000));
        mark(&mut told, 1000); // beyond the table: ignored
    }
}
