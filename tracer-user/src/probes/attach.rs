//! Attaching uprobes: calls (of MPI/PVM libraries, the C library's pthread calls,
//! OpenMP), selected procedures and the dlopen probe; and handing over per-process
//! probes. Which functions to attach to is the session's business (`session/`).

use std::num::NonZeroU32;
use std::path::Path;

use aya::maps::{Array, HashMap, MapData};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope};
use aya::programs::UProbe;
use tracer_common::maps;

use super::load::{FLOOR_UPROBE, FLOOR_URETPROBE, LIBRARY_LOADED};
use super::maps::{map, program};
use super::{ProbeError, Probes};
use tracer_analysis::format::calls::Flavor;

/// The two programs of a uprobe pair: at a function's entry and at its return.
#[derive(Clone, Copy)]
struct ProgramPair {
    entry: &'static str,
    exit: &'static str,
}

const CALL_PROGRAMS: ProgramPair = ProgramPair {
    entry: "call_enter",
    exit: "call_exit",
};
const FUNC_PROGRAMS: ProgramPair = ProgramPair {
    entry: "func_enter",
    exit: "func_exit",
};
/// What `--probes floor` attaches instead: empty programs, for measuring the probes' cost.
const FLOOR_PROGRAMS: ProgramPair = ProgramPair {
    entry: FLOOR_UPROBE,
    exit: FLOOR_URETPROBE,
};

impl Probes {
    /// Writes the flavor table entry of `flavor` (PVM needs the library's own symbol).
    pub fn configure_flavor(
        &mut self,
        flavor: Flavor,
        pvm_rbuf_vaddr: u64,
    ) -> Result<(), ProbeError> {
        let mut flavors: Array<&mut MapData, tracer_common::FlavorConfig> =
            map(&mut self.ebpf, maps::FLAVORS)?;
        flavors
            .set(flavor.id() as u32, flavor.config(pvm_rbuf_vaddr), 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::FLAVORS,
                source,
            })
    }

    /// Attaches the call entry and exit probes with `cookie` (call id, flavor and the
    /// function's address: `tracer_common::call_cookie`) at `file_offset` of `path`: with
    /// a `pid`, ones that fire in that process only (all its threads: they share its
    /// address space; also after it execs; the kernel puts the breakpoints in that
    /// process's copy of the library's pages, so other processes never trap), else in
    /// every process (the probes keep only traced ones). Returns false if that call was
    /// probed before (it is not probed again).
    pub fn attach_call(
        &mut self,
        path: &Path,
        symbol: &str,
        file_offset: u64,
        cookie: u64,
        pid: Option<u32>,
    ) -> Result<bool, ProbeError> {
        self.attach_pair(CALL_PROGRAMS, path, symbol, file_offset, cookie, pid)
    }

    /// Hands over the links of the probes that fire in `pid` only (the process is gone):
    /// dropping them detaches the probes, which takes the kernel 0.1-0.2 s each, so the
    /// caller may drop them on another thread.
    pub fn take_process_links(&mut self, pid: u32) -> Vec<UProbeLink> {
        let Some(links) = self.process_links.remove(&pid) else {
            return Vec::new();
        };
        self.attached.retain(|(_, _, p)| *p != Some(pid));
        let mut out = Vec::with_capacity(links.len());
        for (name, id) in links {
            if let Ok(p) = program::<UProbe>(&mut self.ebpf, name) {
                if let Ok(link) = p.take_link(id) {
                    out.push(link);
                }
            }
        }
        self.attach_count -= out.len();
        out
    }

    /// Attaches the dlopen return probe at `file_offset` of `path` (where its function
    /// `symbol`, dlopen, is), in every process: it stops the processes
    /// [`Probes::hold_on_load`] names after each dlopen and tells the reader
    /// (`kind::LIBRARY_LOADED`). Returns false if it was there.
    pub fn attach_load_probe(
        &mut self,
        path: &Path,
        symbol: &str,
        file_offset: u64,
    ) -> Result<bool, ProbeError> {
        if !self.load_probes.insert(path.to_path_buf()) {
            return Ok(false);
        }
        let p: &mut UProbe = program(&mut self.ebpf, LIBRARY_LOADED)?;
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(file_offset),
            cookie: None,
        };
        match p.attach(point, path, UProbeScope::AllProcesses) {
            Ok(_) => {
                self.attach_count += 1;
                Ok(true)
            }
            Err(source) => {
                self.load_probes.remove(path);
                Err(ProbeError::Attach {
                    symbol: symbol.to_string(),
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }

    /// Whether process `pid` stops after each dlopen until userspace let it go on (see
    /// [`Probes::attach_load_probe`]).
    pub fn hold_on_load(&mut self, pid: u32, hold: bool) -> Result<(), ProbeError> {
        let mut held: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::HOLD_ON_LOAD)?;
        let done = if hold {
            held.insert(pid, 1, 0)
        } else {
            match held.remove(&pid) {
                Err(aya::maps::MapError::KeyNotFound) => Ok(()),
                other => other,
            }
        };
        done.map_err(|source| ProbeError::MapOp {
            name: maps::HOLD_ON_LOAD,
            source,
        })
    }

    /// Attaches the selected-procedure probes with `probe_id` at a function.
    /// Returns false if that function was already probed.
    pub fn attach_function(
        &mut self,
        path: &Path,
        symbol: &str,
        file_offset: u64,
        probe_id: u16,
    ) -> Result<bool, ProbeError> {
        self.attach_pair(
            FUNC_PROGRAMS,
            path,
            symbol,
            file_offset,
            probe_id as u64,
            None,
        )
    }

    fn attach_pair(
        &mut self,
        programs: ProgramPair,
        path: &Path,
        symbol: &str,
        offset: u64,
        cookie: u64,
        pid: Option<u32>,
    ) -> Result<bool, ProbeError> {
        let key = (
            path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
            offset,
            pid,
        );
        if !self.attached.insert(key.clone()) {
            return Ok(false);
        }
        let scope = match pid.and_then(NonZeroU32::new) {
            Some(pid) => UProbeScope::OneProcess(pid),
            None => UProbeScope::AllProcesses,
        };
        let programs = if self.floor { FLOOR_PROGRAMS } else { programs };
        let mut links = Vec::with_capacity(2);
        for name in [programs.entry, programs.exit] {
            let p: &mut UProbe = program(&mut self.ebpf, name)?;
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(offset),
                cookie: Some(cookie),
            };
            match p.attach(point, path, scope) {
                Ok(link) => links.push((name, link)),
                Err(source) => {
                    // An entry probe without its exit probe would leave a frame behind at
                    // every call (a process can exit while we attach to it).
                    for (name, link) in links {
                        if let Ok(p) = program::<UProbe>(&mut self.ebpf, name) {
                            let _ = p.detach(link);
                        }
                    }
                    self.attached.remove(&key);
                    return Err(ProbeError::Attach {
                        symbol: symbol.to_string(),
                        path: path.to_path_buf(),
                        source,
                    });
                }
            }
        }
        self.attach_count += links.len();
        if let Some(pid) = pid {
            self.process_links.entry(pid).or_default().extend(links);
        }
        Ok(true)
    }
}
