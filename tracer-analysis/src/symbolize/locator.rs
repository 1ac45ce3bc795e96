//! What the analyses need from a symbolizer: a call site's source location, and the
//! functions a sampled code address is in.

use super::types::CodeLocation;
use crate::format::Mapping;

/// Resolves recorded code addresses. A trait so that the analyses name call sites
/// without this crate depending on the resolver (blazesym, and through it libc): the
/// `tracer` binary implements it.
pub trait CodeLocator {
    /// Function, file and line of the call that returns to run-time address `ret` in a
    /// process that had `mappings`; None when no mapped file has code there.
    fn locate_return(&mut self, mappings: &[Mapping], ret: u64) -> Option<CodeLocation>;

    /// The functions run-time code address `addr` is in, in a process that had
    /// `mappings`, outermost first: the function whose code it is, then the functions
    /// inlined into it down to the innermost (where the debug information says so), each
    /// demangled (`format::demangle`). Empty when no mapped file has a symbol there.
    fn function_names(&mut self, mappings: &[Mapping], addr: u64) -> Vec<String>;
}
