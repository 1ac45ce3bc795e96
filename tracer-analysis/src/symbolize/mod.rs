//! Code addresses to function, source file and line: the types, the ELF layout, and the
//! [`CodeLocator`] trait the analyses ask. The resolver itself (blazesym) lives in the
//! `tracer` binary's crate, which keeps libc out of this one.
//!
//! A recording keeps, per process, the files it mapped and where each file's offset 0
//! was mapped ([`Mapping`](crate::format::Mapping)); the process itself is gone when the
//! recording is read. So an address is first turned into an address *in a file* (the
//! file's own virtual address, as `readelf` shows it) with the ELF program headers, and
//! only then symbolized, by file path.

mod layout;
mod locator;
mod types;

pub use layout::{base_vaddr, ElfLayout};
pub(crate) use locator::stack_function_names;
pub use locator::{CodeLocator, NO_STACK_FRAME, UNKNOWN_FRAME};
pub use types::CodeLocation;
