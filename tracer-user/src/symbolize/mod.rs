//! Code addresses to function, source file and line with blazesym, offline: the
//! resolver the analysis crate's [`CodeLocator`](tracer_analysis::CodeLocator)
//! asks for. It lives here, not in the analysis crate, because blazesym brings libc.
//!
//! An address is first turned into an address *in a file* with the ELF program headers
//! ([`ElfLayout`](tracer_analysis::ElfLayout)), then symbolized by file path:
//! blazesym's ELF source, with DWARF line tables where the file has them and the ELF
//! symbol table otherwise. The vDSO (`vdso`), which no file holds, is named from the
//! tracer's own copy; the unwinder reads its unwind tables there too. Nothing here reads
//! another process's /proc.

mod symbolizer;
pub(crate) mod vdso;

pub use symbolizer::Symbolizer;
