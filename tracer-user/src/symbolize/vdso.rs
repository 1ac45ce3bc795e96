//! The vDSO: the kernel's code every 64-bit process maps (`clock_gettime`,
//! `gettimeofday`), named `[vdso]` in /proc/PID/maps. The kernel maps one image into
//! every process, so the tracer reads the copy mapped into its own address space for
//! what it needs of any process's: its unwind tables (`unwind/files.rs`) and its function
//! names (`symbolize/`).

/// What /proc/PID/maps calls the vDSO's mapping.
pub(crate) const VDSO: &str = "[vdso]";

/// The tracer's own vDSO image: where the auxiliary vector says it is, as long as
/// /proc/self/maps says. None if it has none (a kernel booted with `vdso=0`).
pub(crate) fn own_image() -> Option<&'static [u8]> {
    // SAFETY: getauxval only reads the auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return None;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let len = maps.lines().filter(|l| l.ends_with(VDSO)).find_map(|l| {
        let (start, end) = l.split_whitespace().next()?.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        (start == base).then(|| end - start)
    })?;
    // SAFETY: the vDSO is mapped readable at `base` for `len` bytes for the process's
    // life, and never written.
    Some(unsafe { std::slice::from_raw_parts(base as *const u8, len as usize) })
}

/// The vDSO's functions, by address in its own image (linked at 0, so the address in a
/// process minus where the process maps it).
pub(crate) struct VdsoFunctions {
    /// Sorted by start.
    functions: Vec<VdsoFunction>,
}

struct VdsoFunction {
    start: u64,
    end: u64,
    name: String,
}

impl VdsoFunctions {
    /// The functions of the tracer's own vDSO (none if it has none or it does not parse).
    pub(crate) fn own() -> VdsoFunctions {
        use object::{Object, ObjectSymbol, SymbolKind};
        let mut functions = Vec::new();
        if let Some(file) = own_image().and_then(|image| object::File::parse(image).ok()) {
            for sym in file.dynamic_symbols().chain(file.symbols()) {
                let Ok(name) = sym.name() else { continue };
                if sym.kind() == SymbolKind::Text && sym.size() > 0 && !name.is_empty() {
                    functions.push(VdsoFunction {
                        start: sym.address(),
                        end: sym.address() + sym.size(),
                        name: name.to_string(),
                    });
                }
            }
        }
        // Each function has two names (`clock_gettime` and `__vdso_clock_gettime`), and
        // a static table would repeat them: the one the program called is kept.
        functions.sort_by_key(|f| (f.start, f.name.starts_with("__vdso_")));
        functions.dedup_by_key(|f| f.start);
        VdsoFunctions { functions }
    }

    /// The function at `vaddr` (an address of the image).
    pub(crate) fn name_at(&self, vaddr: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.start <= vaddr);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (vaddr < f.end).then_some(f.name.as_str())
    }

    /// Whether `vaddr` is inside the image's functions.
    pub(crate) fn covers(&self, vaddr: u64) -> bool {
        self.name_at(vaddr).is_some()
    }

    /// Where the function `name` starts in the image (for the tests).
    #[cfg(test)]
    pub(crate) fn start_of(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_vdso_names_clock_gettime() {
        let f = VdsoFunctions::own();
        let at = f
            .functions
            .iter()
            .find(|f| f.name.contains("clock_gettime"))
            .expect("a clock_gettime in the vDSO");
        assert!(f.name_at(at.start).unwrap().contains("clock_gettime"));
        assert!(f.name_at(at.end).is_none_or(|n| n != at.name));
    }
}
