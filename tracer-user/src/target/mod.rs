//! What to trace and where to probe it: processes (/proc), ELF symbol tables, the MPI,
//! PVM, C and OpenMP libraries a program uses, and the procedures `--func` selects.

pub mod candidates;
pub mod elf_file;
pub mod entry;
pub mod funcs;
pub mod ldd;
pub mod libraries;
pub mod openmp;
pub mod procfs;
pub mod symbols;
