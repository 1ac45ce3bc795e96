//! One traced process's unwinder: a framehop module per executable mapping of an ELF
//! file, from /proc/PID/maps, read again when a sample taken after the last reading has
//! an address outside every mapping that reading saw (a library loaded since).

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error as FrameError, ExplicitModuleSectionInfo, Module, Unwinder};
use tracer_common::{unwind_end, SAMPLE_MAX_FRAMES};

use super::files::{FileUnwindInfo, SharedBytes};
use crate::probes::monotonic_ns;
use crate::symbolize::vdso::VDSO;

/// Least time between two readings of a process's mappings for an address the last
/// reading saw executable but in no file (JIT-compiled code): a reading would only find
/// the same again, unless that memory was mapped anew.
const REREAD_EVERY: Duration = Duration::from_millis(250);
/// Least time between two readings for an address in no mapping of the last reading,
/// sampled after it: a library mapped since (an MPI library's start-up opens dozens of
/// components, one after the other, each used at once), or a return address that is not
/// one (a stack the unwinder misread), whose readings this bounds to 1,000 a second.
/// A longer wait lost the samples of each component loaded within it: with 250 ms after
/// a reading that found nothing new, 17 samples of one rank's `MPI_Init` (2.8 % of the
/// run's) ended at a component loaded just after it.
const REREAD_FLOOR: Duration = Duration::from_millis(1);
/// How far past an ELF entry point a return address counts as the root frame's: the
/// dynamic loader's `_start` calls `_dl_start` within its first instructions.
const ENTRY_BYTES: u64 = 32;

/// An executable mapping of a file, from /proc/PID/maps.
pub(super) struct CodeMapping {
    pub(super) range: Range<u64>,
    pub(super) offset: u64,
    pub(super) path: PathBuf,
}

/// One reading of a process's /proc/PID/maps.
pub(super) struct Mappings {
    /// When it was read: CLOCK_MONOTONIC, the samples' clock, taken before the read.
    pub(super) read_ns: u64,
    /// The executable mappings of files (and the vDSO).
    pub(super) code: Vec<CodeMapping>,
    /// Every executable range, of a file or not, sorted by start.
    pub(super) executable: Vec<Range<u64>>,
}

/// What the last reading of a process's mappings saw, and when.
struct LastReading {
    at: Instant,
    read_ns: u64,
    executable: Vec<Range<u64>>,
}

/// The registers the probe read and the stack bytes it copied from `sp` up.
pub(super) struct UserState<'a> {
    pub(super) ip: u64,
    pub(super) sp: u64,
    pub(super) bp: u64,
    pub(super) stack: &'a [u8],
}

/// Return addresses of one stack, innermost first, and how the unwinding ended.
pub(super) struct Unwound {
    pub(super) frames: Vec<u64>,
    pub(super) end: u16,
}

pub(super) struct ProcessUnwinder {
    unwinder: UnwinderX86_64<SharedBytes>,
    /// framehop's cache of unwind rules by address (509 entries, a few KiB).
    cache: CacheX86_64,
    /// The code ranges with a module, sorted by start.
    modules: Vec<Range<u64>>,
    /// The first bytes of the modules' ELF entry points (run-time addresses, sorted): a
    /// return address there is in the process's root frame.
    entries: Vec<Range<u64>>,
    /// The files the modules come from: kept alive while the process is.
    pub(super) files: Vec<Arc<FileUnwindInfo>>,
    /// The last reading of the mappings (None: never read).
    last_reading: Option<LastReading>,
}

