//! The MPI and PVM libraries to probe: where they are, which family each one is, which
//! of their calls a program imports, and Open MPI's predefined handles.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::target::elf_file::open_elf;
use crate::target::entry::{probe_point_in, ArgumentsRead};
use crate::target::symbols::{Symbol, SymbolError, SymbolTable};
use crate::target::{ldd, parallel, procfs};
use tracer_analysis::calls::{
    Family, Flavor, OMPI_COMM_SELF_SYMBOL, OMPI_COMM_WORLD_SYMBOL, PVM_RBUF_SYMBOL,
};
use tracer_analysis::recording::LibraryInfo;

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

pub(crate) struct Library {
    pub path: PathBuf,
    pub flavor: Flavor,
    pub symbols: SymbolTable,
}

impl Library {
    /// Reads `path` and tells its family; None if it defines no MPI or PVM entry point.
    pub(crate) fn open(path: &Path) -> Result<Option<Library>, SymbolError> {
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

    /// Where the entry and exit probes of the function `name`, which read `args`, go
    /// ([`probe_point_in`]: past leading instructions the kernel would single-step);
    /// None if the library does not define it.
    pub(crate) fn probe_point(&self, name: &str, args: ArgumentsRead) -> Option<Symbol> {
        Some(probe_point_in(&self.path, self.symbols.get(name)?, args))
    }

    pub(crate) fn info(&self) -> LibraryInfo {
        LibraryInfo {
            path: self.path.display().to_string(),
            flavor: self.flavor,
            comm_world_vaddr: match self.flavor {
                Flavor::OpenMpi => self.symbols.get(OMPI_COMM_WORLD_SYMBOL).map(|s| s.vaddr),
                _ => None,
            },
            comm_self_vaddr: match self.flavor {
                Flavor::OpenMpi => self.symbols.get(OMPI_COMM_SELF_SYMBOL).map(|s| s.vaddr),
                _ => None,
            },
        }
    }

    /// PVM's receive-buffer global, needed to learn the source of a wildcard receive.
    pub(crate) fn pvm_rbuf_vaddr(&self) -> u64 {
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
pub(crate) fn installed_candidates() -> BTreeSet<PathBuf> {
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
pub(crate) fn mapped_candidates(pids: &[u32]) -> BTreeSet<PathBuf> {
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
pub(crate) fn ompi_world_handle(lib: &LibraryInfo, info: &procfs::ProcessInfo) -> Option<u64> {
    ompi_predefined_handle(lib.comm_world_vaddr?, OMPI_COMM_WORLD_SYMBOL, lib, info)
}

/// Open MPI: the MPI_COMM_SELF handle of a process (as [`ompi_world_handle`]).
pub(crate) fn ompi_self_handle(lib: &LibraryInfo, info: &procfs::ProcessInfo) -> Option<u64> {
    ompi_predefined_handle(lib.comm_self_vaddr?, OMPI_COMM_SELF_SYMBOL, lib, info)
}

/// Where the dynamic linker put Open MPI's predefined object `symbol` (at `vaddr` in
/// the library) for process `info`.
fn ompi_predefined_handle(
    vaddr: u64,
    symbol: &str,
    lib: &LibraryInfo,
    info: &procfs::ProcessInfo,
) -> Option<u64> {
    let lib_map = info.mappings.iter().find(|m| m.path == lib.path)?;
    let exe = Path::new(&info.exe);
    if let (Ok(table), Some(exe_map)) = (
        SymbolTable::read(exe),
        info.mappings.iter().find(|m| Path::new(&m.path) == exe),
    ) {
        if let Some(addr) = table.runtime_address(symbol, exe_map.bias) {
            return Some(addr);
        }
    }
    // Shared libraries are linked at address 0: the mapping of offset 0 is the bias.
    Some(lib_map.bias.wrapping_add(vaddr))
}

/// What processes' programs need probed: the shared libraries they will load (as `ldd`
/// resolves them, with each process's own LD_LIBRARY_PATH), canonicalized, and the MPI
/// calls they import. Remembered by program file and library path: every rank of a job
/// runs the same program, held at its exec while this is found, and the ranks' execs
/// are handled one after another. For LAMMPS (over 120 libraries) reading the imports
/// took 120-190 ms a rank, and a third rank waited 1.3 s for the two before it on a
/// loaded machine; `ldd` takes 6-9 ms.
#[derive(Default)]
pub(crate) struct NeededLibraries {
    known: HashMap<ProgramIdentity, ProgramNeeds>,
}

/// What one program needs probed ([`NeededLibraries`]).
#[derive(Clone, Default)]
pub(crate) struct ProgramNeeds {
    /// Its shared libraries, canonical paths; empty for a static or unreadable program.
    pub libraries: BTreeSet<PathBuf>,
    /// The MPI calls it and its libraries import.
    pub imports: ImportedCalls,
}

/// A program file as it is now (a rebuilt file is another program), and the library
/// path it runs with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProgramIdentity {
    path: PathBuf,
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
    ld_library_path: Option<String>,
}

impl NeededLibraries {
    /// What the programs `executables` need, run with this process's LD_LIBRARY_PATH
    /// (as a command this tracer launches is): found before the command is launched,
    /// while the probes load, so that its processes' holds at exec find them known.
    pub(crate) fn of_programs(executables: &[PathBuf]) -> NeededLibraries {
        let ld_library_path = std::env::var("LD_LIBRARY_PATH").ok();
        let mut needed = NeededLibraries::default();
        for exe in executables {
            // What a process's /proc/PID/exe names: the file, not a link to it.
            let Ok(exe) = exe.canonicalize() else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(&exe) else {
                continue;
            };
            needed.find(ProgramIdentity::new(exe, &meta, ld_library_path.clone()));
        }
        needed
    }

    /// What the program of process `pid` needs.
    pub(crate) fn of(&mut self, pid: u32) -> ProgramNeeds {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return ProgramNeeds::default();
        };
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let ld_library_path = env
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(b"LD_LIBRARY_PATH="))
            .map(|v| String::from_utf8_lossy(v).into_owned());
        // The file the process runs, through its own link (the path may be gone or
        // replaced since the exec).
        let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/exe")) else {
            return ProgramNeeds::default();
        };
        self.find(ProgramIdentity::new(exe, &meta, ld_library_path))
    }

    /// What the program `identity` needs: known already, or found now.
    fn find(&mut self, identity: ProgramIdentity) -> ProgramNeeds {
        if let Some(needs) = self.known.get(&identity) {
            return needs.clone();
        }
        let exe = &identity.path;
        let libraries: BTreeSet<PathBuf> =
            ldd::resolved_libraries(exe, identity.ld_library_path.as_deref(), ldd::LDD_DEADLINE)
                .into_iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect();
        let needs = ProgramNeeds {
            imports: ImportedCalls::of_program(exe, &libraries),
            libraries,
        };
        self.known.insert(identity, needs.clone());
        needs
    }
}

impl ProgramIdentity {
    /// Program `path` as `meta` (its metadata) finds it, run with `ld_library_path`.
    fn new(path: PathBuf, meta: &std::fs::Metadata, ld_library_path: Option<String>) -> Self {
        use std::os::unix::fs::MetadataExt;
        ProgramIdentity {
            path,
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            modified_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ld_library_path,
        }
    }
}

/// The MPI/PVM libraries of a session: all candidates, and which are probed. Libraries are
/// probed when a traced process needs them (checked at exec, while the process is held),
/// because every probe costs a trap in every process that calls it and about 0.1 s to
/// remove at the end.
pub(crate) struct LibrarySet {
    pub libs: Vec<Library>,
    /// Calls probed per library (None: not probed yet).
    pub probed: Vec<Option<usize>>,
}

impl LibrarySet {
    pub(crate) fn new(libs: Vec<Library>) -> Self {
        let probed = vec![None; libs.len()];
        LibrarySet { libs, probed }
    }

