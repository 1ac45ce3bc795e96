//! Finding the MPI and PVM libraries to probe, and telling which family each one is; and
//! the C library whose pthread calls `--locks` probes.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolError, SymbolTable};
use tracer_analysis::format::calls::{
    CallSpec, Family, Flavor, CALLS, OMPI_COMM_SELF_SYMBOL, OMPI_COMM_WORLD_SYMBOL, PVM_RBUF_SYMBOL,
};
use tracer_analysis::format::recording::LibraryInfo;

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
            comm_self_vaddr: match self.flavor {
                Flavor::OpenMpi => self.symbols.get(OMPI_COMM_SELF_SYMBOL).map(|s| s.vaddr),
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
    ompi_predefined_handle(lib.comm_world_vaddr?, OMPI_COMM_WORLD_SYMBOL, lib, info)
}

/// Open MPI: the MPI_COMM_SELF handle of a process (as [`ompi_world_handle`]).
pub fn ompi_self_handle(lib: &LibraryInfo, info: &procfs::ProcessInfo) -> Option<u64> {
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

    /// Probes the libraries `wanted` accepts (canonical paths): every call that is not
    /// on demand, and the on-demand calls in `imports`. A library probed before gets the
    /// on-demand calls it lacks.
    pub fn probe(
        &mut self,
        probes: &mut crate::probes::Probes,
        wanted: impl Fn(&Path) -> bool,
        imports: &ImportedCalls,
    ) -> Result<(), crate::probes::ProbeError> {
        for (lib, probed) in self.libs.iter().zip(self.probed.iter_mut()) {
            if wanted(&lib.path) {
                let n = probes.attach_library(lib, |c| !c.on_demand || imports.includes(c))?;
                *probed = Some(probed.unwrap_or(0) + n);
            }
        }
        Ok(())
    }

    pub fn infos(&self) -> Vec<LibraryInfo> {
        self.libs.iter().map(|l| l.info()).collect()
    }

    /// (path, flavor, calls probed) of the probed libraries.
    /// Whether one of `files` (canonical paths) is an MPI/PVM library of the set.
    pub fn any_of(&self, files: &BTreeSet<PathBuf>) -> bool {
        self.libs.iter().any(|l| files.contains(&l.path))
    }

    pub fn probed(&self) -> Vec<(PathBuf, Flavor, usize)> {
        self.libs
            .iter()
            .zip(&self.probed)
            .filter_map(|(l, n)| Some((l.path.clone(), l.flavor, (*n)?)))
            .collect()
    }
}

/// Which on-demand MPI calls ([`tracer_analysis::format::calls::CallSpec::on_demand`]) a program needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportedCalls {
    /// Unknown programs (running targets, system-wide mode) or a program that imports no
    /// MPI call at all (it may load MPI with dlopen): every call.
    All,
    /// The normalized names ([`mpi_call_key`]) the program and its libraries import.
    Names(BTreeSet<String>),
}

impl ImportedCalls {
    pub fn includes(&self, c: &tracer_analysis::format::calls::CallSpec) -> bool {
        match self {
            ImportedCalls::All => true,
            ImportedCalls::Names(names) => {
                mpi_call_key(c.symbol).is_some_and(|k| names.contains(&k))
            }
        }
    }

