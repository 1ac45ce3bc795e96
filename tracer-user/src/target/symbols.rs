//! ELF symbols of executables and shared libraries (with the `object` crate): where a
//! uprobe goes (file offset) and what the probe needs to know (virtual address).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::target::elf_file::open_elf;

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an ELF file we can read")]
    Parse {
        path: PathBuf,
        source: object::Error,
    },
    #[error("{path} is not an ELF file (not a regular file, or no ELF magic)")]
    NotElf { path: PathBuf },
}

impl SymbolError {
    /// What [`open_elf`] (or `read_elf`) of `path` failed with: not an ELF file, or not readable.
    pub fn reading(path: &Path, source: std::io::Error) -> Self {
        match source.kind() {
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => {
                SymbolError::NotElf {
                    path: path.to_path_buf(),
                }
            }
            _ => SymbolError::Read {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub name: String,
    /// st_value: virtual address in the file's own address space.
    pub vaddr: u64,
    /// Where the instruction lives in the file (what a uprobe is attached to).
    pub file_offset: u64,
    pub is_function: bool,
}

/// The defined symbols of one ELF file.
pub(crate) struct SymbolTable {
    pub symbols: Vec<Symbol>,
    /// Virtual address that file offset 0 is loaded at, before relocation (0 for shared
    /// libraries and PIEs, e.g. 0x400000 for a fixed-address executable). The mapping of
    /// offset 0 starts at this plus the load bias.
    pub base_vaddr: u64,
}

impl SymbolTable {
    pub(crate) fn read(path: &Path) -> Result<Self, SymbolError> {
        Self::read_named(path, |_| true)
    }

    /// The symbols whose names `keep` accepts: a search of many files for a few names
    /// (OpenMP's outlined functions, in each of a program's libraries) makes no string
    /// of the others (LAMMPS's 120 libraries took 210 ms of its first rank's hold at
    /// exec when every name was kept).
    pub(crate) fn read_named(
        path: &Path,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Self, SymbolError> {
        let elf = open_elf(path).map_err(|source| SymbolError::reading(path, source))?;
        // Only the headers and symbol tables are read, as the parser asks for them.
        let data = object::ReadCache::new(elf.file);
        let file = object::File::parse(&data).map_err(|source| SymbolError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let base_vaddr = tracer_analysis::base_vaddr(&file);
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .map(|s| {
                let (offset, _) = s.file_range();
                (s.address(), s.size(), offset)
            })
            .collect();
        let to_offset = |vaddr: u64| {
            segments
                .iter()
                .find(|(a, size, _)| vaddr >= *a && vaddr < a + size)
                .map(|(a, _, off)| vaddr - a + off)
        };
        let mut symbols: Vec<Symbol> = Vec::new();
        // A symbol in both tables is kept once: a set, not a search of `symbols` for each
        // symbol (quadratic in the table's size).
        let mut seen: HashSet<(u64, &str)> = HashSet::new();
        for sym in file.dynamic_symbols().chain(file.symbols()) {
            if sym.is_undefined() || sym.address() == 0 {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() || !keep(name) {
                continue;
            }
            let Some(file_offset) = to_offset(sym.address()) else {
                continue;
            };
            if !seen.insert((sym.address(), name)) {
                continue;
            }
            symbols.push(Symbol {
                name: name.to_string(),
                vaddr: sym.address(),
                file_offset,
                is_function: sym.kind() == SymbolKind::Text,
            });
        }
        Ok(SymbolTable {
            symbols,
            base_vaddr,
        })
    }

    /// Run-time address of a symbol, given where the process mapped this file's offset 0.
    pub(crate) fn runtime_address(&self, name: &str, mapping_start: u64) -> Option<u64> {
        let s = self.get(name)?;
        Some(
            mapping_start
                .wrapping_sub(self.base_vaddr)
                .wrapping_add(s.vaddr),
        )
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.name == name)
    }

    /// Functions whose name matches a glob pattern, one per address (aliases collapse to
    /// the first name seen, so a function is probed once).
    pub(crate) fn functions_matching(&self, pattern: &glob::Pattern) -> Vec<&Symbol> {
        let mut out: Vec<&Symbol> = Vec::new();
        for s in self
            .symbols
            .iter()
            .filter(|s| s.is_function && pattern.matches(&s.name))
        {
            if !out.iter().any(|o| o.vaddr == s.vaddr) {
                out.push(s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_libc_functions() {
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("libc");
        let t = SymbolTable::read(libc).unwrap();
        let write = t.get("write").expect("write");
        assert!(write.is_function && write.file_offset > 0);
        let pat = glob::Pattern::new("pthread_mutex_*lock").unwrap();
        let names: Vec<_> = t
            .functions_matching(&pat)
            .iter()
            .map(|s| s.name.clone())
            .collect();
        assert!(names
            .iter()
            .any(|n| n == "pthread_mutex_lock" || n == "pthread_mutex_unlock"));
    }

    #[test]
    fn non_elf_is_a_clear_error() {
        let err = SymbolTable::read(Path::new("/proc/self/status"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("not an ELF"), "{err}");
    }
}
