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
        files
            .into_iter()
            .map(|f| f.canonicalize().unwrap_or(f))
            .filter(|f| self.searched.insert(f.clone()))
            .collect()
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

    /// Patterns that matched nothing anywhere.
    pub(crate) fn unmatched(&self) -> Vec<String> {
        self.specs
            .iter()
            .filter(|s| !s.matched)
            .map(|s| s.text.clone())
            .collect()
    }
}