impl ProcessUnwinder {
    pub(super) fn new() -> Self {
        ProcessUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            modules: Vec::new(),
            entries: Vec::new(),
            files: Vec::new(),
            last_reading: None,
        }
    }

    /// Whether reading the mappings again now may tell where `addr`, in a sample taken
    /// at `taken_ns` (CLOCK_MONOTONIC), belongs. A sample taken before the last reading
    /// began was taken with every mapping that reading saw (a reading again finds
    /// nothing for it); one taken since, at an address in no mapping then, may be in a
    /// library mapped since.
    pub(super) fn may_reread(&self, addr: u64, taken_ns: u64, now: Instant) -> bool {
        let Some(last) = &self.last_reading else {
            return true;
        };
        let since = now.duration_since(last.at);
        if is_known(&last.executable, addr) {
            return since >= REREAD_EVERY;
        }
        taken_ns >= last.read_ns && since >= REREAD_FLOOR
    }

    /// Adds a module for every code mapping not known yet; `file_of` gives a mapping's
    /// file's unwind information (None: not an ELF file with any).
    pub(super) fn add_mappings(
        &mut self,
        now: Instant,
        mappings: Mappings,
        mut file_of: impl FnMut(&PathBuf) -> Option<Arc<FileUnwindInfo>>,
    ) {
        for m in &mappings.code {
            if self.modules.contains(&m.range) {
                continue;
            }
            let Some(file) = file_of(&m.path) else {
                continue;
            };
            let Some(bias) = file.bias(m.range.start, m.offset) else {
                continue;
            };
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: file.text_svma.clone(),
                got_svma: file.got_svma.clone(),
                eh_frame_svma: file.eh_frame.as_ref().map(|s| s.svma.clone()),
                eh_frame: file.eh_frame.as_ref().map(|s| s.data.clone()),
                eh_frame_hdr_svma: file.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
                eh_frame_hdr: file.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
                ..Default::default()
            };
            let name = m.path.to_string_lossy().into_owned();
            self.unwinder
                .add_module(Module::new(name, m.range.clone(), bias, info));
            let at = self.modules.partition_point(|r| r.start < m.range.start);
            self.modules.insert(at, m.range.clone());
            let entry = file.entry.wrapping_add(bias);
            if file.entry != 0 && m.range.contains(&entry) {
                let at = self.entries.partition_point(|r| r.start < entry);
                self.entries.insert(at, entry..entry + ENTRY_BYTES);
            }
            if !self.files.iter().any(|f| Arc::ptr_eq(f, &file)) {
                self.files.push(file);
            }
        }
        self.last_reading = Some(LastReading {
            at: now,
            read_ns: mappings.read_ns,
            executable: mappings.executable,
        });
    }

    /// Whether `addr` is in a mapping with a module.
    pub(super) fn knows(&self, addr: u64) -> bool {
        is_known(&self.modules, addr)
    }

    /// Code mappings with a module.
    pub(super) fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// Unwinds one stack: at most [`SAMPLE_MAX_FRAMES`] frames, innermost first. Ends
    /// `COMPLETE` when framehop reached the stack's root (the caller-less frame of
    /// `_start` or of a thread's `clone`), `STACK_END` when the copied bytes ran out,
    /// `NO_UNWIND_INFO` at an address outside every module (framehop would go on by
    /// frame pointers, which -O2 code does not keep) or unwind rules that led nowhere.
    pub(super) fn unwind(&mut self, state: &UserState<'_>) -> Unwound {
        let (sp, stack) = (state.sp, state.stack);
        let mut read_stack = |addr: u64| {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut frames = Vec::with_capacity(16);
        let mut iter = self.unwinder.iter_frames(
            state.ip,
            UnwindRegsX86_64::new(state.ip, state.sp, state.bp),
            &mut self.cache,
            &mut read_stack,
        );
        let end = loop {
            match iter.next() {
                Ok(Some(frame)) => {
                    if frames.len() == SAMPLE_MAX_FRAMES {
                        break unwind_end::TRUNCATED;
                    }
                    let addr = frame.address();
                    frames.push(addr);
                    // The program's first frame: the dynamic loader's entry, which calls
                    // `_dl_start` before the program runs and has no unwind rules (what
                    // framehop would take for its caller is `argc`), or that entry's
                    // first instruction itself.
                    if is_known(&self.entries, addr) {
                        break unwind_end::COMPLETE;
                    }
                    if !is_known(&self.modules, addr) {
                        break unwind_end::NO_UNWIND_INFO;
                    }
                }
                Ok(None) => break unwind_end::COMPLETE,
                Err(FrameError::CouldNotReadStack(_)) => break unwind_end::STACK_END,
                Err(_) => break unwind_end::NO_UNWIND_INFO,
            }
        };
        Unwound { frames, end }
    }
}

fn is_known(modules: &[Range<u64>], addr: u64) -> bool {
    let i = modules.partition_point(|r| r.start <= addr);
    i > 0 && modules[i - 1].contains(&addr)
}

