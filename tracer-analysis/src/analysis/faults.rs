//! Processes killed by a signal (a rank SIGKILLed mid-run, the ranks its launcher then
//! ended): who, when, and what their end left undone. Reported as facts, never guessed
//! over: the rest of the analysis goes on with what every other process recorded.

use crate::format::node::ShownId;
use serde::Serialize;

use crate::units::ms;

/// A traced process a signal killed (its `PROCESS_END` record), in order of death.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Killed {
    pub pid: u32,
    /// Its MPI_COMM_WORLD rank, when known.
    pub rank: Option<i32>,
    pub command: String,
    pub signal: u32,
    /// "SIGKILL", ...; "signal N" for one without a usual name.
    pub signal_name: String,
    /// When it died, from the first event.
    pub at_ns: u64,
    /// Its point-to-point sends that no receive took by the end.
    pub sends_unreceived: u64,
    /// Sends to it that it never received.
    pub sends_to_it_unreceived: u64,
    /// Collectives of a communicator it belongs to that never completed.
    pub collectives_incomplete: u64,
    /// Its death cut the run short: it was an MPI rank, or left a message or a
    /// collective undone, or no process made MPI or PVM calls (a threads program: it was
    /// the program). The PVM console that `halt` ends at teardown did none of these.
    #[serde(skip)]
    pub cut_short: bool,
}

/// What a process's end left undone, as the matcher holds it at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Undone {
    pub sends_unreceived: u64,
    pub sends_to_it_unreceived: u64,
    pub collectives_incomplete: u64,
}

/// A process's end as its `PROCESS_END` record tells it (a wait(2) status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Death {
    pub pid: u32,
    pub ts_ns: u64,
    pub signal: u32,
}

impl Death {
    /// The death in `status`, if a signal ended the process (`u32::MAX`: unknown).
    pub(crate) fn from_status(pid: u32, ts_ns: u64, status: u32) -> Option<Death> {
        let signal = status & 0x7f;
        (status != u32::MAX && signal != 0).then_some(Death { pid, ts_ns, signal })
    }
}

/// The usual name of Linux signal `n`.
pub(crate) fn signal_name(n: u32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match NAMES.get(n as usize) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("signal {n}"),
    }
}

/// The profile's and the report's line for each killed process.
pub(crate) fn killed_lines(killed: &[Killed]) -> String {
    let mut s = String::new();
    for k in killed {
        let rank = k.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        s.push_str(&format!(
            "killed: pid {}{rank} by {} ({}) at {:.3} ms; sends never received: {} from it, {} \
             to it; incomplete collectives: {}; {}\n",
            ShownId(k.pid),
            k.signal_name,
            k.signal,
            ms(k.at_ns),
            k.sends_unreceived,
            k.sends_to_it_unreceived,
            k.collectives_incomplete,
            k.command
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(Death::from_status(1, 5, 0x9).map(|d| d.signal), Some(9));
        assert_eq!(Death::from_status(1, 5, 0x8b).map(|d| d.signal), Some(11));
        assert_eq!(Death::from_status(1, 5, 0x8900), None, "exit code 137");
        assert_eq!(Death::from_status(1, 5, 0), None);
        assert_eq!(Death::from_status(1, 5, u32::MAX), None);
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(40), "signal 40");
    }
}
