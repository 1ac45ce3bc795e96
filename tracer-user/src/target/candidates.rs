//! Candidate procedures for `--func` (`tracer functions`): the defined functions of a
//! program (and, on request, of its own shared objects), with size and source location,
//! optionally ranked by a profile so the user sees where the CPU time went.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use serde::{Deserialize, Serialize};

use crate::symbolize::Symbolizer;
use crate::target::elf_file::read_elf;
use crate::target::{ldd, procfs};
use tracer_analysis::CodeLocation;

#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    #[error("no process with PID {0}")]
    NoProcess(u32),
    #[error("cannot read the executable of PID {pid}: {error}")]
    Exe { pid: u32, error: std::io::Error },
    #[error("no such file {0}")]
    NoSuchFile(PathBuf),
    #[error("cannot read {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path} is not an ELF file we can read: {error}")]
    NotElf { path: PathBuf, error: object::Error },
    #[error("{0} has no function symbols (stripped?)")]
    NoSymbols(PathBuf),
    #[error("cannot read profile {path}: {error}")]
    ProfileRead {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot read profile {path}: not a profile JSON ({error})")]
    ProfileJson {
        path: PathBuf,
        error: serde_json::Error,
    },
}

/// What to list the functions of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    Binary(PathBuf),
}

impl Target {
    /// A number is a PID, anything else a path.
    pub fn parse(s: &str) -> Target {
        match s.parse() {
            Ok(pid) => Target::Pid(pid),
            Err(_) => Target::Binary(PathBuf::from(s)),
        }
    }
}

/// One function a user could select with `--func`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Candidate {
    /// The symbol name, as `--func` matches it.
    pub name: String,
    /// The executable or shared object that defines it.
    pub object: String,
    /// Address in the object (st_value).
    pub vaddr: u64,
    /// Bytes of code (st_size).
    pub size: u64,
    /// Source file and line of its first instruction, when the object has debug info.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// From the profile (`--profile`), when it has a procedure of this name.
    pub cpu_ns: Option<u64>,
    pub cp_ns: Option<u64>,
    pub cp_pct: Option<f64>,
}

/// File names (prefixes) of the runtime's own libraries, never candidates: the C and math
/// libraries, the dynamic linker, the compilers' runtimes, MPI and PVM.
const SYSTEM_LIBRARIES: &[&str] = &[
    "ld-linux",
    "ld64.so",
    "libc.so",
    "libm.so",
    "libpthread",
    "libdl.so",
    "librt.so",
    "libgcc_s",
    "libstdc++",
    "libgfortran",
    "libquadmath",
    "libgomp",
    // LLVM's OpenMP runtime and its companions (libompd, libomptarget); Intel's name.
    "libomp",
    "libiomp5",
    "libmpi",
    "libmpich",
    "libopen-pal",
    "libopen-rte",
    "libpmix",
    "libpvm3",
];

/// Directories of the distribution's libraries.
const SYSTEM_DIRS: &[&str] = &["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"];

/// Whether a shared object belongs to the system or the parallel runtime rather than to
/// the program (such files are skipped by `--all`).
pub fn is_system_library(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = path.display().to_string();
    SYSTEM_LIBRARIES.iter().any(|p| name.starts_with(p))
        || SYSTEM_DIRS.iter().any(|d| text.starts_with(d))
}

/// Start-up and teardown code the C toolchain adds to every program: not the program's.
const TOOLCHAIN_FUNCTIONS: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "__libc_csu_init",
    "__libc_csu_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
];

/// The files to list: the executable, and with `all` the program's own shared objects
/// (mapped by the process, or for a binary as `ldd` resolves them).
pub fn target_files(target: &Target, all: bool) -> Result<Vec<PathBuf>, CandidateError> {
    let (exe, libs) = match target {
        Target::Pid(pid) => {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return Err(CandidateError::NoProcess(*pid));
            }
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .map_err(|error| CandidateError::Exe { pid: *pid, error })?;
            let libs = if all {
                procfs::mappings(*pid)
                    .into_iter()
                    .map(|m| PathBuf::from(m.path))
                    .collect()
            } else {
                Vec::new()
            };
            (exe, libs)
        }
        Target::Binary(path) => {
            if !path.exists() {
                return Err(CandidateError::NoSuchFile(path.clone()));
            }
            let libs = if all {
                ldd::resolved_libraries(path, None, ldd::LDD_DEADLINE)
            } else {
                Vec::new()
            };
            (path.clone(), libs)
        }
    };
    let mut files = vec![exe.clone()];
    let exe_canon = exe.canonicalize().unwrap_or(exe);
    for lib in libs {
        let canon = lib.canonicalize().unwrap_or_else(|_| lib.clone());
        if canon != exe_canon && !is_system_library(&lib) && !files.contains(&lib) {
            files.push(lib);
        }
    }
    Ok(files)
}