    /// The MPI calls imported by the program of process `pid` and by `needed`, its
    /// shared libraries, leaving out the objects that define MPI calls themselves (the
    /// MPI library, its Fortran bindings, profiling wrappers): they import nearly every
    /// call whether the program uses it or not.
    pub fn of_process(pid: u32, needed: &BTreeSet<PathBuf>) -> ImportedCalls {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return ImportedCalls::All;
        };
        let mut names = BTreeSet::new();
        for path in std::iter::once(&exe).chain(needed) {
            if let Some(imports) = mpi_imports(path) {
                names.extend(imports);
            }
        }
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
    pub fn unprobed(&self) -> Vec<String> {
        let ImportedCalls::Names(names) = self else {
            return Vec::new();
        };
        let probed: BTreeSet<String> = tracer_analysis::format::calls::CALLS
            .iter()
            .filter(|c| c.family == Family::Mpi)
            .filter_map(|c| mpi_call_key(c.symbol))
            .collect();
        names
            .iter()
            .filter(|k| !probed.contains(*k))
            .filter(|k| !LOCAL_MPI_CALLS.iter().any(|l| k.starts_with(l)))
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
pub fn mpi_call_key(symbol: &str) -> Option<String> {
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
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
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

/// File name prefixes of the libraries that may define the pthread calls: libpthread
/// before glibc 2.34, libc itself since (libpthread.so.0 is then an empty stub).
const THREAD_LIBRARY_PREFIXES: &[&str] = &["libpthread.so", "libc.so"];

/// Which of the C library's pthread calls (`Family::Threads`) a set of probes covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadCallSet {
    /// Thread creation and joins: probed in every traced program.
    Lifecycle,
    /// Locks, condition variables and barriers: `--locks`.
    Locks,
}

impl ThreadCallSet {
    fn calls(self) -> impl Iterator<Item = &'static CallSpec> {
        CALLS.iter().filter(move |c| {
            c.family == Family::Threads && c.is_thread_lifecycle() == (self == Self::Lifecycle)
        })
    }
}

/// The C library's pthread calls of one [`ThreadCallSet`] in one file.
pub struct ThreadLibrary {
    pub path: PathBuf,
    /// (call id, where to probe) of each call the file defines: the symbol of the default
    /// version (glibc keeps old versions of some calls: `pthread_cond_wait@GLIBC_2.2.5`
    /// is the LinuxThreads-compatible one, `@@GLIBC_2.3.2` the one programs link against),
    /// moved past a first instruction uprobes cannot step over (see [`probe_point`]).
    pub calls: Vec<(u16, Symbol)>,
}

impl ThreadLibrary {
    /// Reads `path`; None if it defines no pthread call of `set`.
    pub fn open(path: &Path, set: ThreadCallSet) -> Result<Option<ThreadLibrary>, SymbolError> {
        let table = SymbolTable::read(path)?;
        let data = std::fs::read(path).map_err(|source| SymbolError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let defaults = default_version_addresses(path, &data)?;
        let mut calls = Vec::new();
        for c in set.calls() {
            // Without version information every definition is a default one; take the
            // first then, as the dynamic linker would.
            let sym = match defaults.get(c.symbol) {
                Some(&vaddr) => table
                    .symbols
                    .iter()
                    .find(|s| s.name == c.symbol && s.vaddr == vaddr),
                None => table.get(c.symbol),
            };
            let Some(sym) = sym.filter(|s| s.is_function) else {
                continue;
            };
            match probe_point(sym, &data) {
                Some(at) => calls.push((c.id, at)),
                None => log::warn!(
                    "cannot probe {} in {}: its first instruction is one uprobes refuse",
                    c.symbol,
                    path.display()
                ),
            }
        }
        if calls.is_empty() {
            return Ok(None);
        }
        Ok(Some(ThreadLibrary {
            path: path.to_path_buf(),
            calls,
        }))
    }
}

/// Where to put the entry probe of a function. The kernel refuses to place a uprobe on a
/// `lock`-prefixed instruction (x86 `is_prefix_bad`), and where the file is not mapped yet
/// when the probe is attached (a process held at exec) it leaves the breakpoint out
/// without a word. glibc's `pthread_spin_lock` starts with `lock decl (%rdi)`: such a
/// function is probed on its second instruction, which it reaches with its arguments and
/// return address untouched. (A spin that loops back to the locked instruction passes the
/// probe again: the retries show as calls nested in the first.) None if the locked
/// instruction is not one [`locked_instruction_len`] knows.
fn probe_point(sym: &Symbol, data: &[u8]) -> Option<Symbol> {
    let code = data.get(sym.file_offset as usize..)?;
    if code.first() != Some(&0xf0) {
        return Some(sym.clone());
    }
    let len = locked_instruction_len(code)? as u64;
    Some(Symbol {
        vaddr: sym.vaddr + len,
        file_offset: sym.file_offset + len,
        ..sym.clone()
    })
}

/// Length of a `lock`-prefixed x86-64 instruction (the read-modify-write forms `lock` is
/// allowed on, with a memory operand): None if `code` does not start with one we know.
fn locked_instruction_len(code: &[u8]) -> Option<usize> {
    let byte = |i: usize| code.get(i).copied();
    if byte(0)? != 0xf0 {
        return None;
    }
    let mut i = 1;
    let mut operand16 = false;
    while byte(i)? == 0x66 {
        operand16 = true;
        i += 1;
    }
    if byte(i)? & 0xf0 == 0x40 {
        i += 1; // REX
    }
    let imm = match byte(i)? {
        0x0f => {
            i += 1;
            match byte(i)? {
                // cmpxchg, xadd, bts/btr/btc, cmpxchg8b/16b
                0xb0 | 0xb1 | 0xc0 | 0xc1 | 0xab | 0xb3 | 0xbb | 0xc7 => 0,
                0xba => 1, // bt* r/m, imm8
                _ => return None,
            }
        }
        // add, or, adc, sbb, and, sub, xor r/m, reg; xchg; inc/dec; not/neg
        0x00 | 0x01 | 0x08 | 0x09 | 0x10 | 0x11 | 0x18 | 0x19 | 0x20 | 0x21 | 0x28 | 0x29
        | 0x30 | 0x31 | 0x86 | 0x87 | 0xfe | 0xff | 0xf6 | 0xf7 => 0,
        0x80 | 0x83 => 1,
        0x81 if operand16 => 2,
        0x81 => 4,
        _ => return None,
    };
    i += 1;
    let modrm = byte(i)?;
    i += 1;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return None; // `lock` needs a memory operand
    }
    if rm == 4 {
        let sib = byte(i)?;
        i += 1;
        if md == 0 && sib & 7 == 5 {
            i += 4;
        }
    } else if md == 0 && rm == 5 {
        i += 4; // rip-relative
    }
    i += match md {
        1 => 1,
        2 => 4,
        _ => 0,
    };
    Some(i + imm)
}

/// Address of the default version (`name@@VERSION`, what the static linker binds new
/// programs to) of every versioned dynamic symbol of an ELF file.
fn default_version_addresses(
    path: &Path,
    data: &[u8],
) -> Result<HashMap<String, u64>, SymbolError> {
    use object::read::elf::ElfFile64;
    use object::{Object, ObjectSymbol};
    let parse_error = |source| SymbolError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let file = ElfFile64::<object::Endianness>::parse(data).map_err(parse_error)?;
    let endian = file.endian();
    let Some(versions) = file
        .elf_section_table()
        .versions(endian, data)
        .map_err(parse_error)?
    else {
        return Ok(HashMap::new());
    };
    let mut out = HashMap::new();
    for sym in file.dynamic_symbols() {
        if sym.is_undefined() || sym.address() == 0 {
            continue;
        }
        let version = versions.version_index(endian, sym.index());
        if version.is_hidden() || version.is_local() {
            continue;
        }
        if let Ok(name) = sym.name() {
            out.insert(name.to_string(), sym.address());
        }
    }
    Ok(out)
}

/// Where dlopen is among a program's files (canonical paths): the C library (glibc 2.34+)
/// or libdl (before). None for a program without one (a static executable).
pub fn dlopen_in(files: &BTreeSet<PathBuf>) -> Option<(PathBuf, Symbol)> {
    files
        .iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libc.so") || name.starts_with("libdl.so")
        })
        .find_map(|p| {
            let table = SymbolTable::read(p).ok()?;
            let sym = table.get("dlopen").filter(|s| s.is_function)?.clone();
            Some((p.clone(), sym))
        })
}

