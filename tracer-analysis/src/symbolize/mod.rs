//! Code addresses to function, source file and line (with blazesym), offline.
//!
//! A recording keeps, per process, the files it mapped and where each file's offset 0
//! was mapped ([`Mapping`]); the process itself is gone when the recording is read. So
//! an address is first turned into an address *in a file* (the file's own virtual
//! address, as `readelf` shows it) with the ELF program headers, and only then
//! symbolized, by file path: blazesym's ELF source, with DWARF line tables where the file
//! has them and the ELF symbol table otherwise. Nothing here reads /proc.

mod layout;
mod symbolizer;
mod types;

pub use layout::ElfLayout;
pub use symbolizer::Symbolizer;
pub use types::{CodeLocation, SymbolizeError};
