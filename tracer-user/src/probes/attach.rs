//! Attaching uprobes: calls (of MPI/PVM libraries, the C library's pthread calls,
//! OpenMP), selected procedures and the dlopen probe; and handing over per-process
//! probes. Which functions to attach to is the session's business (`session/`).

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use aya::maps::{Array, HashMap, MapData};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope};
use aya::programs::UProbe;
use tracer_common::maps;

use super::load::{AttachedPoint, LinkKind, ProcessLink, ProgramPair, SessionLink, LIBRARY_LOADED};
use super::maps::{map, program};
use super::{ProbeError, Probes};
use tracer_analysis::calls::Flavor;

impl Probes {
    /// Writes the flavor table entry of `flavor` (PVM needs the library's own symbol).
    pub(crate) fn configure_flavor(
        &mut self,
        flavor: Flavor,
        pvm_rbuf_vaddr: u64,
    ) -> Result<(), ProbeError> {
        let mut flavors: Array<&mut MapData, tracer_common::FlavorConfig> =
            map(&mut self.ebpf, maps::FLAVORS)?;
        flavors
            .set(flavor.id() as u32, &flavor.config(pvm_rbuf_vaddr), 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::FLAVORS,
                source,
            })
    }

    /// Attaches the call entry and exit probes at `points` of `path` (each point's cookie
    /// is its call id, flavor and the function's address: `tracer_common::call_cookie`):
    /// with a `pid`, ones that fire in that process only (all its threads: they share its
    /// address space; also after it execs; the kernel puts the breakpoints in that
    /// process's copy of the library's pages, so other processes never trap), else in
    /// every process (the probes keep only traced ones). Points the call programs probed before are left
    /// as they are. Returns the number of points newly probed.
    pub(crate) fn attach_calls(
        &mut self,
        path: &Path,
        points: &[ProbePoint<'_>],
        pid: Option<u32>,
    ) -> Result<usize, ProbeError> {
        let programs = self.programs.calls;
        self.attach_points(programs, path, points, pid)
    }

    /// Hands over the links of the probes that fire in `pid` only (the process is gone):
    /// dropping them detaches the probes, which takes the kernel 0.1-0.2 s per link, so
    /// the caller may drop them on another thread.
    pub(crate) fn take_process_links(&mut self, pid: u32) -> TakenLinks {
        let mut out = TakenLinks::default();
        let Some(links) = self.process_links.remove(&pid) else {
            return out;
        };
        self.attached.retain(|a| a.pid != Some(pid));
        for link in links {
            if let Ok(p) = program::<UProbe>(&mut self.ebpf, link.program) {
                if let Ok(taken) = p.take_link(link.id) {
                    out.links.push(taken);
                    out.probes += link.probes;
                    out.kernel_links += link.kernel_links;
                }
            }
        }
        self.probe_count -= out.probes;
        self.link_count -= out.kernel_links;
        out
    }

    /// Attaches the dlopen return probe at `file_offset` of `path` (where its function
    /// `symbol`, dlopen, is), in every process: it stops the processes
    /// [`Probes::hold_on_load`] names after each dlopen and tells the reader
    /// (`kind::LIBRARY_LOADED`). Returns false if it was there.
    pub(crate) fn attach_load_probe(
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
        match p.attach([point], path, UProbeScope::AllProcesses) {
            Ok(id) => {
                self.links.push(SessionLink::UProbe(LIBRARY_LOADED, id));
                self.probe_count += 1;
                self.link_count += 1;
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
    pub(crate) fn hold_on_load(&mut self, pid: u32, hold: bool) -> Result<(), ProbeError> {
        let mut held: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::HOLD_ON_LOAD)?;
        let done = if hold {
            held.insert(&pid, &1, 0)
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

    /// Whether a selected procedure at `file_offset` of `path` is not probed yet
    /// (`attach_functions` skips the others). A call probe there (an OpenMP outlined
    /// function's) does not count: the procedure gets probes of its own.
    pub(crate) fn is_new_function_point(&self, path: &Path, file_offset: u64) -> bool {
        let point = AttachedPoint {
            file: canonical(path),
            file_offset,
            pid: None,
            entry_program: self.programs.procedures.entry,
        };
        !self.attached.contains(&point)
    }

    /// Attaches the selected-procedure probes at `points` (each point's cookie is its
    /// probe id), in every process. The first call loads their programs. Returns the
    /// number of points newly probed.
    pub(crate) fn attach_functions(
        &mut self,
        path: &Path,
        points: &[ProbePoint<'_>],
    ) -> Result<usize, ProbeError> {
        let programs = self.programs.procedures;
        self.load_uprobes(programs)?;
        self.attach_points(programs, path, points, None)
    }

    /// Attaches `programs` at every new point of `points`: as one kernel link per program
    /// with uprobe_multi links, else one perf event per program and point. If the kernel
    /// refuses the batch, the points go one at a time, so that every point it takes is
    /// probed and the error names the one it refused.
    fn attach_points(
        &mut self,
        programs: ProgramPair,
        path: &Path,
        points: &[ProbePoint<'_>],
        pid: Option<u32>,
    ) -> Result<usize, ProbeError> {
        let file = canonical(path);
        let attached = |p: &ProbePoint<'_>| AttachedPoint {
            file: file.clone(),
            file_offset: p.file_offset,
            pid,
            entry_program: programs.entry,
        };
        let new: Vec<&ProbePoint<'_>> = points
            .iter()
            .filter(|p| self.attached.insert(attached(p)))
            .collect();
        let batch_result = match new.as_slice() {
            [] => return Ok(0),
            [_] => Err(()),
            many => self.link_pair(programs, path, many, pid).map_err(drop),
        };
        if batch_result.is_ok() {
            return Ok(new.len());
        }
        for (i, point) in new.iter().enumerate() {
            if let Err(source) = self.link_pair(programs, path, &[*point], pid) {
                for refused in &new[i..] {
                    self.attached.remove(&attached(refused));
                }
                return Err(ProbeError::Attach {
                    symbol: point.symbol.to_string(),
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
        Ok(new.len())
    }

    /// Attaches the entry and the exit program of `programs` at `points`, both or
    /// neither: an entry probe without its exit probe would leave a frame behind at
    /// every call (a process can exit while we attach to it). The exit goes in first:
    /// in a running process (an outlined function probed at its region's start) a thread
    /// that enters the call between the two attachments then leaves an exit without an
    /// entry, which the probes ignore, instead of an entry whose exit never comes (seen
    /// on GROMACS: a large library's return probe took milliseconds to go in, and every
    /// region started meanwhile lost its end).
    fn link_pair(
        &mut self,
        programs: ProgramPair,
        path: &Path,
        points: &[&ProbePoint<'_>],
        pid: Option<u32>,
    ) -> Result<(), aya::programs::ProgramError> {
        let scope = match pid.and_then(NonZeroU32::new) {
            Some(pid) => UProbeScope::OneProcess(pid),
            None => UProbeScope::AllProcesses,
        };
        let attach_points: Vec<UProbeAttachPoint<'_>> = points
            .iter()
            .map(|p| UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(p.file_offset),
                cookie: Some(p.cookie),
            })
            .collect();
        let exit = program::<UProbe>(&mut self.ebpf, programs.exit)
            .map_err(|_| aya::programs::ProgramError::NotLoaded)?
            .attach(attach_points.iter(), path, scope)?;
        let entry = match program::<UProbe>(&mut self.ebpf, programs.entry)
            .map_err(|_| aya::programs::ProgramError::NotLoaded)
            .and_then(|p| p.attach(attach_points.iter(), path, scope))
        {
            Ok(entry) => entry,
            Err(e) => {
                if let Ok(p) = program::<UProbe>(&mut self.ebpf, programs.exit) {
                    let _ = p.detach(exit);
                }
                return Err(e);
            }
        };
        let kernel_links = match self.programs.links {
            LinkKind::Multi => 1,
            LinkKind::PerProbe => points.len(),
        };
        self.probe_count += 2 * points.len();
        self.link_count += 2 * kernel_links;
        let pair = [(programs.entry, entry), (programs.exit, exit)];
        if let Some(pid) = pid {
            let taken = self.process_links.entry(pid).or_default();
            for (program, id) in pair {
                taken.push(ProcessLink {
                    program,
                    id,
                    probes: points.len(),
                    kernel_links,
                });
            }
        } else {
            self.links.extend(
                pair.into_iter()
                    .map(|(program, id)| SessionLink::UProbe(program, id)),
            );
        }
        Ok(())
    }
}

/// One probe point of a batch: a function of one binary, and the cookie its probes get.
pub(crate) struct ProbePoint<'a> {
    /// The function's name (for errors).
    pub symbol: &'a str,
    pub file_offset: u64,
    pub cookie: u64,
}

/// Links handed over by [`Probes::take_process_links`], with the uprobes and kernel links
/// they hold.
#[derive(Default)]
pub(crate) struct TakenLinks {
    pub links: Vec<UProbeLink>,
    pub probes: usize,
    pub kernel_links: usize,
}

/// The path probes are keyed by, so that a file seen under two names is probed once.
fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