    pub(crate) fn infos(&self) -> Vec<LibraryInfo> {
        self.libs.iter().map(|l| l.info()).collect()
    }

    /// Whether one of `files` (canonical paths) is an MPI/PVM library of the set.
    pub(crate) fn any_of(&self, files: &BTreeSet<PathBuf>) -> bool {
        self.libs.iter().any(|l| files.contains(&l.path))
    }

    /// The libraries probed so far.
    pub(crate) fn probed(&self) -> Vec<ProbedLibrary> {
        self.libs
            .iter()
            .zip(&self.probed)
            .filter_map(|(l, n)| {
                Some(ProbedLibrary {
                    path: l.path.clone(),
                    flavor: l.flavor,
                    calls: (*n)?,
                })
            })
            .collect()
    }
}

/// A library whose calls are probed.
pub struct ProbedLibrary {
    pub path: PathBuf,
    pub flavor: Flavor,
    /// How many of its calls.
    pub calls: usize,
}

/// Which on-demand MPI calls ([`tracer_analysis::calls::CallSpec::on_demand`]) a program needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum ImportedCalls {
    /// Unknown programs (running targets, system-wide mode) or a program that imports no
    /// MPI call at all (it may load MPI with dlopen): every call.
    #[default]
    All,
    /// The normalized names ([`mpi_call_key`]) the program and its libraries import.
    Names(BTreeSet<String>),
}

