//! Finding what to probe in an OpenMP program: libgomp's region and barrier entry points,
//! and the functions the compiler outlined from the program's parallel regions and tasks
//! (GCC names them `FUNCTION._omp_fn.N`: `main._omp_fn.0`, `MAIN__._omp_fn.1` in
//! Fortran). Those are local symbols, in the symbol table of an unstripped program.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use tracer_common::call;

use crate::probes::{one_line, Probes};
use crate::target::libraries::ThreadLibrary;
use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolTable};
use tracer_analysis::format::calls::{Family, Role, CALLS};

/// File name prefix of GCC's OpenMP runtime.
const GOMP_PREFIX: &str = "libgomp.so";

/// The outlined functions' symbols.
const OUTLINED_PATTERN: &str = "*._omp_fn.*";

fn is_libgomp(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(GOMP_PREFIX))
}

/// The OpenMP probes of a session: in every process (once per file), because a program's
/// outlined functions are its own and libgomp's entry points are called once per region
/// or barrier, not in hot loops.
#[derive(Default)]
pub struct OpenMpProbes {
    /// Files looked at (probed, or with nothing to probe).
    searched: HashSet<PathBuf>,
    /// Processes looked at, until they exit.
    seen: HashSet<u32>,
    /// Outlined functions seen at a region's start, by process and address.
    started: HashSet<(u32, u64)>,
}

impl OpenMpProbes {
    /// A process held at exec: the executable and the libraries its program loads.
    pub fn attach_exec(&mut self, probes: &mut Probes, pid: u32, needed: &BTreeSet<PathBuf>) {
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
    pub fn attach_running(&mut self, probes: &mut Probes, pid: u32) {
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

    pub fn exited(&mut self, pid: u32) {
        self.seen.remove(&pid);
        self.started.retain(|(p, _)| *p != pid);
    }

    /// Process `pid` started a region whose outlined function is at `address`. A program
    /// without a symbol table (a stripped executable or library) has no outlined
    /// function probed yet: the function is probed now, at its address, so the waits of
    /// its later regions are seen (this one's are not: its threads have started).
    pub fn region_started(&mut self, probes: &mut Probes, pid: u32, address: u64) {
        if !self.started.insert((pid, address)) {
            return;
        }
        // The mapping of the file that holds the address: the highest start below it.
        let Some(m) = procfs::mappings(pid)
            .into_iter()
            .filter(|m| m.bias <= address)
            .max_by_key(|m| m.bias)
        else {
            return;
        };
        let path = PathBuf::from(&m.path);
        let offset = address - m.bias;
        let inside = std::fs::metadata(&path).is_ok_and(|f| offset < f.len());
        if !inside {
            return;
        }
        let sym = Symbol {
            name: format!("outlined function at {offset:#x}"),
            vaddr: offset,
            file_offset: offset,
            is_function: true,
        };
        let lib = ThreadLibrary {
            path,
            calls: vec![(call::OMP_OUTLINED, sym)],
        };
        match probes.attach_thread_calls(&lib, None) {
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

    /// Probes libgomp and the outlined functions of a program made of `files`, if it
    /// uses libgomp at all.
    fn attach(&mut self, probes: &mut Probes, pid: u32, files: &BTreeSet<PathBuf>) {
        if !files.iter().any(|f| is_libgomp(f)) {
            return;
        }
        for file in files {
            if !self.searched.insert(file.clone()) {
                continue;
            }
            let found = if is_libgomp(file) {
                runtime_calls(file)
            } else {
                outlined_functions(file)
            };
            let Some(lib) = found else { continue };
            match probes.attach_thread_calls(&lib, None) {
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

/// libgomp's region and barrier entry points that `file` defines.
fn runtime_calls(file: &Path) -> Option<ThreadLibrary> {
    let table = SymbolTable::read(file).ok()?;
    let calls: Vec<_> = CALLS
        .iter()
        .filter(|c| {
            c.family == Family::OpenMp && matches!(c.role, Role::OmpParallel | Role::OmpBarrier)
        })
        .filter_map(|c| {
            let sym = table.get(c.symbol).filter(|s| s.is_function)?;
            Some((c.id, sym.clone()))
        })
        .collect();
    (!calls.is_empty()).then(|| ThreadLibrary {
        path: file.to_path_buf(),
        calls,
    })
}

/// The outlined functions in `file`'s symbol table (none in a stripped file).
fn outlined_functions(file: &Path) -> Option<ThreadLibrary> {
    let table = SymbolTable::read(file).ok()?;
    let pattern = glob::Pattern::new(OUTLINED_PATTERN).expect("a valid pattern");
    let calls: Vec<_> = table
        .functions_matching(&pattern)
        .into_iter()
        .map(|s| (call::OMP_OUTLINED, s.clone()))
        .collect();
    (!calls.is_empty()).then(|| ThreadLibrary {
        path: file.to_path_buf(),
        calls,
    })
}
