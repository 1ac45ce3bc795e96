//! Selected procedures (`--func SYMBOL`, `--func PATH:SYMBOL`; globs allowed): which
//! files to search and which of their functions the patterns select. The session
//! attaches the probes (`session/funcs.rs`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolError, SymbolTable};

#[derive(Debug, thiserror::Error)]
pub enum FuncError {
    #[error("--func {spec}: bad pattern")]
    Pattern {
        spec: String,
        #[source]
        source: glob::PatternError,
    },
    #[error("--func {spec}: no such file {path}")]
    NoSuchFile { spec: String, path: PathBuf },
    #[error(transparent)]
    Symbols(#[from] SymbolError),
    #[error("--func {spec} matches no function in {searched}; {near}")]
    NoMatch {
        spec: String,
        /// The files searched, for people.
        searched: String,
        /// The near names, or where to look.
        near: String,
    },
}

/// Programs that run another program named in their arguments or a script: the
/// functions of what they run are not in their files, so a path-less `--func` is not
/// checked against them before launch.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "busybox", "perl", "ruby", "node",
    "nodejs", "R", "Rscript", "julia", "java", "lua", "tclsh",
];

/// Whether `program` runs code its files (and its arguments' files) do not hold: a
/// shell, an interpreter (python3.11 too), or a script.
pub(crate) fn runs_code_elsewhere(program: &Path) -> bool {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    INTERPRETERS.contains(&name.as_str()) || name.starts_with("python") || !is_elf(program)
}

/// Whether `path` is a file that starts with the ELF magic.
pub(crate) fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

/// How many near names an error suggests at most.
const NEAR_NAMES: usize = 6;

/// The function names of `names` that a person who wrote `wanted` (a `--func` pattern
/// that matched none of them) may have meant, best first: the same name in another case;
/// gfortran's (`foo_`, `__mod_MOD_foo`); a compiler's copies and OpenMP outlined
/// functions (`foo._omp_fn.0`, `foo.cold`); C++ and Rust mangled names that hold the
/// name (`_Z3fooi`, `_ZN5crate3foo17h...E`), the demangled `ns::foo(int)` or
/// `crate::foo` asked for too; then names that contain it.
pub(crate) fn near_names<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    // A demangled name or a glob: its last plain identifier.
    let plain: String = wanted
        .split('(')
        .next()
        .unwrap_or_default()
        .rsplit("::")
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']'))
        .collect();
    if plain.is_empty() {
        return Vec::new();
    }
    let length_prefixed = format!("{}{plain}", plain.len());
    let holds_mangled = |n: &str| {
        (n.starts_with("_Z") || n.starts_with("_R"))
            && n.match_indices(&length_prefixed)
                // `3foo` in `13foo...` is not foo's length and name.
                .any(|(at, _)| !n[..at].ends_with(|c: char| c.is_ascii_digit()))
    };
    let rank = |n: &str| -> Option<u8> {
        if n == wanted {
            None
        } else if n.eq_ignore_ascii_case(&plain) {
            Some(0)
        } else if n.strip_suffix('_') == Some(plain.as_str())
            || plain.strip_suffix('_') == Some(n)
            || n.ends_with(&format!("_MOD_{plain}"))
        {
            Some(1)
        } else if n.starts_with(&format!("{plain}.")) {
            Some(2)
        } else if holds_mangled(n) {
            Some(3)
        } else if plain.len() >= 3 && n.contains(plain.as_str()) {
            Some(4)
        } else {
            None
        }
    };
    let mut found: Vec<(u8, &str)> = names.filter_map(|n| rank(n).map(|r| (r, n))).collect();
    found.sort_unstable();
    found.dedup_by(|a, b| a.1 == b.1);
    found
        .into_iter()
        .take(NEAR_NAMES)
        .map(|(_, n)| n.to_string())
        .collect()
}

struct Spec {
    text: String,
    /// `PATH:SYMBOL` limits the pattern to one file.
    path: Option<PathBuf>,
    pattern: glob::Pattern,
    matched: bool,
}

