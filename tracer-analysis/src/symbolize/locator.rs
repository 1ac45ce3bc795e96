//! What the analyses need from a symbolizer: a call site's source location.

use super::types::CodeLocation;
use crate::format::Mapping;

/// Resolves recorded code addresses. A trait so that the analyses name call sites
/// without this crate depending on the resolver (blazesym, and through it libc): the
/// `tracer` binary implements it.
pub trait CodeLocator {
    /// Function, file and line of the call that returns to run-time address `ret` in a
    /// process that had `mappings`; None when no mapped file has code there.
    fn locate_return(&mut self, mappings: &[Mapping], ret: u64) -> Option<CodeLocation>;
}
