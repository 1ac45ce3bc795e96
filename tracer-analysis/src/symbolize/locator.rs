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

/// The frame of an address no mapped file has a symbol for.
pub const UNKNOWN_FRAME: &str = "[unknown]";
/// The one frame of a sample the probe could read no user stack of.
pub const NO_STACK_FRAME: &str = "[no user stack]";

/// A sampled stack's frames (run-time addresses, innermost first, as a SAMPLE record has
/// them) as function names, outermost first: each address's function, then the functions
/// inlined there, as `names` gives them for a code address ([`UNKNOWN_FRAME`] where it
/// gives none). A return address is named by the byte before it (the call), the
/// interrupted instruction by itself. The report and the live profile both name stacks
/// so.
pub(crate) fn stack_function_names(
    frames: &[u64],
    mut names: impl FnMut(u64) -> Vec<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, &addr) in frames.iter().enumerate().rev() {
        let code = if i == 0 { addr } else { addr.saturating_sub(1) };
        let found = names(code);
        if found.is_empty() {
            out.push(UNKNOWN_FRAME.to_string());
        } else {
            out.extend(found);
        }
    }
    if out.is_empty() {
        out.push(NO_STACK_FRAME.to_string());
    }
    out
}
