//! What to trace and where to probe it: processes (/proc), ELF symbol tables, the MPI,
//! PVM, C and OpenMP libraries a program uses, and the procedures `--func` selects.

pub mod candidates;
pub(crate) mod elf_file;
pub(crate) mod entry;
pub(crate) mod funcs;
pub(crate) mod ldd;
pub(crate) mod libraries;
pub(crate) mod openmp;
pub(crate) mod parallel;
pub(crate) mod procfs;
pub(crate) mod symbols;