impl ImportedCalls {
    pub(crate) fn includes(&self, c: &tracer_analysis::calls::CallSpec) -> bool {
        match self {
            ImportedCalls::All => true,
            ImportedCalls::Names(names) => {
                mpi_call_key(c.symbol).is_some_and(|k| names.contains(&k))
            }
        }
    }

    /// The MPI calls imported by the program `exe` and by `needed`, its shared
    /// libraries, leaving out the objects that define MPI calls themselves (the MPI
    /// library, its Fortran bindings, profiling wrappers): they import nearly every call
    /// whether the program uses it or not.
    fn of_program(exe: &Path, needed: &BTreeSet<PathBuf>) -> ImportedCalls {
        let files: Vec<&Path> = std::iter::once(exe)
            .chain(needed.iter().map(PathBuf::as_path))
            .collect();
        let names: BTreeSet<String> = parallel::read_each(&files, |path| mpi_imports(path))
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        if names.is_empty() {
            ImportedCalls::All
        } else {
            ImportedCalls::Names(names)
        }
    }
}

/// MPI calls that only compute or look something up locally (no waiting, no traffic):
/// not worth reporting when they are not probed. Prefixes of [`mpi_call_key`]s.
const LOCAL_MPI_CALLS: &[&str] = &[
    "mpi_abort",
    "mpi_address",
    "mpi_attr_",
    "mpi_cart_coords",
    "mpi_cart_get",
    "mpi_cart_rank",
    "mpi_cart_shift",
    "mpi_cartdim_get",
    "mpi_comm_compare",
    "mpi_comm_get_",
    "mpi_comm_set_",
    "mpi_comm_test_inter",
    "mpi_dims_create",
    "mpi_errhandler_",
    "mpi_error_",
    "mpi_finalized",
    "mpi_get_",
    "mpi_group_compare",
    "mpi_group_free",
    "mpi_group_rank",
    "mpi_group_size",
    "mpi_group_translate_ranks",
    "mpi_info_",
    "mpi_initialized",
    "mpi_keyval_",
    "mpi_op_",
    "mpi_pack",
    "mpi_query_thread",
    "mpi_request_free",
    "mpi_status_",
    "mpi_type_",
    "mpi_unpack",
    "mpi_wtick",
    "mpi_wtime",
];

impl ImportedCalls {
    /// Imported MPI calls that no probe covers and that may wait or carry traffic
    /// (their time counts as work, their messages are not matched), in C spelling
    /// (`MPI_Neighbor_alltoall`).
    pub(crate) fn unprobed(&self) -> Vec<String> {
        let ImportedCalls::Names(names) = self else {
            return Vec::new();
        };
        let probed: BTreeSet<String> = tracer_analysis::calls::CALLS
            .iter()
            .filter(|c| c.family == Family::Mpi)
            .filter_map(|c| mpi_call_key(c.symbol))
            .collect();
        names
            .iter()
            .filter(|k| !probed.contains(*k))
            .filter(|k| !LOCAL_MPI_CALLS.iter().any(|l| k.starts_with(l)))
            // Handle conversions between the C and Fortran bindings (MPI_Comm_f2c):
            // local lookups, and what they return is the handle the C calls are given,
            // which the probes see (tests/programs/mpi_classes.c, phase f2c).
            .filter(|k| !k.ends_with("_f2c") && !k.ends_with("_c2f"))
            .map(|k| {
                let rest = &k["mpi_".len()..];
                let mut c = rest.chars();
                let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
                format!("MPI_{first}{}", c.as_str())
            })
            .collect()
    }
}

/// The one name of an MPI call under its C, profiling and Fortran symbols: `MPI_Send`,
/// `PMPI_Send`, `mpi_send_`, `mpi_send__`, `MPI_SEND`, `pmpi_send_f08` all give
/// `mpi_send`. None for a symbol that is not an MPI call's.
pub(crate) fn mpi_call_key(symbol: &str) -> Option<String> {
    let lower = symbol.to_ascii_lowercase();
    let name = lower
        .strip_prefix('p')
        .filter(|n| n.starts_with("mpi_"))
        .unwrap_or(&lower);
    let name = name.strip_suffix("_f08").unwrap_or(name);
    let name = name.trim_end_matches('_');
    (name.starts_with("mpi_") && name.len() > 4).then(|| name.to_string())
}

