//! The source names of selected procedures' symbols. A recording keeps the symbol as
//! the binary has it (what `--func` matched); the reader shows the name a programmer
//! wrote, as `c++filt`, gdb and perf do: C++ (Itanium ABI) names with their parameters
//! (`LAMMPS_NS::PairLJCut::compute(int, int)`), Rust names without the hash that legacy
//! symbols end with (`tools::solve`), gfortran's module procedures as gdb names them
//! (`__heat_MOD_step` is `heat::step`). Every other name is shown as it is: C and
//! Fortran names (`compute_step`, `step_`), OpenMP's outlined `main._omp_fn.0`.

/// The name `symbol` stands for in the source: demangled when it is a C++ or Rust
/// symbol, itself otherwise (a symbol that looks mangled but does not parse included).
pub fn demangle(symbol: &str) -> String {
    rust_name(symbol)
        .or_else(|| cpp_name(symbol))
        .or_else(|| fortran_module_name(symbol))
        .unwrap_or_else(|| symbol.to_string())
}

/// A gfortran module procedure: `__MODULE_MOD_PROCEDURE` is `MODULE::PROCEDURE` (a module
/// name may hold underscores, never the `_MOD_` gfortran puts after it).
fn fortran_module_name(symbol: &str) -> Option<String> {
    let (module, procedure) = symbol.strip_prefix("__")?.split_once("_MOD_")?;
    if module.is_empty() || procedure.is_empty() {
        return None;
    }
    Some(format!("{module}::{procedure}"))
}

/// A Rust symbol: legacy (`_ZN...17h<hash>E`, which C++'s grammar also reads, with the
/// hash as a path component) or v0 (`_R...`), without the hash.
fn rust_name(symbol: &str) -> Option<String> {
    if !(symbol.starts_with("_R") || is_legacy_rust(symbol)) {
        return None;
    }
    let name = rustc_demangle::try_demangle(symbol).ok()?;
    // The alternate form leaves out the hash (legacy) and the crates' disambiguators (v0).
    Some(format!("{name:#}"))
}

/// A legacy Rust symbol ends its path with the hash component: `17h`, 16 hex digits.
fn is_legacy_rust(symbol: &str) -> bool {
    const HASH: &str = "17h";
    const HASH_DIGITS: usize = 16;
    let Some(path) = symbol.strip_prefix("_ZN").and_then(|s| s.strip_suffix('E')) else {
        return false;
    };
    let Some(cut) = path.len().checked_sub(HASH.len() + HASH_DIGITS) else {
        return false;
    };
    let (before, digits) = path.split_at(path.len() - HASH_DIGITS);
    before[cut..] == *HASH && digits.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A C++ symbol (`_Z...`), with its parameters and template arguments.
fn cpp_name(symbol: &str) -> Option<String> {
    if !symbol.starts_with("_Z") {
        return None;
    }
    cpp_demangle::Symbol::new(symbol).ok()?.demangle().ok()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn c_plus_plus_names_keep_their_parameters() {
        assert_eq!(
            demangle("_ZN9LAMMPS_NS9PairLJCut7computeEii"),
            "LAMMPS_NS::PairLJCut::compute(int, int)"
        );
        assert_eq!(demangle("_Z5solvePdi"), "solve(double*, int)");
    }

    #[test]
    fn c_plus_plus_templates_show_their_arguments() {
        // template<typename T> void relax(std::vector<T>&), at T = double.
        assert_eq!(
            demangle("_Z5relaxIdEvRSt6vectorIT_SaIS1_EE"),
            "void relax<double>(std::vector<double, std::allocator<double> >&)"
        );
    }

    #[test]
    fn rust_legacy_names_lose_their_hash() {
        assert_eq!(
            demangle("_ZN5tools5solve17h0123456789abcdefE"),
            "tools::solve"
        );
    }

    #[test]
    fn rust_v0_names_are_paths() {
        // v0 mangling of `tools::solve` (crate `tools` with disambiguator 1).
        assert_eq!(demangle("_RNvCs1_5tools5solve"), "tools::solve");
    }

    #[test]
    fn fortran_module_procedures_are_named_as_gdb_does() {
        assert_eq!(demangle("__heat_MOD_step"), "heat::step");
        assert_eq!(
            demangle("__heat_solver_MOD_step_all"),
            "heat_solver::step_all"
        );
    }

    #[test]
    fn c_and_outlined_names_stay_as_they_are() {
        for name in [
            "main",
            "compute_step",
            "main._omp_fn.0",
            "step_",
            "__MOD_x",
            "_Zunparsable",
            "_",
            "",
        ] {
            assert_eq!(demangle(name), name);
        }
    }
}
