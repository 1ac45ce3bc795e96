//! Finding the MPI and PVM libraries to probe, and telling which family each one is.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::calls::{Flavor, OMPI_COMM_WORLD_SYMBOL, PVM_RBUF_SYMBOL};
use crate::procfs;
use crate::recording::LibraryInfo;
use crate::symbols::{SymbolError, SymbolTable};

/// File name prefixes of the libraries that define the MPI and PVM entry points.
const LIBRARY_PREFIXES: &[&str] = &["libmpi.so", "libmpich.so", "libpvm3.so"];

const SEARCH_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/lib64",
];

pub struct Library {
    pub path: PathBuf,
    pub flavor: Flavor,
    pub symbols: SymbolTable,
}

impl Library {
    /// Reads `path` and tells its family; None if it defines no MPI or PVM entry point.
    pub fn open(path: &Path) -> Result<Option<Library>, SymbolError> {
        let symbols = SymbolTable::read(path)?;
        let flavor = if symbols.get(OMPI_COMM_WORLD_SYMBOL).is_some() {
            Flavor::OpenMpi
        } else if symbols.get("MPI_Send").is_some() || symbols.get("PMPI_Send").is_some() {
            // MPICH and its ABI-compatible derivatives (int handles).
            Flavor::Mpich
        } else if symbols.get("pvm_mytid").is_some() {
            Flavor::Pvm
        } else {
            return Ok(None);
        };
        Ok(Some(Library {
            path: path.to_path_buf(),
            flavor,
            symbols,
        }))
    }

    pub fn info(&self) -> LibraryInfo {
        LibraryInfo {
            path: self.path.display().to_string(),
            flavor: self.flavor,
            comm_world_vaddr: match self.flavor {
                Flavor::OpenMpi => self.symbols.get(OMPI_COMM_WORLD_SYMBOL).map(|s| s.vaddr),
                _ => None,
            },
        }
    }

    /// PVM's receive-buffer global, needed to learn the source of a wildcard receive.
    pub fn pvm_rbuf_vaddr(&self) -> u64 {
        self.symbols
            .get(PVM_RBUF_SYMBOL)
            .map(|s| s.vaddr)
            .unwrap_or(0)
    }
}

fn is_candidate_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    LIBRARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Library files installed in the usual places, canonicalized and de-duplicated.
pub fn installed_candidates() -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for dir in SEARCH_DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if is_candidate_name(&p) {
                if let Ok(real) = p.canonicalize() {
                    if real.is_file() {
                        out.insert(real);
                    }
                }
            }
        }
    }
    out
}

/// Candidate libraries mapped by running processes (custom installs, other prefixes).
pub fn mapped_candidates(pids: &[u32]) -> BTreeSet<PathBuf> {
    pids.iter()
        .flat_map(|&p| procfs::mappings(p))
        .map(|m| PathBuf::from(m.path))
        .filter(|p| is_candidate_name(p))
        .filter_map(|p| p.canonicalize().ok())
        .collect()
}

/// Open MPI: the MPI_COMM_WORLD handle of a process, i.e. where the dynamic linker put
/// `ompi_mpi_comm_world`. The executable comes first in symbol lookup, and executables
/// that use MPI_COMM_WORLD directly usually hold a copy of the object (a copy
/// relocation); otherwise it is the library's own.
pub fn ompi_world_handle(lib: &LibraryInfo, info: &procfs::ProcessInfo) -> Option<u64> {
    let vaddr = lib.comm_world_vaddr?;
    let lib_map = info.mappings.iter().find(|m| m.path == lib.path)?;
    let exe = Path::new(&info.exe);
    if let (Ok(table), Some(exe_map)) = (
        SymbolTable::read(exe),
        info.mappings.iter().find(|m| Path::new(&m.path) == exe),
    ) {
        if let Some(addr) = table.runtime_address(OMPI_COMM_WORLD_SYMBOL, exe_map.bias) {
            return Some(addr);
        }
    }
    // Shared libraries are linked at address 0: the mapping of offset 0 is the bias.
    Some(lib_map.bias.wrapping_add(vaddr))
}

/// The shared libraries a process's program will load (as `ldd` resolves them, with the
/// process's own LD_LIBRARY_PATH), canonicalized. Empty for static or unreadable programs.
pub fn needed_by(pid: u32) -> BTreeSet<PathBuf> {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return BTreeSet::new();
    };
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let ld_path = env
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"LD_LIBRARY_PATH="))
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let mut cmd = std::process::Command::new("ldd");
    cmd.arg(&exe).stderr(std::process::Stdio::null());
    match ld_path {
        Some(p) => cmd.env("LD_LIBRARY_PATH", p),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let Ok(out) = cmd.output() else {
        return BTreeSet::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split("=> ")
                .nth(1)?
                .split_whitespace()
                .next()
                .map(PathBuf::from)
        })
        .filter_map(|p| p.canonicalize().ok())
        .collect()
}

/// The MPI/PVM libraries of a session: all candidates, and which are probed. Libraries are
/// probed when a traced process needs them (checked at exec, while the process is held),
/// because every probe costs a trap in every process that calls it and about 0.1 s to
/// remove at the end.
pub struct LibrarySet {
    pub libs: Vec<Library>,
    /// Calls probed per library (None: not probed yet).
    pub probed: Vec<Option<usize>>,
}

impl LibrarySet {
    pub fn new(libs: Vec<Library>) -> Self {
        let probed = vec![None; libs.len()];
        LibrarySet { libs, probed }
    }

    /// Probes the libraries among `paths` (canonical) that are not probed yet.
    pub fn probe(
        &mut self,
        probes: &mut crate::probes::Probes,
        wanted: impl Fn(&Path) -> bool,
    ) -> Result<(), crate::probes::ProbeError> {
        for (lib, probed) in self.libs.iter().zip(self.probed.iter_mut()) {
            if probed.is_none() && wanted(&lib.path) {
                *probed = Some(probes.attach_library(lib)?);
            }
        }
        Ok(())
    }

    pub fn infos(&self) -> Vec<LibraryInfo> {
        self.libs.iter().map(|l| l.info()).collect()
    }

    /// (path, flavor, calls probed) of the probed libraries.
    pub fn probed(&self) -> Vec<(PathBuf, Flavor, usize)> {
        self.libs
            .iter()
            .zip(&self.probed)
            .filter_map(|(l, n)| Some((l.path.clone(), l.flavor, (*n)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_installed_libraries() {
        // The project's setup installs Open MPI, MPICH and PVM; each must be recognised.
        let libs: Vec<Library> = installed_candidates()
            .iter()
            .filter_map(|p| Library::open(p).ok().flatten())
            .collect();
        for f in [Flavor::OpenMpi, Flavor::Mpich, Flavor::Pvm] {
            assert!(libs.iter().any(|l| l.flavor == f), "no {f:?} library found");
        }
        let ompi = libs.iter().find(|l| l.flavor == Flavor::OpenMpi).unwrap();
        assert!(ompi.info().comm_world_vaddr.is_some());
        let pvm = libs.iter().find(|l| l.flavor == Flavor::Pvm).unwrap();
        assert!(pvm.pvm_rbuf_vaddr() != 0);
    }
}