/// The defined functions with code (STT_FUNC, size > 0, in an executable section) of one
/// ELF file, one per address, with source locations where the file has debug info.
pub fn functions_of(
    path: &Path,
    symbolizer: &mut Symbolizer,
) -> Result<Vec<Candidate>, CandidateError> {
    let data = read_elf(path).map_err(|error| CandidateError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let file = object::File::parse(&*data).map_err(|error| CandidateError::NotElf {
        path: path.to_path_buf(),
        error,
    })?;
    // The full symbol table when there is one, else the dynamic one (stripped files).
    let mut by_addr: HashMap<u64, Candidate> = HashMap::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.size() == 0 {
            continue;
        }
        let in_text = sym
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .is_some_and(|s| s.kind() == SectionKind::Text);
        let Ok(name) = sym.name() else { continue };
        if !in_text || name.is_empty() || TOOLCHAIN_FUNCTIONS.contains(&name) {
            continue;
        }
        let c = by_addr.entry(sym.address()).or_insert_with(|| Candidate {
            name: name.to_string(),
            object: path.display().to_string(),
            vaddr: sym.address(),
            size: sym.size(),
            file: None,
            line: None,
            cpu_ns: None,
            cp_ns: None,
            cp_pct: None,
        });
        // Aliases: prefer the public spelling (`MPI_Send` over `PMPI_Send`/`__foo`).
        if c.name.starts_with('_') && !name.starts_with('_') {
            c.name = name.to_string();
        }
    }
    if by_addr.is_empty() {
        return Err(CandidateError::NoSymbols(path.to_path_buf()));
    }
    let mut out: Vec<Candidate> = by_addr.into_values().collect();
    for c in &mut out {
        // A file without debug info still lists its functions, without a location.
        if let Ok(Some(CodeLocation { file, line, .. })) = symbolizer.locate_in_file(path, c.vaddr)
        {
            c.file = file;
            c.line = line;
        }
    }
    sort_by_size(&mut out);
    Ok(out)
}

fn sort_by_size(c: &mut [Candidate]) {
    c.sort_by(|a, b| {
        b.size
            .cmp(&a.size)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.object.cmp(&b.object))
    });
}

/// The part of a profile (`tracer record --profile-json`, `tracer analyze --json`;
/// docs/profile-json.md) that ranks candidates.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ProfileRanks {
    pub procedures: Vec<ProfileProcedure>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ProfileProcedure {
    pub name: String,
    /// The symbol, as the candidates are named (profiles before demangling named
    /// procedures by their symbol and have none).
    #[serde(default)]
    pub symbol: Option<String>,
    #[serde(default)]
    pub cpu_ns: u64,
    #[serde(default)]
    pub cp_ns: u64,
    #[serde(default)]
    pub cp_pct: f64,
}

impl ProfileRanks {
    pub fn read(path: &Path) -> Result<Self, CandidateError> {
        let text = std::fs::read_to_string(path).map_err(|error| CandidateError::ProfileRead {
            path: path.to_path_buf(),
            error,
        })?;
        serde_json::from_str(&text).map_err(|error| CandidateError::ProfileJson {
            path: path.to_path_buf(),
            error,
        })
    }
}

/// Attaches the profile's numbers to the candidates of the same symbol and sorts by CPU
/// time (those the profile does not know last, by size). Returns how many matched.
pub fn rank_by_profile(candidates: &mut [Candidate], profile: &ProfileRanks) -> usize {
    let by_symbol: HashMap<&str, &ProfileProcedure> = profile
        .procedures
        .iter()
        .map(|p| (p.symbol.as_deref().unwrap_or(&p.name), p))
        .collect();
    let mut matched = HashSet::new();
    for c in candidates.iter_mut() {
        if let Some(p) = by_symbol.get(c.name.as_str()) {
            c.cpu_ns = Some(p.cpu_ns);
            c.cp_ns = Some(p.cp_ns);
            c.cp_pct = Some(p.cp_pct);
            matched.insert(p.name.clone());
        }
    }
    sort_by_size(candidates);
    candidates.sort_by_key(|c| std::cmp::Reverse(c.cpu_ns.map(|n| n as u128 + 1).unwrap_or(0)));
    matched.len()
}

