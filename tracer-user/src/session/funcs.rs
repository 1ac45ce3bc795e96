//! Attaching the entry/exit probes of the procedures `--func` selects (which ones:
//! `target/funcs.rs`), each with its own probe id.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::SessionError;
use crate::probes::{ProbePoint, Probes};
use crate::target::entry::{probe_point_in, ArgumentsRead};
use crate::target::funcs::{FuncError, FunctionSelector};
use crate::target::procfs;
use crate::target::symbols::Symbol;
use tracer_analysis::recording::FunctionProbe;

/// The selected procedures of a session and the probe ids given so far.
pub(super) struct FunctionProbes {
    selector: FunctionSelector,
    next_id: u16,
    /// System-wide: the live processes [`Self::attach_newly_traced`] looked at.
    looked_at: HashSet<u32>,
}

impl FunctionProbes {
    pub(super) fn new(selector: FunctionSelector) -> Self {
        FunctionProbes {
            selector,
            next_id: 1,
            looked_at: HashSet::new(),
        }
    }

    /// System-wide mode: a process traced since its first probed call, which may have
    /// started after the session (the job launched once `tracer record --all` runs): the
    /// path-less patterns in its executable and libraries, once per process (then
    /// [`Self::exited`]). Its calls of a selected procedure before the reader came to
    /// that first call's record (MPI_Init's comes when it returns) and looked its files
    /// up (0.1-0.4 s after MPI_Init for an Open MPI rank) are not seen.
    pub(super) fn attach_newly_traced(
        &mut self,
        probes: &mut Probes,
        pid: u32,
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        if !self.selector.needs_exec_hold() || !self.looked_at.insert(pid) {
            return Ok(Vec::new());
        }
        // Timed here, once per process, not on every record.
        let started = std::time::Instant::now();
        let attached = self.attach_in_process(probes, pid)?;
        if !attached.is_empty() {
            log::debug!(
                "pid {pid}: {} selected procedures probed in {:.1} ms",
                attached.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        Ok(attached)
    }

    /// Process `pid` exited: nothing more to look at.
    pub(super) fn exited(&mut self, pid: u32) {
        self.looked_at.remove(&pid);
    }

    /// Attaches the `PATH:SYMBOL` patterns (their files exist already).
    pub(super) fn attach_fixed_paths(
        &mut self,
        probes: &mut Probes,
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let mut out = Vec::new();
        for f in self.selector.fixed_paths() {
            let selected = self
                .selector
                .select_in_file(&f, true)
                .map_err(FuncError::from)?;
            out.extend(self.attach_file(probes, &f, &selected)?);
        }
        Ok(out)
    }

    /// Attaches the path-less patterns in a process's executable and mapped libraries.
    pub(super) fn attach_in_process(
        &mut self,
        probes: &mut Probes,
        pid: u32,
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let files = self.selector.new_files_of_process(pid);
        self.attach_path_less_in(probes, files)
    }

    /// System-wide (an agent): the path-less patterns in those of `files` this node has
    /// (the executables of the collector's command), before any process runs them.
    pub(super) fn attach_in_files(
        &mut self,
        probes: &mut Probes,
        files: &[PathBuf],
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let files = self.selector.new_files(files);
        self.attach_path_less_in(probes, files)
    }

    fn attach_path_less_in(
        &mut self,
        probes: &mut Probes,
        files: Vec<PathBuf>,
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let mut out = Vec::new();
        for f in files {
            // A mapping that is not a readable ELF file (deleted, special) is skipped.
            let Ok(selected) = self.selector.select_in_file(&f, false) else {
                continue;
            };
            out.extend(self.attach_file(probes, &f, &selected)?);
        }
        Ok(out)
    }

    /// System-wide mode: the path-less patterns in every process that uses MPI or PVM now.
    pub(super) fn attach_everywhere(
        &mut self,
        probes: &mut Probes,
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let mut out = Vec::new();
        for pid in procfs::processes_mapping(&["libmpi", "libpvm3"]) {
            out.extend(self.attach_in_process(probes, pid)?);
        }
        Ok(out)
    }

    fn attach_file(
        &mut self,
        probes: &mut Probes,
        file: &Path,
        selected: &[Symbol],
    ) -> Result<Vec<FunctionProbe>, SessionError> {
        let mut out = Vec::new();
        let mut points = Vec::new();
        // Aliases share an offset: the first name takes it.
        let mut offsets = HashSet::new();
        for sym in selected {
            // Past a leading `endbr64` or load the kernel would single-step; the recording
            // keeps the symbol's own address.
            let at = probe_point_in(file, sym, ArgumentsRead::NONE).file_offset;
            if !probes.is_new_function_point(file, at) || !offsets.insert(at) {
                continue;
            }
            let id = self.next_id;
            self.next_id = self
                .next_id
                .checked_add(1)
                .ok_or(SessionError::TooManyFunctionProbes)?;
            points.push(ProbePoint {
                symbol: &sym.name,
                file_offset: at,
                cookie: id as u64,
            });
            out.push(FunctionProbe {
                id,
                symbol: sym.name.clone(),
                path: file.display().to_string(),
                vaddr: sym.vaddr,
            });
        }
        probes.attach_functions(file, &points)?;
        Ok(out)
    }

    /// Patterns that matched nothing anywhere.
    pub(super) fn unmatched(&self) -> Vec<String> {
        self.selector.unmatched()
    }
}
