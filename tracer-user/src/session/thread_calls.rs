//! Probes on the C library's pthread calls, process by process.

use std::collections::BTreeSet;
use std::path::PathBuf;

use rustc_hash::FxHashSet;

use super::detach::Detacher;
use super::libraries::attach_thread_calls;
use crate::probes::{one_line, Probes};
use crate::target::libraries::{self, ThreadCallSet, ThreadLibraries};
use crate::target::procfs;

/// Probes on the C library's pthread calls. A process is looked at when the session
/// first sees it (at exec, while it is held, or at its first event after a fork): if its
/// program or libraries import one of the calls, the file that defines them is probed.
/// - Thread creation and joins ([`ThreadCallProbes::joins`], always): in every process,
///   once per file. They are rare, so an untraced process that traps on one (the probes
///   drop its records in the kernel) loses nothing measurable, and no probe is attached
///   or detached per process.
/// - Locks ([`ThreadCallProbes::locks`], `--locks`): scoped to each traced process
///   (uprobes with a pid: the kernel sets the breakpoints in that process's pages only,
///   so the rest of the machine never traps on these hot calls), detached on a thread of
///   their own when the process exits.
pub(super) struct ThreadCallProbes {
    libs: ThreadLibraries,
    /// Processes seen (probed, or with nothing to probe), until they exit (asked at
    /// every record of a traced thread, hence Fx hashing).
    probed: FxHashSet<u32>,
    /// Per-process probes: what detaches them. None: probes for every process.
    pub(super) detacher: Option<Detacher>,
}

impl ThreadCallProbes {
    pub(super) fn joins() -> Self {
        ThreadCallProbes {
            libs: ThreadLibraries::new(ThreadCallSet::Lifecycle),
            probed: FxHashSet::default(),
            detacher: None,
        }
    }

    pub(super) fn locks() -> Self {
        ThreadCallProbes {
            libs: ThreadLibraries::new(ThreadCallSet::Locks),
            probed: FxHashSet::default(),
            detacher: Some(Detacher::spawn()),
        }
    }

    /// A running process: the C library it has mapped. (Records of a process that
    /// exited can still arrive: the switch away from its last thread.)
    pub(super) fn attach_running(&mut self, probes: &mut Probes, pid: u32) {
        if !self.probed.contains(&pid) && procfs::is_alive(pid) {
            self.probed.insert(pid);
            let per_process = self.detacher.is_some();
            let lib = self.libs.of_process(pid);
            Self::attach(probes, lib, pid, per_process);
        }
    }

    /// A process held at exec: the C library its new program loads. The probes of a
    /// process follow it through exec (they filter by process, and the kernel sets them
    /// in the new program's copy of the library when it maps it), so only a new library
    /// file adds probes.
    pub(super) fn attach_exec(
        &mut self,
        probes: &mut Probes,
        pid: u32,
        needed: &BTreeSet<PathBuf>,
    ) {
        self.probed.insert(pid);
        let mut files = needed.clone();
        files.extend(
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .ok()
                .and_then(|p| p.canonicalize().ok()),
        );
        let per_process = self.detacher.is_some();
        let lib = self.libs.for_program(&files);
        Self::attach(probes, lib, pid, per_process);
    }

    fn attach(
        probes: &mut Probes,
        lib: Option<&libraries::ThreadLibrary>,
        pid: u32,
        per_process: bool,
    ) {
        let Some(lib) = lib else { return };
        match attach_thread_calls(probes, lib, per_process.then_some(pid)) {
            Ok(n) if n > 0 => log::debug!(
                "probed {n} pthread calls of {} (seen in pid {pid})",
                lib.path.display()
            ),
            Ok(_) => {}
            // It may have exited meanwhile; pthread records of a process are best effort.
            Err(e) if procfs::is_alive(pid) => {
                log::warn!("pthread calls in pid {pid}: {}", one_line(&e))
            }
            Err(_) => {}
        }
    }

    /// The process is gone: its own probes go (on the detacher's thread).
    pub(super) fn exited(&mut self, probes: &mut Probes, pid: u32) {
        if self.probed.remove(&pid) {
            if let Some(detacher) = &self.detacher {
                detacher.detach(probes.take_process_links(pid));
            }
        }
    }
}
