//! What the session knows of each traced process from /proc, and when it looks again.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::target::{libraries, procfs};
use tracer_analysis::calls;
use tracer_analysis::recording::LibraryInfo;
use tracer_analysis::records::Record;
use tracer_analysis::ProcessInfo;

/// Takes the snapshots of processes the stream carries: the first time a record names a
/// process, after it execs and at its first MPI/PVM call.
pub(super) struct ProcessSnapshots {
    /// Open MPI libraries, to find each process's MPI_COMM_WORLD handle.
    open_mpi: Vec<LibraryInfo>,
    /// Processes inspected and what was last recorded of each: looked up for every
    /// record (Fx: see `analysis`).
    seen: FxHashMap<u32, ProcessInfo>,
    inspected_after_mpi: FxHashSet<u32>,
}

impl ProcessSnapshots {
    pub(super) fn new(open_mpi: Vec<LibraryInfo>) -> Self {
        ProcessSnapshots {
            open_mpi,
            seen: FxHashMap::default(),
            inspected_after_mpi: FxHashSet::default(),
        }
    }

    /// What /proc says about a process the first time the session sees it; None after.
    pub(super) fn first_look(&mut self, pid: u32) -> Option<ProcessInfo> {
        if pid == 0 || self.seen.contains_key(&pid) {
            return None;
        }
        Some(self.inspect(pid, Earlier::Forget))
    }

    /// The snapshots that go into the stream before `rec`, in order.
    pub(super) fn snapshots_before(&mut self, rec: &Record) -> Vec<ProcessInfo> {
        let mut snapshots = Vec::new();
        let pid = rec.header().tgid;
        if from_traced_thread(rec) {
            snapshots.extend(self.first_look(pid));
        }
        match rec {
            // After exec the command line and mappings are new; at the first MPI/PVM call
            // the libraries are mapped (they were not yet at exec).
            Record::Exec(_) => {
                self.inspected_after_mpi.remove(&pid);
                snapshots.extend(self.refresh(pid, Earlier::Forget));
            }
            Record::CallEnter(c)
                if calls::is_mpi_or_pvm(calls::split_call_field(c.header.call).id)
                    && self.inspected_after_mpi.insert(pid) =>
            {
                snapshots.extend(self.refresh(pid, Earlier::Keep));
            }
            _ => {}
        }
        snapshots
    }

    /// A new snapshot of a running process that mapped new code since the last one (the
    /// sampler's unwinder found it: the libraries a program loads after its exec, when
    /// the first snapshot was taken, and later dlopens), so that the samples' addresses
    /// in that code can be symbolized.
    pub(super) fn new_code(&mut self, pid: u32) -> Option<ProcessInfo> {
        self.refresh(pid, Earlier::Keep)
    }

    /// What /proc says about a process now, if it is still there: a process that exited
    /// before the reader got to its record has nothing left to say, and an empty
    /// snapshot would hide the one recorded before.
    fn refresh(&mut self, pid: u32, earlier: Earlier) -> Option<ProcessInfo> {
        procfs::is_alive(pid).then(|| self.inspect(pid, earlier))
    }

    fn inspect(&mut self, pid: u32, earlier: Earlier) -> ProcessInfo {
        let mut info = procfs::inspect(pid);
        log::debug!("pid {pid}: {} mapped files", info.mappings.len());
        // The reader may come to a record after its process began to exit (it reads
        // every 50 ms): /proc then shows part of the mappings or none.
        if let (Earlier::Keep, Some(before)) = (earlier, self.seen.get(&pid)) {
            info.keep_earlier(before);
        }
        info.mpi_world_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_world_handle(l, &info))
            .or(info.mpi_world_handle);
        info.mpi_self_handle = self
            .open_mpi
            .iter()
            .find_map(|l| libraries::ompi_self_handle(l, &info))
            .or(info.mpi_self_handle);
        self.seen.insert(pid, info.clone());
        info
    }
}

/// Whether a new snapshot of a process keeps what the last one saw and it no longer
/// does: yes while it runs one program, no after it execs another.
#[derive(Clone, Copy)]
enum Earlier {
    Keep,
    Forget,
}

/// Whether a record's header is a traced thread (the waker of a wakeup may be untraced;
/// a switch-in record's header is the thread that leaves the CPU).
pub(super) fn from_traced_thread(rec: &Record) -> bool {
    !matches!(
        rec,
        Record::Wakeup(_) | Record::WakeupNew(_) | Record::SwitchIn(_)
    )
}
