//! The symbolizer: recorded addresses to functions, files and lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use blazesym::symbolize::{self, source, Input, Symbolized};
use tracer_analysis::demangle::demangle;

use super::vdso::{VdsoFunctions, VDSO};
use tracer_analysis::Mapping;
use tracer_analysis::{CodeLocation, CodeLocator, ElfLayout};

/// Why blazesym could not symbolize an address of a file.
#[derive(Debug, thiserror::Error)]
pub enum SymbolizeError {
    #[error("cannot symbolize in {path}: {error}")]
    Symbolize {
        path: PathBuf,
        error: blazesym::Error,
    },
}

/// Symbolizes code addresses of recorded processes. Keeps what it learnt per file (the
/// program headers here, symbols and line tables inside blazesym), so symbolizing every
/// call site of a long recording reads each file once.
pub struct Symbolizer {
    inner: symbolize::Symbolizer,
    /// None: the file is gone or not an ELF file (asked once).
    layouts: HashMap<String, Option<ElfLayout>>,
    /// The vDSO's functions (a process's `[vdso]` mapping), read when first needed.
    vdso: Option<VdsoFunctions>,
    /// Whether [`CodeLocator::function_names`] reads debug information (inlined
    /// functions) or the symbol tables alone.
    debug_names: bool,
    /// Each file's separate debug file, if one is installed (None: none; asked once).
    debug_files: HashMap<PathBuf, Option<PathBuf>>,
}

/// Where Debian's debug packages (`libc6-dbg`, the `-dbgsym` packages) install a file's
/// separate debug file, named by the file's GNU build id.
const DEBUG_FILES_BY_BUILD_ID: &str = "/usr/lib/debug/.build-id";

/// The separate debug file of ELF file `path` if one is installed
/// (`DEBUG_FILES_BY_BUILD_ID/ab/cdef....debug` for build id `abcdef...`), the build id
/// read by blazesym, which has the file open for its symbols already.
fn installed_debug_file(path: &Path) -> Option<PathBuf> {
    let id = blazesym::helper::read_elf_build_id(path).ok()??;
    let (first, rest) = id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let debug = Path::new(DEBUG_FILES_BY_BUILD_ID)
        .join(format!("{first:02x}"))
        .join(format!("{rest}.debug"));
    debug.is_file().then_some(debug)
}