/// Every candidate of a target: its files' functions, by size (largest first).
pub fn list(target: &Target, all: bool) -> Result<Vec<Candidate>, CandidateError> {
    let mut symbolizer = Symbolizer::new();
    let files = target_files(target, all)?;
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        match functions_of(f, &mut symbolizer) {
            Ok(c) => out.extend(c),
            // The executable must have symbols; a shared object without any is skipped.
            Err(e) if i == 0 => return Err(e),
            Err(_) => {}
        }
    }
    sort_by_size(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(name: &str, size: u64) -> Candidate {
        Candidate {
            name: name.into(),
            object: "/x".into(),
            vaddr: size,
            size,
            file: None,
            line: None,
            cpu_ns: None,
            cp_ns: None,
            cp_pct: None,
        }
    }

    #[test]
    fn targets_and_system_libraries() {
        assert_eq!(Target::parse("123"), Target::Pid(123));
        assert_eq!(Target::parse("./a.out"), Target::Binary("./a.out".into()));
        assert!(is_system_library(Path::new(
            "/usr/lib/x86_64-linux-gnu/libfoo.so"
        )));
        assert!(is_system_library(Path::new(
            "/opt/openmpi/lib/libmpi.so.40"
        )));
        assert!(!is_system_library(Path::new("/home/u/build/libsolver.so")));
        assert!(matches!(
            target_files(&Target::Pid(999_999_999), false),
            Err(CandidateError::NoProcess(999_999_999))
        ));
        assert!(matches!(
            target_files(&Target::Binary("/no/such/file".into()), false),
            Err(CandidateError::NoSuchFile(_))
        ));
    }

    /// A function the test binary keeps whatever the compiler inlines.
    #[inline(never)]
    fn listed_function(x: u64) -> u64 {
        x * 3 + 1
    }

    #[test]
    fn lists_functions_of_this_test_binary() {
        std::hint::black_box(listed_function(std::hint::black_box(1)));
        let exe = std::env::current_exe().unwrap();
        let all = list(&Target::Binary(exe.clone()), false).unwrap();
        assert!(all.windows(2).all(|w| w[0].size >= w[1].size));
        let me = all
            .iter()
            .find(|c| c.name.contains("listed_function"))
            .expect("a function of this test");
        assert!(
            me.file.as_deref().unwrap().ends_with("candidates.rs"),
            "{me:?}"
        );
        // By PID too.
        let pid = list(&Target::Pid(std::process::id()), false).unwrap();
        assert_eq!(pid.len(), all.len());
    }

    #[test]
    fn non_elf_and_profile_errors() {
        let err = list(&Target::Binary("/proc/self/status".into()), false).unwrap_err();
        assert!(err.to_string().contains("not an ELF"), "{err}");
        let err = ProfileRanks::read(Path::new("/proc/self/status")).unwrap_err();
        assert!(err.to_string().contains("not a profile JSON"), "{err}");
    }

    #[test]
    fn profile_ranks_by_cpu_time() {
        let mut c = vec![cand("big", 300), cand("hot", 10), cand("warm", 20)];
        let profile: ProfileRanks = serde_json::from_str(
            r#"{"schema_version":1,"procedures":[
                {"name":"warm","cp_ns":5,"cp_pct":5.0,"cpu_ns":50},
                {"name":"hot","cp_ns":90,"cp_pct":90.0,"cpu_ns":900},
                {"name":"gone","cp_ns":1,"cp_pct":1.0,"cpu_ns":1}]}"#,
        )
        .unwrap();
        assert_eq!(rank_by_profile(&mut c, &profile), 2);
        let names: Vec<_> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["hot", "warm", "big"]);
        assert_eq!(c[0].cp_pct, Some(90.0));
        assert_eq!(c[2].cpu_ns, None);
    }

    #[test]
    fn a_profile_ranks_mangled_candidates_by_their_symbol() {
        // The profile names C++ procedures demangled; candidates are symbols.
        let mut c = vec![cand("_Z4bigv", 300), cand("_Z3hoti", 10)];
        let profile: ProfileRanks = serde_json::from_str(
            r#"{"schema_version":1,"procedures":[
                {"name":"hot(int)","symbol":"_Z3hoti","cp_ns":90,"cp_pct":90.0,"cpu_ns":900}]}"#,
        )
        .unwrap();
        assert_eq!(rank_by_profile(&mut c, &profile), 1);
        assert_eq!(c[0].name, "_Z3hoti");
        assert_eq!(c[0].cpu_ns, Some(900));
    }
}