/// The executable mappings in `pid`'s /proc/PID/maps (none if it is gone).
pub(super) fn read_mappings(pid: u32) -> Mappings {
    let read_ns = monotonic_ns();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut executable: Vec<Range<u64>> = maps.lines().filter_map(executable_range).collect();
    executable.sort_by_key(|r| r.start);
    Mappings {
        read_ns,
        code: maps.lines().filter_map(code_mapping).collect(),
        executable,
    }
}

/// The range of one line of /proc/PID/maps if it is executable.
fn executable_range(line: &str) -> Option<Range<u64>> {
    let mut f = line.split_whitespace();
    let (range, perms) = (f.next()?, f.next()?);
    if !perms.contains('x') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?)
}

/// One line of /proc/PID/maps (`start-end perms offset dev inode path`) if it maps a
/// file executable, or is the vDSO.
fn code_mapping(line: &str) -> Option<CodeMapping> {
    let range = executable_range(line)?;
    let mut f = line.split_whitespace().skip(2);
    let offset = f.next()?;
    let path = f.nth(2)?;
    if !(path.starts_with('/') || path == VDSO) {
        return None;
    }
    Some(CodeMapping {
        range,
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: PathBuf::from(path),
    })
}

/// Files by path, for [`ProcessUnwinder::add_mappings`]: read once, shared.
pub(super) type FileCache = HashMap<PathBuf, Option<Arc<FileUnwindInfo>>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading at `read_ns` of executable ranges in no file (JIT-like code), one at
    /// 0x1000..0x2000: a library loaded since, sampled after it, is read at once (past a
    /// millisecond); one sampled before, never; the JIT-like code, every 250 ms.
    #[test]
    fn mappings_are_read_again_only_when_a_reading_could_find_the_address() {
        let mut p = ProcessUnwinder::new();
        let at = Instant::now();
        assert!(p.may_reread(0x5000, 0, at), "never read");
        let read_ns = 1_000_000;
        let mappings = Mappings {
            read_ns,
            code: Vec::new(),
            executable: vec![0x1000..0x2000, 0x8000..0x9000],
        };
        p.add_mappings(at, mappings, |_| None);
        let later = |ms: u64| at + Duration::from_millis(ms);
        assert!(p.may_reread(0x5000, read_ns + 1, later(2)), "mapped since");
        assert!(!p.may_reread(0x5000, read_ns + 1, at), "within the floor");
        assert!(
            !p.may_reread(0x5000, read_ns - 1, later(300)),
            "sampled before"
        );
        assert!(
            !p.may_reread(0x1800, read_ns + 1, later(2)),
            "known, in no file"
        );
        assert!(
            p.may_reread(0x1800, read_ns + 1, later(300)),
            "known, 250 ms on"
        );
    }

    #[test]
    fn reads_executable_file_mappings_and_the_vdso_only() {
        let m = code_mapping(
            "7f1c2a428000-7f1c2a5a1000 r-xp 00028000 fe:01 1835136    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(m.range, 0x7f1c2a428000..0x7f1c2a5a1000);
        assert_eq!(m.offset, 0x28000);
        assert_eq!(m.path, PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(code_mapping(
            "7f1c2a400000-7f1c2a428000 r--p 00000000 fe:01 1835136    /usr/lib/x86_64-linux-gnu/libc.so.6"
        )
        .is_none());
        let vdso =
            code_mapping("7ffd1e5f0000-7ffd1e5f2000 r-xp 00000000 00:00 0    [vdso]").unwrap();
        assert_eq!(vdso.path, PathBuf::from("[vdso]"));
        assert_eq!(vdso.offset, 0);
        assert!(
            code_mapping("7ffd1e5ee000-7ffd1e5f0000 r--p 00000000 00:00 0    [vvar]").is_none()
        );
        assert!(code_mapping("7ffd1e5f0000-7ffd1e5f2000 rw-p 00000000 00:00 0").is_none());
    }

    #[test]
    fn the_vdso_has_unwind_tables_and_is_loaded_at_its_mapping() {
        let vdso = FileUnwindInfo::read(std::path::Path::new(VDSO)).unwrap();
        assert!(vdso.eh_frame.as_ref().is_some_and(|s| !s.data.is_empty()));
        assert!(vdso.eh_frame_hdr.is_some());
        // Linked at address 0 and mapped from offset 0: the bias is where it is mapped.
        assert_eq!(vdso.bias(0x7ffd_1e5f_0000, 0), Some(0x7ffd_1e5f_0000));
    }
}
