//! Attaching the OpenMP probes of a session: the runtime's (libgomp's or libomp's) region
//! and barrier entry points and the program's outlined functions, as `target/openmp.rs`
//! finds them.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use rustc_hash::FxHashSet;

use super::libraries::attach_thread_calls;
use crate::probes::{one_line, Probes};
use crate::target::openmp::{outlined_function_at, outlined_functions, runtime_calls, Runtime};
use crate::target::{parallel, procfs};

/// The OpenMP probes of a session: in every process (once per file), because a program's
/// outlined functions are its own and the runtime's entry points are called once per
/// region or barrier, not in hot loops.
#[derive(Default)]
pub(super) struct OpenMpProbes {
    /// Files looked at (probed, or with nothing to probe).
    searched: HashSet<PathBuf>,
    /// Processes looked at, until they exit (asked at every record of a traced
    /// thread: Fx hashing, as SipHash of these lookups was 3 % of the live tracer).
    seen: FxHashSet<u32>,
    /// Outlined functions seen at a region's start, by process and address.
    started: HashSet<(u32, u64)>,
}

impl OpenMpProbes {
    /// A process held at exec: the executable and the libraries its program loads.
    pub(super) fn attach_exec(
        &mut self,
        probes: &mut Probes,
        pid: u32,
        needed: &BTreeSet<PathBuf>,
    ) {
        self.seen.insert(pid);
        let mut files = needed.clone();
        files.extend(
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .ok()
                .and_then(|p| p.canonicalize().ok()),
        );
        self.attach(probes, pid, &files);
    }

    /// A running process: the files it has mapped (regions it starts from now on are
    /// seen; one in progress is not).
    pub(super) fn attach_running(&mut self, probes: &mut Probes, pid: u32) {
        if self.seen.contains(&pid) || !procfs::is_alive(pid) {
            return;
        }
        self.seen.insert(pid);
        let files: BTreeSet<PathBuf> = procfs::mappings(pid)
            .into_iter()
            .filter_map(|m| PathBuf::from(m.path).canonicalize().ok())
            .collect();
        self.attach(probes, pid, &files);
    }

    pub(super) fn exited(&mut self, pid: u32) {
        self.seen.remove(&pid);
        self.started.retain(|(p, _)| *p != pid);
    }

    /// Process `pid` started a region (call `parallel_call`) whose outlined function is at
    /// `address`. A program
    /// without a symbol table (a stripped executable or library) has no outlined
    /// function probed yet: the function is probed now, at its address, so the waits of
    /// its later regions are seen (this one's are not: its threads have started).
    pub(super) fn region_started(
        &mut self,
        probes: &mut Probes,
        pid: u32,
        parallel_call: u16,
        address: u64,
    ) {
        if !self.started.insert((pid, address)) {
            return;
        }
        let Some(lib) = outlined_function_at(pid, address, parallel_call) else {
            log::debug!("pid {pid}: no mapped file holds the outlined function at {address:#x}");
            return;
        };
        match attach_thread_calls(probes, &lib, None) {
            Ok(1) => log::debug!(
                "probed the outlined function at {address:#x} in {} (pid {pid})",
                lib.path.display()
            ),
            Ok(_) => {}
            Err(e) if procfs::is_alive(pid) => {
                log::warn!("OpenMP region in pid {pid}: {}", one_line(&e))
            }
            Err(_) => {}
        }
    }

    /// Probes the OpenMP runtime and the outlined functions of a program made of
    /// `files`, if it uses one at all.
    fn attach(&mut self, probes: &mut Probes, pid: u32, files: &BTreeSet<PathBuf>) {
        if !files.iter().any(|f| Runtime::of(f).is_some()) {
            return;
        }
        let unsearched: Vec<PathBuf> = files
            .iter()
            .filter(|&file| self.searched.insert(file.clone()))
            .cloned()
            .collect();
        let found = parallel::read_each(&unsearched, |file| match Runtime::of(file) {
            Some(runtime) => runtime_calls(file, runtime),
            None => outlined_functions(file),
        });
        for (file, found) in unsearched.iter().zip(found) {
            let Some(lib) = found else { continue };
            match attach_thread_calls(probes, &lib, None) {
                Ok(n) => log::debug!(
                    "probed {n} OpenMP functions of {} (seen in pid {pid})",
                    file.display()
                ),
                Err(e) if procfs::is_alive(pid) => {
                    log::warn!("OpenMP functions of {}: {}", file.display(), one_line(&e))
                }
                Err(_) => {}
            }
        }
    }
}
