//! The processes the probes hold (stopped at exec or after dlopen until userspace has
//! probed what they need): letting one go, and the ones held past a deadline.

use std::os::fd::AsFd;
use std::time::Duration;

use aya::maps::{HashMap, MapData, MapError};
use tracer_common::maps;

use super::maps::map;
use super::{ProbeError, Probes};

/// A handle of its own on the probes' `HELD` map (tgid -> when the probes stopped it, on
/// the clock of `bpf_ktime_get_ns`), for a thread other than the reader's.
pub(crate) struct HeldProcesses {
    held: HashMap<MapData, u32, u64>,
}

impl HeldProcesses {
    /// Lets go every process held since before `now - deadline` (both on the clock of
    /// `bpf_ktime_get_ns`, CLOCK_MONOTONIC) and returns their ids.
    pub(crate) fn let_go_expired(&mut self, now_ns: u64, deadline: Duration) -> Vec<u32> {
        let limit = deadline.as_nanos() as u64;
        let expired: Vec<u32> = self
            .held
            .iter()
            .filter_map(Result::ok)
            .filter(|&(_, since)| now_ns.saturating_sub(since) >= limit)
            .map(|(pid, _)| pid)
            .collect();
        for &pid in &expired {
            let_go(&mut self.held, pid);
        }
        expired
    }
}

impl Probes {
    /// Lets held process `pid` go on: out of the held set, then SIGCONT, only if the
    /// probes held it (it was in the set; not let go at its deadline already).
    pub(crate) fn let_go(&mut self, pid: u32) -> Result<(), ProbeError> {
        let mut held: HashMap<&mut MapData, u32, u64> = map(&mut self.ebpf, maps::HELD)?;
        let_go(&mut held, pid);
        Ok(())
    }

    /// A second handle on the held set, for a thread that lets go holds past their
    /// deadline.
    pub(crate) fn held_processes(&mut self) -> Result<HeldProcesses, ProbeError> {
        let data = self
            .ebpf
            .map(maps::HELD)
            .ok_or(ProbeError::Map(maps::HELD))?;
        let aya::maps::Map::HashMap(data) = data else {
            return Err(ProbeError::Map(maps::HELD));
        };
        let op = |source: MapError| ProbeError::MapOp {
            name: maps::HELD,
            source,
        };
        let fd = data.fd().as_fd().try_clone_to_owned().map_err(|e| {
            op(MapError::SyscallError(aya::sys::SyscallError {
                call: "dup",
                io_error: e,
            }))
        })?;
        let held = HashMap::try_from(aya::maps::Map::HashMap(MapData::from_fd(fd).map_err(op)?))
            .map_err(op)?;
        Ok(HeldProcesses { held })
    }
}

fn let_go<T: std::borrow::BorrowMut<MapData>>(held: &mut HashMap<T, u32, u64>, pid: u32) {
    // Gone from the set first: the deadline's thread must not count it as expired. A
    // process that is not in it was not stopped by the probes (or was let go already):
    // no signal the user did not ask for (mpirun forwards every SIGCONT it gets to its
    // job, and says so on the terminal).
    if held.remove(&pid).is_ok() {
        // SAFETY: plain kill(2).
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    }
}
