//! The session's second stage: the probes loaded, and attached to what the targets run
//! now; what attaches more as programs start goes on into the event loop.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::funcs::FunctionProbes;
use super::launch::find_in_path;
use super::libraries::probe_libraries;
use super::openmp::OpenMpProbes;
use super::targets::Targets;
use super::thread_calls::ThreadCallProbes;
use super::{RecordOptions, SessionError};
use crate::probes::{ProbeOptions, Probes};
use crate::target::funcs::{self, FunctionSelector};
use crate::target::ldd;
use crate::target::libraries::{self, ImportedCalls, Library, LibrarySet, NeededLibraries};
use tracer_analysis::recording::FunctionProbe;

pub(super) struct Probing {
    pub(super) probes: Probes,
    /// What the launched command's programs need, found before it runs.
    pub(super) needed: NeededLibraries,
    /// The MPI/PVM libraries, probed or not yet.
    pub(super) libs: LibrarySet,
    /// `--func` procedures.
    pub(super) funcs: FunctionProbes,
    pub(super) joins: ThreadCallProbes,
    /// `--locks`.
    pub(super) locks: Option<ThreadCallProbes>,
    pub(super) openmp: OpenMpProbes,
    /// The procedure probes attached so far, for the sink.
    pub(super) attached_functions: Vec<FunctionProbe>,
}

impl Probing {
    /// Loads the probes and attaches them to the libraries the user named, those the
    /// targets have mapped (system-wide, all), and to the running targets' thread calls,
    /// OpenMP and `--func` procedures. Every traced exec is held until the libraries and
    /// procedures it needs are probed (not system-wide).
    pub(super) fn attach(opts: &RecordOptions, targets: &Targets) -> Result<Probing, SessionError> {
        let system_wide = targets.system_wide;
        let running = &targets.running;
        let FoundLibraries {
            user: user_libs,
            all: found_libs,
        } = find_libraries(&opts.libs, running)?;
        let selector = FunctionSelector::new(&opts.funcs)?;
        // A pattern that matches nothing fails now, not after the whole run.
        if let Some(program) = &targets.program {
            let files = (opts.pids.is_empty() && !system_wide && !opts.funcs.is_empty())
                .then(|| program_files(program, &opts.command[1..]))
                .flatten();
            selector.check_before_launch(files.as_deref(), program)?;
        }
        let mut funcs = FunctionProbes::new(selector);
        // What the command's programs need is found while the verifier works on the
        // programs (0.2-0.3 s): their holds at exec then find it known (`ldd` and the
        // imports took 60-65 ms of both mpirun's and the first rank's hold).
        let executables = targets
            .program
            .as_deref()
            .filter(|_| !system_wide)
            .and_then(|program| command_executables(program, &opts.command[1..]))
            .unwrap_or_default();
        let (probes, needed) = std::thread::scope(|scope| {
            let needed = scope.spawn(|| NeededLibraries::of_programs(&executables));
            let probes = Probes::load(&ProbeOptions {
                system_wide,
                hold_on_exec: !system_wide,
                ring_bytes: opts.ring_mib.map(|mib| mib.max(1) << 20),
                floor: opts.floor_probes,
                uprobe_links: opts.uprobe_links,
                run_statistics: opts.bpf_stats,
                sample_hz: opts.sample_hz,
            });
            (probes, needed.join().unwrap_or_default())
        });
        let mut probes = probes?;
        let mut libs = LibrarySet::new(found_libs);
        let mapped = libraries::mapped_candidates(running);
        probe_libraries(
            &mut libs,
            &mut probes,
            |p| system_wide || user_libs.contains(p) || mapped.contains(p),
            &ImportedCalls::All,
        )?;
        let mut joins = ThreadCallProbes::joins();
        let mut locks = opts.locks.then(ThreadCallProbes::locks);
        let mut openmp = OpenMpProbes::default();
        for &pid in running {
            joins.attach_running(&mut probes, pid);
            openmp.attach_running(&mut probes, pid);
            if let Some(locks) = &mut locks {
                locks.attach_running(&mut probes, pid);
            }
        }
        let mut attached_functions = funcs.attach_fixed_paths(&mut probes)?;
        for &pid in running {
            attached_functions.extend(funcs.attach_in_process(&mut probes, pid)?);
        }
        if system_wide {
            attached_functions.extend(funcs.attach_in_files(&mut probes, &opts.func_files)?);
            attached_functions.extend(funcs.attach_everywhere(&mut probes)?);
        }
        Ok(Probing {
            probes,
            needed,
            libs,
            funcs,
            joins,
            locks,
            openmp,
            attached_functions,
        })
    }
}

/// The files whose functions a launched command runs: its program and the executables
/// among its arguments (`mpirun -np 4 ./app`, `timeout 60 app`) and their libraries as
/// `ldd` resolves them; None when that cannot be known before it runs (a shell, an
/// interpreter, a script).
fn program_files(program: &Path, args: &[String]) -> Option<Vec<PathBuf>> {
    let executables = command_executables(program, args)?;
    let mut files: Vec<PathBuf> = Vec::new();
    for exe in executables {
        let ld_library_path = std::env::var("LD_LIBRARY_PATH").ok();
        let libs = ldd::resolved_libraries(&exe, ld_library_path.as_deref(), ldd::LDD_DEADLINE);
        for f in std::iter::once(exe).chain(libs) {
            let f = f.canonicalize().unwrap_or(f);
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    Some(files)
}

/// A launched command's program and the executables among its arguments (`mpirun -np 4
/// ./app`, `timeout 60 app`); None when what it runs cannot be known before it runs (a
/// shell, an interpreter, a script).
pub(super) fn command_executables(program: &Path, args: &[String]) -> Option<Vec<PathBuf>> {
    if funcs::runs_code_elsewhere(program) {
        return None;
    }
    let mut executables = vec![program.to_path_buf()];
    for arg in args {
        let found = if Path::new(arg).is_file() {
            Some(PathBuf::from(arg))
        } else {
            find_in_path(arg).filter(|_| !arg.contains('/'))
        };
        if let Some(file) = found.filter(|f| funcs::is_elf(f)) {
            executables.push(file);
        }
    }
    Some(executables)
}

/// Candidate libraries: the user's (always probed), the installed ones, and those the
/// targets have mapped.
struct FoundLibraries {
    /// The user's (`--lib`), by canonical path.
    user: HashSet<PathBuf>,
    /// All of them, the user's included.
    all: Vec<Library>,
}

fn find_libraries(user: &[PathBuf], targets: &[u32]) -> Result<FoundLibraries, SessionError> {
    let mut libs: Vec<Library> = Vec::new();
    let mut user_set = HashSet::new();
    for path in user {
        let lib = Library::open(path).map_err(|error| SessionError::Library {
            path: path.clone(),
            error,
        })?;
        let Some(mut lib) = lib else {
            return Err(SessionError::NotALibrary { path: path.clone() });
        };
        lib.path = lib.path.canonicalize().unwrap_or(lib.path);
        user_set.insert(lib.path.clone());
        libs.push(lib);
    }
    let mut found = libraries::installed_candidates();
    found.extend(libraries::mapped_candidates(targets));
    for path in found {
        if user_set.contains(&path) {
            continue;
        }
        // An unreadable or unrelated file among the candidates is skipped, not fatal.
        if let Ok(Some(lib)) = Library::open(&path) {
            libs.push(lib);
        }
    }
    Ok(FoundLibraries {
        user: user_set,
        all: libs,
    })
}
