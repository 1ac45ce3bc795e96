//! Attaching the call probes of the libraries a session found (`target/libraries`,
//! `target/openmp.rs`): MPI/PVM calls, the C library's pthread calls, OpenMP's.

use std::path::Path;

use tracer_analysis::calls::{CallSpec, Flavor, CALLS};
use tracer_common::call_cookie;

use crate::probes::{ProbeError, ProbePoint, Probes};
use crate::target::entry::ArgumentsRead;
use crate::target::libraries::{ImportedCalls, Library, LibrarySet, ThreadLibrary};

/// Probes the libraries of `libs` that `wanted` accepts (canonical paths): every call
/// that is not on demand, and the on-demand calls in `imports`. A library probed before
/// gets the on-demand calls it lacks.
pub(super) fn probe_libraries(
    libs: &mut LibrarySet,
    probes: &mut Probes,
    wanted: impl Fn(&Path) -> bool,
    imports: &ImportedCalls,
) -> Result<(), ProbeError> {
    for (lib, probed) in libs.libs.iter().zip(libs.probed.iter_mut()) {
        if wanted(&lib.path) {
            let n = attach_library(probes, lib, |c| !c.on_demand || imports.includes(c))?;
            *probed = Some(probed.unwrap_or(0) + n);
        }
    }
    Ok(())
}

/// Attaches entry and exit probes to the calls of `lib`'s family that it defines and
/// `wanted` accepts. Returns the number of calls newly probed (a call probed before is
/// not probed again).
fn attach_library(
    probes: &mut Probes,
    lib: &Library,
    wanted: impl Fn(&CallSpec) -> bool,
) -> Result<usize, ProbeError> {
    probes.configure_flavor(lib.flavor, lib.pvm_rbuf_vaddr())?;
    let points: Vec<ProbePoint<'_>> = CALLS
        .iter()
        .filter(|c| c.family == lib.flavor.family() && wanted(c))
        .filter_map(|c| {
            let sym = lib.probe_point(c.symbol, ArgumentsRead::of(&c.layout))?;
            Some(ProbePoint {
                symbol: c.symbol,
                file_offset: sym.file_offset,
                cookie: call_cookie(c.id, lib.flavor.id(), sym.vaddr as u32),
            })
        })
        .collect();
    probes.attach_calls(&lib.path, &points, None)
}

/// Attaches entry and exit probes to the calls of `lib` (pthread or OpenMP calls): with
/// a `pid`, ones that fire in that process only, else in every process (see
/// [`Probes::attach_call`]). Returns the number of calls newly probed.
pub(super) fn attach_thread_calls(
    probes: &mut Probes,
    lib: &ThreadLibrary,
    pid: Option<u32>,
) -> Result<usize, ProbeError> {
    probes.configure_flavor(Flavor::Glibc, 0)?;
    let points: Vec<ProbePoint<'_>> = lib
        .calls
        .iter()
        .map(|(id, sym)| ProbePoint {
            symbol: &sym.name,
            file_offset: sym.file_offset,
            cookie: call_cookie(*id, Flavor::Glibc.id(), sym.vaddr as u32),
        })
        .collect();
    probes.attach_calls(&lib.path, &points, pid)
}
