//! Finding what to probe in an OpenMP program: the runtime's region and barrier entry
//! points (GCC's libgomp: `GOMP_*`; LLVM's libomp: `__kmpc_*`), and the functions the
//! compiler outlined from the program's parallel regions and tasks (GCC names them
//! `FUNCTION._omp_fn.N`: `main._omp_fn.0`, `MAIN__._omp_fn.1` in Fortran; clang
//! `.omp_outlined.`, `.omp_outlined..N` and `.omp_task_entry.`). Those are local
//! symbols, in the symbol table of an unstripped program. The session attaches the
//! probes (`session/openmp.rs`).

use std::path::{Path, PathBuf};

use tracer_common::call;

use crate::target::entry::{probe_point_in, ArgumentsRead};
use crate::target::libraries::ThreadLibrary;
use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolTable};
use tracer_analysis::calls::{Family, Role, CALLS};

/// The OpenMP runtimes whose entry points we probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runtime {
    /// GCC's libgomp (`gcc -fopenmp`).
    Gnu,
    /// LLVM's libomp (`clang -fopenmp`; Debian installs it as `libomp.so.5`, a copy
    /// named `libomp-14.so.5`, and Intel's name for it is `libiomp5.so`).
    Llvm,
}

impl Runtime {
    /// The runtime that file `path` is, by its name.
    pub(crate) fn of(path: &Path) -> Option<Runtime> {
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

/// The function at run-time address `address` of process `pid`, found without a symbol
/// table (a stripped program's outlined function, named by its offset), probed as the
/// outlined function of region start `parallel_call`: the file mapped there and the
/// offset in it; None when no file is mapped there.
pub(crate) fn outlined_function_at(
    pid: u32,
    address: u64,
    parallel_call: u16,
) -> Option<ThreadLibrary> {
    // The mapping of the file that holds the address: the highest start below it.
    let m = procfs::mappings(pid)
        .into_iter()
        .filter(|m| m.bias <= address)
        .max_by_key(|m| m.bias)?;
    let path = PathBuf::from(&m.path);
    let offset = address - m.bias;
    let inside = std::fs::metadata(&path).is_ok_and(|f| offset < f.len());
    if !inside {
        return None;
    }
    let sym = Symbol {
        name: format!("outlined function at {offset:#x}"),
        vaddr: offset,
        file_offset: offset,
        is_function: true,
    };
    Some(ThreadLibrary {
        path,
        calls: vec![(outlined_call_of(parallel_call), sym)],
    })
}

/// The region and barrier entry points of `runtime` that `file` defines.
pub(crate) fn runtime_calls(file: &Path, runtime: Runtime) -> Option<ThreadLibrary> {
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
            // Past libgomp's `endbr64` (see `probe_point_in`). Not the outlined functions:
            // their probes take the probed address as the function's identity.
            let args = ArgumentsRead::of(&c.layout);
            Some((c.id, probe_point_in(file, sym, args)))
        })
        .collect();
    (!calls.is_empty()).then(|| ThreadLibrary {
        path: file.to_path_buf(),
        calls,
    })
}

/// The outlined functions in `file`'s symbol table (none in a stripped file).
pub(crate) fn outlined_functions(file: &Path) -> Option<ThreadLibrary> {
    let patterns: Vec<glob::Pattern> = OUTLINED_PATTERNS
        .iter()
        .map(|o| glob::Pattern::new(o.symbols).expect("a valid pattern"))
        .collect();
    let table =
        SymbolTable::read_named(file, |name| patterns.iter().any(|p| p.matches(name))).ok()?;
    let mut calls = Vec::new();
    for (outlined, pattern) in OUTLINED_PATTERNS.iter().zip(&patterns) {
        calls.extend(
            table
                .functions_matching(pattern)
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