/// A run-time address in a mapped file: the mapping, and the address in the file's own
/// (link-time) address space.
pub struct InFile<'m> {
    pub mapping: &'m Mapping,
    pub vaddr: u64,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    pub fn new() -> Self {
        Symbolizer {
            // The files are read again only if they change; inlined functions are wanted
            // (a call site inside an inlined helper belongs to the helper's source line).
            inner: symbolize::Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .build(),
            layouts: HashMap::new(),
            vdso: None,
            debug_names: true,
            debug_files: HashMap::new(),
        }
    }

    /// A symbolizer whose function names come from the ELF symbol tables alone: no
    /// inlined functions, but no debug information to read either (the live profile).
    pub fn symbols_only() -> Self {
        Symbolizer {
            debug_names: false,
            ..Self::new()
        }
    }

    fn vdso(&mut self) -> &VdsoFunctions {
        self.vdso.get_or_insert_with(VdsoFunctions::own)
    }

    fn layout(&mut self, path: &str) -> Option<&ElfLayout> {
        self.layouts
            .entry(path.to_string())
            .or_insert_with(|| ElfLayout::read(Path::new(path)).ok())
            .as_ref()
    }

    /// The mapping whose file has code at `addr`, and the address in that file.
    pub fn find_object<'m>(&mut self, mappings: &'m [Mapping], addr: u64) -> Option<InFile<'m>> {
        // Closest mapping start below the address first: files do not overlap, but a
        // file's layout may be unreadable, so go on to the next one.
        let mut below: Vec<&Mapping> = mappings.iter().filter(|m| m.bias <= addr).collect();
        below.sort_by_key(|m| std::cmp::Reverse(m.bias));
        below.into_iter().find_map(|m| {
            let vaddr = if m.path == VDSO {
                // Linked at 0: the address in the image is the offset from its mapping.
                let vaddr = addr - m.bias;
                self.vdso().covers(vaddr).then_some(vaddr)?
            } else {
                self.layout(&m.path)?.file_vaddr(m.bias, addr)?
            };
            Some(InFile { mapping: m, vaddr })
        })
    }

    /// Function, file and line of run-time address `addr` in a process that had
    /// `mappings`; None when no mapped file has code there or the file is unreadable.
    pub fn locate(&mut self, mappings: &[Mapping], addr: u64) -> Option<CodeLocation> {
        let at = self.find_object(mappings, addr)?;
        if at.mapping.path == VDSO {
            return Some(CodeLocation {
                function: self.vdso().name_at(at.vaddr)?.to_string(),
                file: None,
                line: None,
                object: VDSO.to_string(),
            });
        }
        self.locate_in_file(Path::new(&at.mapping.path), at.vaddr)
            .ok()
            .flatten()
    }

    /// Like [`Self::locate`] for a return address (a call site): the call instruction
    /// ends where the return address is, so the byte before it is the call's line (the
    /// return address itself can be on the next line, or in the next function).
    pub fn locate_return(&mut self, mappings: &[Mapping], ret: u64) -> Option<CodeLocation> {
        self.locate(mappings, ret.checked_sub(1)?)
    }

    fn symbolize(
        &self,
        path: &Path,
        vaddr: u64,
        debug_syms: bool,
    ) -> Result<Option<blazesym::symbolize::Sym<'_>>, SymbolizeError> {
        let mut elf = source::Elf::new(path);
        elf.debug_syms = debug_syms;
        match self
            .inner
            .symbolize_single(&source::Source::Elf(elf), Input::VirtOffset(vaddr))
        {
            Ok(Symbolized::Sym(sym)) => Ok(Some(sym)),
            Ok(Symbolized::Unknown(_)) => Ok(None),
            Err(error) => Err(SymbolizeError::Symbolize {
                path: path.to_path_buf(),
                error,
            }),
        }
    }

    /// Function, file and line of virtual address `vaddr` of the ELF file `path` (an
    /// address as the file's symbol table states it). Ok(None): no symbol covers it.
    pub fn locate_in_file(
        &mut self,
        path: &Path,
        vaddr: u64,
    ) -> Result<Option<CodeLocation>, SymbolizeError> {
        let sym = match self.symbolize(path, vaddr, true) {
            Ok(sym) => sym,
            // Debug info it cannot read (e.g. zstd-compressed sections): ELF symbols only.
            Err(e) => self.symbolize(path, vaddr, false).map_err(|_| e)?,
        };
        let Some(sym) = sym else { return Ok(None) };
        // The innermost inlined function, with the line inside it, when there is one.
        let (function, code) = match sym.inlined.last() {
            Some(f) if f.code_info.is_some() => (f.name.to_string(), f.code_info.as_ref()),
            _ => (sym.name.to_string(), sym.code_info.as_deref()),
        };
        Ok(Some(CodeLocation {
            function,
            file: code.map(|c| c.to_path().display().to_string()),
            line: code.and_then(|c| c.line),
            object: path.display().to_string(),
        }))
    }
}

impl CodeLocator for Symbolizer {
    fn locate_return(&mut self, mappings: &[Mapping], ret: u64) -> Option<CodeLocation> {
        Symbolizer::locate_return(self, mappings, ret)
    }

    fn function_names(&mut self, mappings: &[Mapping], addr: u64) -> Vec<String> {
        let Some(at) = self.find_object(mappings, addr) else {
            return Vec::new();
        };
        if at.mapping.path == VDSO {
            return self
                .vdso()
                .name_at(at.vaddr)
                .map(demangle)
                .into_iter()
                .collect();
        }
        self.function_names_in_file(Path::new(&at.mapping.path), at.vaddr)
    }
}