/// The MPI calls an ELF file imports (keys of [`mpi_call_key`]), or None when it defines
/// MPI calls itself or cannot be read.
fn mpi_imports(path: &Path) -> Option<BTreeSet<String>> {
    use object::{Object, ObjectSymbol};
    // The dynamic symbols only, not the whole file (a program with its debug
    // information can be large).
    let data = object::ReadCache::new(open_elf(path).ok()?.file);
    let file = object::File::parse(&data).ok()?;
    let mut imports = BTreeSet::new();
    for s in file.dynamic_symbols() {
        let Some(key) = s.name().ok().and_then(mpi_call_key) else {
            continue;
        };
        if !s.is_undefined() {
            return None;
        }
        imports.insert(key);
    }
    Some(imports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::entry::emulated;

    #[test]
    fn a_program_found_before_its_launch_is_known_at_its_exec() {
        // Through a link (/bin is one to /usr/bin), as a user names a program.
        let mut needed = NeededLibraries::of_programs(&[PathBuf::from("/bin/sleep")]);
        assert_eq!(needed.known.len(), 1);
        let found = needed.known.values().next().unwrap().clone();
        assert!(
            found
                .libraries
                .iter()
                .any(|l| l.to_string_lossy().contains("libc.so")),
            "{:?}",
            found.libraries
        );
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("5")
            .spawn()
            .unwrap();
        // /proc names the new program before the exec has set up its environment (read
        // empty until then; the probes' hold at exec comes after): wait for both.
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| env.is_empty())
            || std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| !exe.ends_with("sleep"))
        {
            assert!(std::time::Instant::now() < deadline, "the exec did not end");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let at_exec = needed.of(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            needed.known.len(),
            1,
            "the process's program was not the one found: {:?}",
            needed.known.keys().collect::<Vec<_>>()
        );
        assert_eq!(at_exec.libraries, found.libraries);
    }

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

    #[test]
    fn open_mpi_waitall_and_test_are_probed_past_their_first_load() {
        // Debian's Open MPI starts both with `mov ompi_mpi_param_check(%rip),%rax`, which
        // the kernel single-steps; MPI_Wait starts with a `push`, which it emulates.
        let ompi = installed_candidates()
            .iter()
            .filter_map(|p| Library::open(p).ok().flatten())
            .find(|l| l.flavor == Flavor::OpenMpi)
            .expect("Open MPI is installed");
        let file = std::fs::File::open(&ompi.path).unwrap();
        for name in ["MPI_Waitall", "MPI_Test", "MPI_Wait"] {
            let sym = ompi.symbols.get(name).unwrap();
            let at = ompi.probe_point(name, ArgumentsRead::ALL).unwrap();
            let mut code = [0u8; 16];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut code, at.file_offset).unwrap();
            assert!(emulated(&code), "{name} probed at {code:02x?}");
            assert_eq!(at.vaddr - sym.vaddr, at.file_offset - sym.file_offset);
            assert_eq!(at.vaddr > sym.vaddr, name != "MPI_Wait", "{name}");
        }
    }

    #[test]
    fn mpi_call_keys_join_c_profiling_and_fortran_names() {
        for sym in [
            "MPI_Alltoallv",
            "PMPI_Alltoallv",
            "mpi_alltoallv_",
            "mpi_alltoallv__",
        ] {
            assert_eq!(mpi_call_key(sym).as_deref(), Some("mpi_alltoallv"), "{sym}");
        }
        assert_eq!(
            mpi_call_key("MPI_ALLTOALLV").as_deref(),
            Some("mpi_alltoallv")
        );
        assert_eq!(mpi_call_key("pmpi_send_f08").as_deref(), Some("mpi_send"));
        assert_eq!(mpi_call_key("ompi_mpi_comm_world"), None);
        assert_eq!(mpi_call_key("printf"), None);
        assert_eq!(mpi_call_key("MPI_"), None);
        let imports = ImportedCalls::Names(
            [
                "mpi_send",
                "mpi_wtime",
                "mpi_neighbor_alltoall",
                "mpi_ineighbor_alltoall",
                "mpi_intercomm_create",
                "mpi_graph_create",
                "mpi_comm_f2c",
                "mpi_comm_c2f",
            ]
            .map(String::from)
            .into(),
        );
        assert_eq!(
            imports.unprobed(),
            ["MPI_Graph_create", "MPI_Ineighbor_alltoall"]
        );
        assert!(ImportedCalls::All.unprobed().is_empty());
    }

    /// The MPI libraries define the calls, so their imports never count; a C program's
    /// own imports do.
    #[test]
    fn a_program_imports_the_calls_it_makes() {
        let libs = installed_candidates();
        let mpich = libs
            .iter()
            .find(|p| p.to_string_lossy().contains("libmpich.so"))
            .expect("MPICH is installed");
        assert_eq!(mpi_imports(mpich), None);
        // This test binary imports no MPI call: nothing, not "every call".
        let me = std::env::current_exe().unwrap();
        assert_eq!(mpi_imports(&me), Some(BTreeSet::new()));
    }
}
