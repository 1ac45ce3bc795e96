//! Finding the MPI and PVM libraries to probe, and telling which family each one is; and
//! the C library whose pthread calls `--locks` probes.

mod c_library;
mod mpi;

pub(crate) use c_library::{dlopen_in, DlopenSite, ThreadCallSet, ThreadLibraries, ThreadLibrary};
pub(crate) use mpi::{
    installed_candidates, mapped_candidates, ompi_self_handle, ompi_world_handle, ImportedCalls,
    Library, LibrarySet, NeededLibraries, ProbedLibrary,
};