fn is_thread_library_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    THREAD_LIBRARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Which processes the pthread calls of a [`ThreadCallSet`] are probed in, and in which
/// file. Files are read once and kept.
pub struct ThreadLibraries {
    set: ThreadCallSet,
    /// By canonical path; None: the file defines no pthread call.
    read: HashMap<PathBuf, Option<ThreadLibrary>>,
    /// By canonical path: whether the file calls a probed pthread function through its
    /// dynamic symbols (false for files that are not ELF).
    imports: HashMap<PathBuf, bool>,
}

impl ThreadLibraries {
    pub fn new(set: ThreadCallSet) -> Self {
        ThreadLibraries {
            set,
            read: HashMap::new(),
            imports: HashMap::new(),
        }
    }

    /// The library whose pthread calls to probe in a program made of `files` (canonical
    /// paths: the executable and the shared libraries it loads or has mapped): libpthread
    /// if it defines them (glibc before 2.34), else libc. None when no file imports one
    /// of the probed calls (a shell, `sleep`: no probes, nothing to detach at the end)
    /// or there is no C library among them (a static executable).
    pub fn for_program(&mut self, files: &BTreeSet<PathBuf>) -> Option<&ThreadLibrary> {
        let uses_threads = files.iter().any(|p| {
            *self
                .imports
                .entry(p.clone())
                .or_insert_with(|| imports_thread_calls(p, self.set))
        });
        if !uses_threads {
            return None;
        }
        let mut candidates: Vec<&PathBuf> =
            files.iter().filter(|p| is_thread_library_name(p)).collect();
        // libpthread first: when it defines the calls, libc's are forwarders or absent.
        candidates.sort_by_key(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libpthread"))
        });
        let path = candidates.into_iter().find(|p| {
            self.read
                .entry(p.to_path_buf())
                .or_insert_with(|| ThreadLibrary::open(p, self.set).ok().flatten())
                .is_some()
        })?;
        self.read.get(path)?.as_ref()
    }

    /// [`Self::for_program`] of a running process, from the files it has mapped.
    pub fn of_process(&mut self, pid: u32) -> Option<&ThreadLibrary> {
        let mapped: BTreeSet<PathBuf> = procfs::mappings(pid)
            .into_iter()
            .filter_map(|m| PathBuf::from(m.path).canonicalize().ok())
            .collect();
        self.for_program(&mapped)
    }
}