impl Symbolizer {
    /// [`CodeLocator::function_names`] of virtual address `vaddr` of the ELF file `path`.
    fn function_names_in_file(&mut self, path: &Path, vaddr: u64) -> Vec<String> {
        let sym = match self.symbolize(path, vaddr, self.debug_names) {
            Ok(sym) => sym,
            // Debug info it cannot read: ELF symbols only, without inlined functions.
            Err(_) => self.symbolize(path, vaddr, false).ok().flatten(),
        };
        if let Some(sym) = sym {
            // blazesym lists the inlined functions outermost first, after the function.
            return std::iter::once(&*sym.name)
                .chain(sym.inlined.iter().map(|f| &*f.name))
                .map(demangle)
                .collect();
        }
        if self.debug_names {
            // The debug information, found through the file's debug link, was read.
            return Vec::new();
        }
        // A local function of a stripped library (glibc's `__libc_start_call_main`, under
        // every main thread's `main`): the file's own tables do not name it, the full
        // symbol table of its separate debug file does, read without the debug
        // information (which could hold the live profile's records up for a second).
        let debug = self
            .debug_files
            .entry(path.to_path_buf())
            .or_insert_with(|| installed_debug_file(path))
            .clone();
        let Some(debug) = debug else {
            return Vec::new();
        };
        match self.symbolize(&debug, vaddr, false) {
            Ok(Some(sym)) => vec![demangle(&sym.name)],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The address of symbol `name` in an ELF file's own address space.
    fn symbol_vaddr(path: &Path, name: &str) -> u64 {
        use object::{Object, ObjectSymbol};
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let sym = file.symbols().find(|s| s.name() == Ok(name));
        sym.unwrap_or_else(|| panic!("no symbol {name}")).address()
    }

    const SOURCE: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int helper(int x) {
    return x * 3 + 1;
}
int main(int argc, char **argv) {
    (void)argv;
    printf("%d\n", helper(argc));
    return 0;
}
"#;

    /// The test program's source and the program compiled from it.
    struct Built {
        src: PathBuf,
        exe: PathBuf,
    }

    /// Compiles the test program with debug info into a fresh directory.
    fn build(name: &str, flags: &[&str]) -> Option<Built> {
        let dir =
            std::env::temp_dir().join(format!("tracer-symbolize-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.c");
        std::fs::write(&src, SOURCE).unwrap();
        let exe = dir.join(name);
        let status = Command::new("cc")
            .args(["-g", "-O1"])
            .args(flags)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .ok()?;
        assert!(status.success(), "cc failed");
        Some(Built { src, exe })
    }

    fn check_helper(flags: &[&str], name: &str) {
        let Some(Built { src, exe }) = build(name, flags) else {
            eprintln!("no C compiler: skipped");
            return;
        };
        let helper = symbol_vaddr(&exe, "helper");
        let layout = ElfLayout::read(&exe).unwrap();
        let mut s = Symbolizer::new();

        // By file and address.
        let loc = s.locate_in_file(&exe, helper).unwrap().expect("located");
        assert_eq!(loc.function, "helper");
        assert!(loc.file.as_deref().unwrap().ends_with("prog.c"), "{loc:?}");
        // Its first instruction: the declaration's line, or at -O1 the body's.
        assert!(matches!(loc.line, Some(3 | 4)), "{loc:?}");

        // As a recording sees it: the file mapped somewhere, an address inside helper.
        let bias = 0x5555_0000_0000 + layout.base_vaddr;
        let mappings = vec![
            Mapping {
                path: "/nonexistent/lib.so".into(),
                bias: 0x10_0000,
            },
            Mapping {
                path: exe.display().to_string(),
                bias,
            },
        ];
        let addr = bias - layout.base_vaddr + helper + 1;
        let loc = s.locate(&mappings, addr).expect("located in mapping");
        assert_eq!(loc.function, "helper");
        assert_eq!(loc.object, exe.display().to_string());
        assert!(loc.to_string().starts_with("helper at "), "{loc}");
        assert_eq!(s.function_names(&mappings, addr), ["helper"]);
        // Outside any code: nothing.
        assert_eq!(s.locate(&mappings, bias - 1), None);
        assert_eq!(s.locate(&mappings, 42), None);
        assert!(s.function_names(&mappings, 42).is_empty());
        let _ = std::fs::remove_dir_all(src.parent().unwrap());
    }

    #[test]
    fn locates_a_function_of_a_pie() {
        check_helper(&["-fPIE", "-pie"], "pie");
    }

    #[test]
    fn locates_a_function_of_a_fixed_address_executable() {
        check_helper(&["-no-pie", "-fno-pie"], "nopie");
    }

    /// A function with another inlined into it: the inlined code's addresses are named
    /// by both, the outer first.
    const INLINED: &str = r#"
static inline __attribute__((always_inline)) long step(long x) {
    for (int i = 0; i < 100; i++) x = x * 7 + i;
    return x;
}
__attribute__((noinline)) long outer(long x) {
    return step(x) + step(x + 1);
}
int main(int argc, char **argv) {
    (void)argv;
    return (int)outer(argc);
}
"#;

    #[test]
    fn names_inlined_functions_outermost_first() {
        let dir = std::env::temp_dir().join(format!("tracer-inlined-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, exe) = (dir.join("inlined.c"), dir.join("inlined"));
        std::fs::write(&src, INLINED).unwrap();
        let Ok(status) = Command::new("cc")
            .args(["-g", "-O2", "-fPIE", "-pie"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
        else {
            eprintln!("no C compiler: skipped");
            return;
        };
        assert!(status.success(), "cc failed");
        let outer = symbol_vaddr(&exe, "outer");
        let layout = ElfLayout::read(&exe).unwrap();
        let bias = 0x5555_0000_0000 + layout.base_vaddr;
        let mappings = vec![Mapping {
            path: exe.display().to_string(),
            bias,
        }];
        let mut s = Symbolizer::new();
        let names: std::collections::BTreeSet<Vec<String>> = (0..64)
            .map(|i| s.function_names(&mappings, bias - layout.base_vaddr + outer + i))
            .collect();
        let expected: Vec<String> = vec!["outer".into(), "step".into()];
        assert!(names.contains(&expected), "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.first().map(String::as_str) == Some("outer")),
            "{names:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A process's vDSO addresses are named from the tracer's own copy, wherever the
    /// process maps it.
    #[test]
    fn names_the_vdso_at_its_mapping() {
        let mut s = Symbolizer::new();
        let start = s.vdso().start_of("clock_gettime").expect("in the vDSO");
        let bias = 0x7ffd_1e5f_0000;
        let mappings = [Mapping {
            path: VDSO.to_string(),
            bias,
        }];
        assert_eq!(
            s.function_names(&mappings, bias + start + 4),
            ["clock_gettime"]
        );
        let at = s.locate(&mappings, bias + start).unwrap();
        assert_eq!(
            (at.function.as_str(), at.object.as_str()),
            ("clock_gettime", VDSO)
        );
        assert!(s.function_names(&mappings, bias - 1).is_empty());
    }

    #[test]
    fn file_vaddr_needs_code() {
        let layout = ElfLayout {
            base_vaddr: 0x40_0000,
            text: vec![0x40_1000..0x40_2000, 0x40_3000..0x40_3100],
        };
        assert_eq!(layout.file_vaddr(0x40_0000, 0x40_1800), Some(0x40_1800));
        assert_eq!(layout.file_vaddr(0x40_0000, 0x40_0800), None);
        assert_eq!(layout.file_vaddr(0x40_0000, 0x40_2800), None);
        assert_eq!(layout.file_vaddr(0x40_0000, 0x40_3000), Some(0x40_3000));
        assert_eq!(layout.file_vaddr(0x50_0000, 0x40_1800), None);
        let pie = ElfLayout {
            base_vaddr: 0,
            text: vec![0x1000..0x2000, 0x3000..0x3100],
        };
        assert_eq!(pie.file_vaddr(0x5555_0000, 0x5555_1010), Some(0x1010));
    }

    /// The live profile's names (symbol tables alone) include the local functions of a
    /// stripped library, from its separate debug file: glibc's `__libc_start_call_main`,
    /// the frame under every main thread's `main` (libc6-dbg, which `cargo xtask setup`
    /// installs), where the live table said `[unknown]` before.
    #[test]
    fn symbols_only_names_a_stripped_librarys_local_function_from_its_debug_file() {
        let libc = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
        let debug = installed_debug_file(libc).expect("libc6-dbg's debug file of libc.so.6");
        let inside = symbol_vaddr(&debug, "__libc_start_call_main") + 4;
        let mut s = Symbolizer::symbols_only();
        assert!(
            s.symbolize(libc, inside, false).unwrap().is_none(),
            "libc.so.6's own tables name it: the test shows nothing"
        );
        assert_eq!(
            s.function_names_in_file(libc, inside),
            ["__libc_start_call_main"]
        );
        // A program with no debug file installed: nothing more than before.
        assert_eq!(
            installed_debug_file(&std::env::current_exe().unwrap()),
            None
        );
    }

    #[test]
    fn non_elf_is_an_error() {
        let err = ElfLayout::read(Path::new("/proc/self/status")).unwrap_err();
        assert!(err.to_string().contains("not an ELF"), "{err}");
    }
}
