//! Finding what to probe in an OpenMP program: the runtime's region and barrier entry
//! points (GCC's libgomp: `GOMP_*`; LLVM's libomp: `__kmpc_*`), and the functions the
//! compiler outlined from the program's parallel regions and tasks (GCC names them
//! `FUNCTION._omp_fn.N`: `main._omp_fn.0`, `MAIN__._omp_fn.1` in Fortran; clang
//! `.omp_outlined.`, `.omp_outlined..N` and `.omp_task_entry.`). Those are local
//! symbols, in the symbol table of an unstripped program.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use tracer_common::call;

use crate::probes::{one_line, Probes};
use crate::target::libraries::ThreadLibrary;
use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolTable};
use tracer_analysis::format::calls::{Family, Role, CALLS};

/// The OpenMP runtimes whose entry points we probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runtime {
    /// GCC's libgomp (`gcc -fopenmp`).
    Gnu,
    /// LLVM's libomp (`clang -fopenmp`; Debian installs it as `libomp.so.5`, a copy
    /// named `libomp-14.so.5`, and Intel's name for it is `libiomp5.so`).
    Llvm,
}

impl Runtime {
    /// The runtime that file `path` is, by its name.
    fn of(path: &Path) -> Option<Runtime> {
        let name = path.file_name()?.to_str()?;
        if name.starts_with("libgomp.so") {
            Some(Runtime::Gnu)
        } else if name.starts_with("libomp.so")
            || name.starts_with("libomp-")
            || name.starts_with("libiomp5.so")
        {
            Some(Runtime::Llvm)
        } else {
            None
        }
    }

    /// The prefix of the runtime's own entry points in the call table (libomp also
    /// exports libgomp's names, for GCC-built programs: those are not probed in it).
    fn entry_point_prefix(self) -> &'static str {
        match self {
            Runtime::Gnu => "GOMP_",
            Runtime::Llvm => "__kmpc_",
        }
    }
}

/// The outlined functions' symbols, and the call id each is probed as (the two
/// compilers pass the region's data in different arguments).
const OUTLINED_PATTERNS: &[OutlinedPattern] = &[
    OutlinedPattern {
        symbols: "*._omp_fn.*",
        call: call::OMP_OUTLINED,
    },
    OutlinedPattern {
        symbols: ".omp_outlined.*",
        call: call::KMP_OUTLINED,
    },
    OutlinedPattern {
        symbols: ".omp_task_entry.*",
        call: call::KMP_OUTLINED,
    },
];

struct OutlinedPattern {
    symbols: &'static str,
    call: u16,
}

/// clang -O0 -g splits an outlined function into a wrapper the runtime calls
/// (`.omp_outlined..3`) and a body the wrapper calls, named with this
/// (`.omp_outlined._debug__.1`): only the wrapper is probed, so that barriers belong to
/// the region of the function the runtime called.
const DEBUG_BODY_MARK: &str = "._debug__";

fn is_debug_body(symbol: &str) -> bool {
    symbol.contains(DEBUG_BODY_MARK)
}

/// The call id an outlined function started by region start `parallel_call` is probed
/// as.
fn outlined_call_of(parallel_call: u16) -> u16 {
    if parallel_call == call::KMPC_FORK_CALL {
        call::KMP_OUTLINED
    } else {
        call::OMP_OUTLINED
    }
}

