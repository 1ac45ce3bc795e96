//! Finding what to probe in an OpenMP program: libgomp's region and barrier entry points,
//! and the functions the compiler outlined from the program's parallel regions and tasks
//! (GCC names them `FUNCTION._omp_fn.N`: `main._omp_fn.0`, `MAIN__._omp_fn.1` in
//! Fortran). Those are local symbols, in the symbol table of an unstripped program. The
//! session attaches the probes (`session/openmp.rs`).

use std::path::{Path, PathBuf};

use tracer_common::call;

use crate::target::libraries::ThreadLibrary;
use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolTable};
use tracer_analysis::format::calls::{Family, Role, CALLS};

/// File name prefix of GCC's OpenMP runtime.
const GOMP_PREFIX: &str = "libgomp.so";

/// The outlined functions' symbols.
const OUTLINED_PATTERN: &str = "*._omp_fn.*";

pub(crate) fn is_libgomp(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(GOMP_PREFIX))
}

/// The function at run-time address `address` of process `pid`, found without a symbol
/// table (a stripped program's outlined function, named by its offset): the file mapped
/// there and the offset in it; None when no file is mapped there.
pub(crate) fn outlined_function_at(pid: u32, address: u64) -> Option<ThreadLibrary> {
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
        calls: vec![(call::OMP_OUTLINED, sym)],
    })
}

/// libgomp's region and barrier entry points that `file` defines.
pub(crate) fn runtime_calls(file: &Path) -> Option<ThreadLibrary> {
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
pub(crate) fn outlined_functions(file: &Path) -> Option<ThreadLibrary> {
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
