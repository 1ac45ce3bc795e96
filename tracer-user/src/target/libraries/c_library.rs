//! The C library: the pthread calls the session probes (thread creation and joins
//! always, locks with `--locks`), in the file that defines them, and where dlopen is.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::target::elf_file::read_elf;
use crate::target::entry::{probe_point, ArgumentsRead};
use crate::target::procfs;
use crate::target::symbols::{Symbol, SymbolError, SymbolTable};
use tracer_analysis::calls::{CallSpec, Family, CALLS};

/// File name prefixes of the libraries that may define the pthread calls: libpthread
/// before glibc 2.34, libc itself since (libpthread.so.0 is then an empty stub).
const THREAD_LIBRARY_PREFIXES: &[&str] = &["libpthread.so", "libc.so"];

/// Which of the C library's pthread calls (`Family::Threads`) a set of probes covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadCallSet {
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
pub(crate) struct ThreadLibrary {
    pub path: PathBuf,
    /// (call id, where to probe) of each call the file defines: the symbol of the default
    /// version (glibc keeps old versions of some calls: `pthread_cond_wait@GLIBC_2.2.5`
    /// is the LinuxThreads-compatible one, `@@GLIBC_2.3.2` the one programs link against),
    /// moved past a first instruction uprobes refuse or step over slowly (see
    /// [`probe_point`]).
    pub calls: Vec<(u16, Symbol)>,
}

impl ThreadLibrary {
    /// Reads `path`; None if it defines no pthread call of `set`.
    pub(crate) fn open(
        path: &Path,
        set: ThreadCallSet,
    ) -> Result<Option<ThreadLibrary>, SymbolError> {
        let table = SymbolTable::read(path)?;
        let data = read_elf(path).map_err(|source| SymbolError::reading(path, source))?;
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
            let code = data.get(sym.file_offset as usize..).unwrap_or_default();
            match probe_point(sym, code, ArgumentsRead::of(&c.layout)) {
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
pub(crate) fn dlopen_in(files: &BTreeSet<PathBuf>) -> Option<DlopenSite> {
    files
        .iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libc.so") || name.starts_with("libdl.so")
        })
        .find_map(|p| {
            let table = SymbolTable::read(p).ok()?;
            let sym = table.get("dlopen").filter(|s| s.is_function)?.clone();
            Some(DlopenSite {
                file: p.clone(),
                symbol: sym,
            })
        })
}

/// The file that defines a program's dlopen, and its symbol there.
pub(crate) struct DlopenSite {
    pub file: PathBuf,
    pub symbol: Symbol,
}

fn is_thread_library_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    THREAD_LIBRARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Which processes the pthread calls of a [`ThreadCallSet`] are probed in, and in which
/// file. Files are read once and kept.
pub(crate) struct ThreadLibraries {
    set: ThreadCallSet,
    /// By canonical path; None: the file defines no pthread call.
    read: HashMap<PathBuf, Option<ThreadLibrary>>,
    /// By canonical path: whether the file calls a probed pthread function through its
    /// dynamic symbols (false for files that are not ELF).
    imports: HashMap<PathBuf, bool>,
}

impl ThreadLibraries {
    pub(crate) fn new(set: ThreadCallSet) -> Self {
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
    pub(crate) fn for_program(&mut self, files: &BTreeSet<PathBuf>) -> Option<&ThreadLibrary> {
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
    pub(crate) fn of_process(&mut self, pid: u32) -> Option<&ThreadLibrary> {
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
    let Ok(data) = read_elf(path) else {
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
}