/// The OpenMP probes of a session: in every process (once per file), because a program's
/// outlined functions are its own and the runtime's entry points are called once per
/// region or barrier, not in hot loops.
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

    /// Process `pid` started a region (call `parallel_call`) whose outlined function is
    /// at `address`. A program without a symbol table (a stripped executable or library)
    /// has no outlined function probed yet: the function is probed now, at its address,
    /// so the waits of its later regions are seen (this one's are not: its threads have
    /// started).
    pub fn region_started(
        &mut self,
        probes: &mut Probes,
        pid: u32,
        parallel_call: u16,
        address: u64,
    ) {
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
            calls: vec![(outlined_call_of(parallel_call), sym)],
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

    /// Probes the OpenMP runtime and the outlined functions of a program made of
    /// `files`, if it uses one at all.
    fn attach(&mut self, probes: &mut Probes, pid: u32, files: &BTreeSet<PathBuf>) {
        if !files.iter().any(|f| Runtime::of(f).is_some()) {
            return;
        }
        for file in files {
            if !self.searched.insert(file.clone()) {
                continue;
            }
            let found = match Runtime::of(file) {
                Some(runtime) => runtime_calls(file, runtime),
                None => outlined_functions(file),
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

/// The region and barrier entry points of `runtime` that `file` defines.
fn runtime_calls(file: &Path, runtime: Runtime) -> Option<ThreadLibrary> {
    let table = SymbolTable::read(file).ok()?;
    let calls: Vec<_> = CALLS
        .iter()
        .filter(|c| {
            c.family == Family::OpenMp
                && c.symbol.starts_with(runtime.entry_point_prefix())
                && matches!(
                    c.role,
                    Role::OmpParallel | Role::OmpBarrier | Role::OmpSerialized
                )
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
    let mut calls = Vec::new();
    for outlined in OUTLINED_PATTERNS {
        let pattern = glob::Pattern::new(outlined.symbols).expect("a valid pattern");
        calls.extend(
            table
                .functions_matching(&pattern)
                .into_iter()
                .filter(|s| !is_debug_body(&s.name))
                .map(|s| (outlined.call, s.clone())),
        );
    }
    (!calls.is_empty()).then(|| ThreadLibrary {
        path: file.to_path_buf(),
        calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_known_by_their_file_names() {
        let of = |p: &str| Runtime::of(Path::new(p));
        assert_eq!(
            of("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"),
            Some(Runtime::Gnu)
        );
        assert_eq!(of("/usr/lib/llvm-14/lib/libomp.so.5"), Some(Runtime::Llvm));
        assert_eq!(
            of("/usr/lib/llvm-14/lib/libomp-14.so.5"),
            Some(Runtime::Llvm)
        );
        // Open MPI's tracing library and libomp's debugging and offloading companions
        // are no runtime.
        assert_eq!(of("/usr/lib/x86_64-linux-gnu/libompitrace.so.40"), None);
        assert_eq!(of("/usr/lib/llvm-14/lib/libompd.so"), None);
        assert_eq!(of("/usr/lib/llvm-14/lib/libomptarget.so"), None);
    }

    #[test]
    fn clang_debug_bodies_are_not_probed() {
        let pattern = glob::Pattern::new(".omp_outlined.*").unwrap();
        for name in [".omp_outlined.", ".omp_outlined..3"] {
            assert!(pattern.matches(name) && !is_debug_body(name), "{name}");
        }
        for name in [".omp_outlined._debug__", ".omp_outlined._debug__.1"] {
            assert!(is_debug_body(name), "{name}");
        }
    }

    #[test]
    fn each_runtime_probes_its_own_entry_points() {
        let ids = |runtime: Runtime| -> Vec<u16> {
            CALLS
                .iter()
                .filter(|c| c.family == Family::OpenMp)
                .filter(|c| c.symbol.starts_with(runtime.entry_point_prefix()))
                .map(|c| c.id)
                .collect()
        };
        assert!(ids(Runtime::Llvm).contains(&call::KMPC_FORK_CALL));
        assert!(!ids(Runtime::Llvm).contains(&call::GOMP_BARRIER));
        assert!(ids(Runtime::Gnu).contains(&call::GOMP_PARALLEL));
        assert!(!ids(Runtime::Gnu).contains(&call::KMPC_BARRIER));
        assert_eq!(outlined_call_of(call::KMPC_FORK_CALL), call::KMP_OUTLINED);
        assert_eq!(outlined_call_of(call::GOMP_PARALLEL), call::OMP_OUTLINED);
    }
}
