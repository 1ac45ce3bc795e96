//! Selected procedures (`--func SYMBOL`, `--func PATH:SYMBOL`; globs allowed): finding
//! them in executables and libraries and attaching entry/exit probes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::probes::{ProbeError, Probes};
use crate::target::procfs;
use crate::target::symbols::{SymbolError, SymbolTable};
use tracer_analysis::format::recording::FunctionProbe;

#[derive(Debug, thiserror::Error)]
pub enum FuncError {
    #[error("--func {spec}: bad pattern: {reason}")]
    Pattern { spec: String, reason: String },
    #[error("--func {spec}: no such file {path}")]
    NoSuchFile { spec: String, path: PathBuf },
    #[error(transparent)]
    Symbols(#[from] SymbolError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("too many procedure probes (at most 65535)")]
    TooMany,
}

struct Spec {
    text: String,
    /// `PATH:SYMBOL` limits the pattern to one file.
    path: Option<PathBuf>,
    pattern: glob::Pattern,
    matched: bool,
}

pub struct FunctionSelector {
    specs: Vec<Spec>,
    next_id: u16,
    /// Files already searched for the path-less patterns.
    searched: HashSet<PathBuf>,
}

impl FunctionSelector {
    pub fn new(specs: &[String]) -> Result<Self, FuncError> {
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
                let pattern = glob::Pattern::new(sym).map_err(|e| FuncError::Pattern {
                    spec: text.clone(),
                    reason: e.to_string(),
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
            next_id: 1,
            searched: HashSet::new(),
        })
    }

    /// Path-less patterns must be looked up in every program the targets exec, before
    /// that program runs.
    pub fn needs_exec_hold(&self) -> bool {
        self.specs.iter().any(|s| s.path.is_none())
    }

    /// Attaches the `PATH:SYMBOL` patterns (their files exist already).
    pub fn attach_fixed_paths(
        &mut self,
        probes: &mut Probes,
    ) -> Result<Vec<FunctionProbe>, FuncError> {
        let files: Vec<PathBuf> = self.specs.iter().filter_map(|s| s.path.clone()).collect();
        let mut out = Vec::new();
        for f in files {
            out.extend(self.attach_file(probes, &f, true)?);
        }
        Ok(out)
    }

    /// Attaches the path-less patterns in a process's executable and mapped libraries.
    pub fn attach_in_process(
        &mut self,
        probes: &mut Probes,
        pid: u32,
    ) -> Result<Vec<FunctionProbe>, FuncError> {
        if !self.needs_exec_hold() {
            return Ok(Vec::new());
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
        let mut out = Vec::new();
        for f in files {
            let f = f.canonicalize().unwrap_or(f);
            if self.searched.insert(f.clone()) {
                // A mapping that is not a readable ELF file (deleted, special) is skipped.
                match self.attach_file(probes, &f, false) {
                    Ok(p) => out.extend(p),
                    Err(FuncError::Symbols(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    /// System-wide mode: the path-less patterns in every process that uses MPI or PVM now.
    pub fn attach_everywhere(
        &mut self,
        probes: &mut Probes,
    ) -> Result<Vec<FunctionProbe>, FuncError> {
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
        fixed: bool,
    ) -> Result<Vec<FunctionProbe>, FuncError> {
        let table = SymbolTable::read(file)?;
        let mut out = Vec::new();
        for i in 0..self.specs.len() {
            let spec = &self.specs[i];
            let applies = match &spec.path {
                Some(p) => {
                    fixed && p.canonicalize().ok().as_deref() == file.canonicalize().ok().as_deref()
                }
                None => !fixed,
            };
            if !applies {
                continue;
            }
            let found: Vec<_> = table
                .functions_matching(&spec.pattern)
                .into_iter()
                .cloned()
                .collect();
            for sym in found {
                self.specs[i].matched = true;
                let id = self.next_id;
                if probes.attach_function(file, &sym.name, sym.file_offset, id)? {
                    self.next_id = self.next_id.checked_add(1).ok_or(FuncError::TooMany)?;
                    out.push(FunctionProbe {
                        id,
                        symbol: sym.name.clone(),
                        path: file.display().to_string(),
                        vaddr: sym.vaddr,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Patterns that matched nothing anywhere.
    pub fn unmatched(&self) -> Vec<String> {
        self.specs
            .iter()
            .filter(|s| !s.matched)
            .map(|s| s.text.clone())
            .collect()
    }
}