/// Whether an ELF file has an undefined dynamic symbol naming a probed pthread call. Calls
/// the C library makes to itself (and the dynamic linker's locks, which go through a
/// pointer to pthread_mutex_lock) are probed too, but only in processes where this holds.
fn imports_thread_calls(path: &Path, set: ThreadCallSet) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    let names: Vec<&str> = set.calls().map(|c| c.symbol).collect();
    let found = file
        .dynamic_symbols()
        .any(|s| s.is_undefined() && s.name().is_ok_and(|n| names.contains(&n)));
    found
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

    #[test]
    fn lengths_of_locked_instructions() {
        for (code, len) in [
            (&[0xf0, 0xff, 0x0f, 0x75][..], 3),             // lock decl (%rdi)
            (&[0xf0, 0x0f, 0xb1, 0x0f][..], 4),             // lock cmpxchg %ecx,(%rdi)
            (&[0xf0, 0x48, 0x0f, 0xb1, 0x57, 0x08][..], 6), // lock cmpxchg %rdx,8(%rdi)
            (&[0xf0, 0x83, 0x07, 0x01][..], 4),             // lock addl $1,(%rdi)
            (&[0xf0, 0x0f, 0xc1, 0x44, 0x24, 0x10][..], 6), // lock xadd %eax,0x10(%rsp)
            (&[0xf0, 0x81, 0x05, 1, 0, 0, 0, 2, 0, 0, 0][..], 11), // lock addl $2,x(%rip)
        ] {
            assert_eq!(locked_instruction_len(code), Some(len), "{code:02x?}");
        }
        assert_eq!(locked_instruction_len(&[0x41, 0x57]), None);
        assert_eq!(locked_instruction_len(&[0xf0, 0xff, 0xc0]), None); // register operand
    }

    #[test]
    fn only_programs_that_call_pthreads_are_probed() {
        let mut libs = ThreadLibraries::new(ThreadCallSet::Locks);
        let files = |names: &[&str]| -> BTreeSet<PathBuf> {
            names
                .iter()
                .map(|p| Path::new(p).canonicalize().expect(p))
                .collect()
        };
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        // `sleep` calls no pthread function; libstdc++ takes pthread mutexes.
        assert!(libs.for_program(&files(&["/bin/sleep", libc])).is_none());
        let lib = libs
            .for_program(&files(&[
                "/bin/sleep",
                "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                libc,
            ]))
            .expect("probed");
        assert_eq!(lib.path, Path::new(libc).canonicalize().unwrap());
        // No C library among the files (a static program): nothing to probe.
        let static_like = files(&["/usr/lib/x86_64-linux-gnu/libstdc++.so.6"]);
        assert!(libs.for_program(&static_like).is_none());
    }

    #[test]
    fn pthread_calls_at_their_default_versions() {
        // The C library this test runs with.
        let libc = procfs::mappings(std::process::id())
            .into_iter()
            .filter_map(|m| Path::new(&m.path).canonicalize().ok())
            .find(|p| p.file_name().is_some_and(|n| n == "libc.so.6"))
            .expect("libc mapped");
        let lib = ThreadLibrary::open(&libc, ThreadCallSet::Locks)
            .unwrap()
            .expect("pthread calls");
        let table = SymbolTable::read(&lib.path).unwrap();
        // Every probed call is found (glibc 2.34+ defines all of them in libc.so.6), each
        // in its own set.
        let lifecycle = ThreadLibrary::open(&libc, ThreadCallSet::Lifecycle)
            .unwrap()
            .expect("pthread_create and the joins");
        for c in CALLS.iter().filter(|c| c.family == Family::Threads) {
            let (found, other) = if c.is_thread_lifecycle() {
                (&lifecycle, &lib)
            } else {
                (&lib, &lifecycle)
            };
            assert!(
                found.calls.iter().any(|(id, _)| *id == c.id),
                "{} missing in {}",
                c.symbol,
                lib.path.display()
            );
            assert!(
                !other.calls.iter().any(|(id, _)| *id == c.id),
                "{}",
                c.symbol
            );
        }
        // pthread_cond_wait has two versions at different addresses; the default one is
        // the one this very test binary was linked against.
        let (_, wait) = lib
            .calls
            .iter()
            .find(|(id, _)| *id == tracer_common::call::PTHREAD_COND_WAIT)
            .unwrap();
        let versions: Vec<u64> = table
            .symbols
            .iter()
            .filter(|s| s.name == "pthread_cond_wait")
            .map(|s| s.vaddr)
            .collect();
        assert!(versions.contains(&wait.vaddr));
        let bias = procfs::mappings(std::process::id())
            .into_iter()
            .find(|m| Path::new(&m.path).canonicalize().ok().as_deref() == Some(&*lib.path))
            .map(|m| m.bias)
            .expect("libc mapped");
        let linked = libc::pthread_cond_wait as *const () as u64;
        assert_eq!(
            bias.wrapping_sub(table.base_vaddr).wrapping_add(wait.vaddr),
            linked,
            "the probe would sit on the compatibility version"
        );
        // glibc's pthread_spin_lock starts with `lock decl (%rdi)` (3 bytes).
        let (_, spin) = lib
            .calls
            .iter()
            .find(|(id, _)| *id == tracer_common::call::PTHREAD_SPIN_LOCK)
            .unwrap();
        let sym = table.get("pthread_spin_lock").unwrap();
        assert_eq!(spin.file_offset - sym.file_offset, spin.vaddr - sym.vaddr);
        assert!(spin.file_offset - sym.file_offset <= 3);
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
                "mpi_comm_split_type",
            ]
            .map(String::from)
            .into(),
        );
        assert_eq!(
            imports.unprobed(),
            ["MPI_Comm_split_type", "MPI_Neighbor_alltoall"]
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