pub(crate) struct FunctionSelector {
    specs: Vec<Spec>,
    /// Files already searched for the path-less patterns.
    searched: HashSet<PathBuf>,
}

impl FunctionSelector {
    pub(crate) fn new(specs: &[String]) -> Result<Self, FuncError> {
        let specs = specs
            .iter()
            .map(|text| {
                let (path, sym) = match text.rsplit_once(':') {
                    Some((p, s)) if p.contains('/') => (Some(PathBuf::from(p)), s),
                    _ => (None, text.as_str()),
                };
                if let Some(p) = &path {
                    if !p.is_file() {
                        return Err(FuncError::NoSuchFile {
                            spec: text.clone(),
                            path: p.clone(),
                        });
                    }
                }
                let pattern = glob::Pattern::new(sym).map_err(|source| FuncError::Pattern {
                    spec: text.clone(),
                    source,
                })?;
                Ok(Spec {
                    text: text.clone(),
                    path,
                    pattern,
                    matched: false,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(FunctionSelector {
            specs,
            searched: HashSet::new(),
        })
    }

    /// Path-less patterns must be looked up in every program the targets exec, before
    /// that program runs.
    pub(crate) fn needs_exec_hold(&self) -> bool {
        self.specs.iter().any(|s| s.path.is_none())
    }

    /// The files the `PATH:SYMBOL` patterns name (they exist already).
    pub(crate) fn fixed_paths(&self) -> Vec<PathBuf> {
        self.specs.iter().filter_map(|s| s.path.clone()).collect()
    }

    /// The files of a process (its executable and mapped libraries) the path-less
    /// patterns have not been looked up in yet; none without such patterns.
    pub(crate) fn new_files_of_process(&mut self, pid: u32) -> Vec<PathBuf> {
        if !self.needs_exec_hold() {
            return Vec::new();
        }
        let mut files: Vec<PathBuf> = Vec::new();
        if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
            files.push(exe);
        }
        files.extend(
            procfs::mappings(pid)
                .into_iter()
                .map(|m| PathBuf::from(m.path)),
        );
        let files = files.into_iter().map(|f| f.canonicalize().unwrap_or(f));
        self.not_searched_yet(files)
    }

    /// Of `files`, those that exist here and the path-less patterns have not been looked
    /// up in yet; none without such patterns.
    pub(crate) fn new_files(&mut self, files: &[PathBuf]) -> Vec<PathBuf> {
        if !self.needs_exec_hold() {
            return Vec::new();
        }
        self.not_searched_yet(files.iter().filter_map(|f| f.canonicalize().ok()))
    }

    /// Marks `files` searched; those that were not.
    fn not_searched_yet(&mut self, files: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
        files.filter(|f| self.searched.insert(f.clone())).collect()
    }

    /// The functions of `file` the patterns select, in pattern order (a function two
    /// patterns select comes twice): the `PATH:SYMBOL` patterns naming `file` when
    /// `fixed`, else the path-less ones. The patterns that select one count as matched.
    pub(crate) fn select_in_file(
        &mut self,
        file: &Path,
        fixed: bool,
    ) -> Result<Vec<Symbol>, SymbolError> {
        let table = SymbolTable::read(file)?;
        let mut selected = Vec::new();
        for spec in &mut self.specs {
            let applies = match &spec.path {
                Some(p) => {
                    fixed && p.canonicalize().ok().as_deref() == file.canonicalize().ok().as_deref()
                }
                None => !fixed,
            };
            if !applies {
                continue;
            }
            let found = table.functions_matching(&spec.pattern);
            spec.matched |= !found.is_empty();
            selected.extend(found.into_iter().cloned());
        }
        Ok(selected)
    }

    /// Before a command is launched: every `PATH:SYMBOL` pattern must match in its file,
    /// and, when `program_files` are given (the launched program's executable, the
    /// executables among its arguments, and their libraries), every path-less pattern in
    /// one of them. A pattern that matches nothing is refused with the near names of
    /// what was searched. Nothing is marked matched here.
    pub(crate) fn check_before_launch(
        &self,
        program_files: Option<&[PathBuf]>,
        listed: &Path,
    ) -> Result<(), FuncError> {
        let mut tables: Vec<(PathBuf, SymbolTable)> = Vec::new();
        fn table_of(tables: &mut Vec<(PathBuf, SymbolTable)>, file: &Path) -> Option<usize> {
            if let Some(i) = tables.iter().position(|(f, _)| f == file) {
                return Some(i);
            }
            let table = SymbolTable::read(file).ok()?;
            tables.push((file.to_path_buf(), table));
            Some(tables.len() - 1)
        }
        for spec in &self.specs {
            let files: Vec<PathBuf> = match (&spec.path, program_files) {
                (Some(p), _) => vec![p.clone()],
                (None, Some(files)) => files.to_vec(),
                (None, None) => continue,
            };
            let searched: Vec<usize> = files
                .iter()
                .filter_map(|f| table_of(&mut tables, f))
                .collect();
            if searched.is_empty() && spec.path.is_none() {
                continue; // nothing readable to check against
            }
            if searched
                .iter()
                .any(|&i| !tables[i].1.functions_matching(&spec.pattern).is_empty())
            {
                continue;
            }
            let wanted = spec.text.rsplit_once(':').filter(|_| spec.path.is_some());
            let wanted = wanted.map_or(spec.text.as_str(), |(_, s)| s);
            let near = near_names(
                wanted,
                searched.iter().flat_map(|&i| {
                    tables[i]
                        .1
                        .symbols
                        .iter()
                        .filter(|s| s.is_function)
                        .map(|s| s.name.as_str())
                }),
            );
            let first = spec.path.as_deref().unwrap_or(listed);
            let list_hint = format!("`tracer functions {}` lists its functions", first.display());
            let near = if near.is_empty() {
                list_hint
            } else {
                format!("near names: {} ({list_hint})", near.join(", "))
            };
            let searched = match spec.path.as_deref() {
                Some(p) => p.display().to_string(),
                None => format!(
                    "{} nor the {} other executables and libraries it runs with (for a \
                     library loaded later with dlopen, give PATH:SYMBOL)",
                    listed.display(),
                    files.len().saturating_sub(1)
                ),
            };
            return Err(FuncError::NoMatch {
                spec: spec.text.clone(),
                searched,
                near,
            });
        }
        Ok(())
    }

    /// Patterns that matched nothing anywhere.
    pub(crate) fn unmatched(&self) -> Vec<String> {
        self.specs
            .iter()
            .filter(|s| !s.matched)
            .map(|s| s.text.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::near_names;

    #[test]
    fn near_names_of_fortran_openmp_cpp_and_rust_functions() {
        let names = [
            "conj_grad_",
            "conj_grad_._omp_fn.0",
            "_Z5solvei",
            "_ZN5tools5solve17h0123456789abcdefE",
            "_Z15solvearray_sizei",
            "Solve",
            "main",
            "__solver_MOD_step",
        ];
        let near = |w: &str| near_names(w, names.iter().copied());
        assert_eq!(near("conj_grad"), ["conj_grad_", "conj_grad_._omp_fn.0"]);
        assert_eq!(
            near("solve"),
            [
                "Solve",
                "_Z5solvei",
                "_ZN5tools5solve17h0123456789abcdefE",
                // Names that hold it come last.
                "_Z15solvearray_sizei",
                "__solver_MOD_step"
            ]
        );
        // Demangled names ask for the mangled ones.
        assert_eq!(near("tools::solve")[1], "_Z5solvei");
        assert_eq!(near("solve(int)")[0], "Solve");
        assert_eq!(near("step"), ["__solver_MOD_step"]);
        assert!(near("nothing_like_it").is_empty());
    }
}
