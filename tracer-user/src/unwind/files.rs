//! What the unwinder needs of one mapped ELF file: its unwind tables (`.eh_frame` and
//! its index `.eh_frame_hdr`), where its sections and loaded segments sit in its own
//! addresses, read once and shared by every process that maps the file.

use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment};

use crate::symbolize::vdso::{self, VDSO};
use crate::target::elf_file::open_elf;

/// Mappings start at page boundaries.
const PAGE: u64 = 4096;

/// Section bytes shared between the file's entry and every process's unwinder module.
#[derive(Clone, Default)]
pub(super) struct SharedBytes(Arc<[u8]>);

impl Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// One section: its addresses in the file's own address space (SVMA) and its bytes.
#[derive(Clone)]
pub(super) struct Section {
    pub(super) svma: Range<u64>,
    pub(super) data: SharedBytes,
}

/// A loaded segment: the file bytes at `offset..offset + file_size` are at `vaddr`.
#[derive(Clone, Copy)]
struct LoadSegment {
    offset: u64,
    file_size: u64,
    vaddr: u64,
}

/// The unwind information of one ELF file. Only the sections the unwinder reads are
/// kept (for Debian 12's libc, 183 KiB of its 1.9 MB).
pub(super) struct FileUnwindInfo {
    pub(super) eh_frame: Option<Section>,
    pub(super) eh_frame_hdr: Option<Section>,
    pub(super) text_svma: Option<Range<u64>>,
    pub(super) got_svma: Option<Range<u64>>,
    /// The ELF entry point (the file's own address; 0 for none).
    pub(super) entry: u64,
    loads: Vec<LoadSegment>,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum FileError {
    #[error("reading it")]
    Read(#[source] std::io::Error),
    #[error("parsing it as ELF")]
    Parse(#[source] object::Error),
    #[error("the tracer has no vDSO mapped")]
    NoVdso,
}

impl FileUnwindInfo {
    pub(super) fn read(path: &Path) -> Result<FileUnwindInfo, FileError> {
        if path == Path::new(VDSO) {
            return Self::own_vdso();
        }
        // Only the headers and the sections kept are read: a process maps files of tens
        // of MB (ICU's data, libraries with debug information), and reading all 72 of
        // mpirun's whole took the reader 60-70 ms at its first sample, while the ranks'
        // execs waited for it.
        let elf = open_elf(path).map_err(FileError::Read)?;
        Self::parse(&object::ReadCache::new(elf.file))
    }

    /// The vDSO's, from the tracer's own copy (`target::vdso`): a program that spends its
    /// time in `clock_gettime` (a CPU-time loop, whose clock the vDSO asks the kernel
    /// for) is sampled in the vDSO or in the system call it makes from there, and
    /// unwinds into the program through these tables.
    fn own_vdso() -> Result<FileUnwindInfo, FileError> {
        Self::parse(vdso::own_image().ok_or(FileError::NoVdso)?)
    }

    fn parse<'data>(data: impl object::ReadRef<'data>) -> Result<FileUnwindInfo, FileError> {
        let file = object::File::parse(data).map_err(FileError::Parse)?;
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let data = s.data().ok()?;
            Some(Section {
                svma: s.address()..s.address() + s.size(),
                data: SharedBytes(Arc::from(data)),
            })
        };
        let range = |name: &str| {
            file.section_by_name(name)
                .map(|s| s.address()..s.address() + s.size())
        };
        let loads = file
            .segments()
            .map(|s| {
                let (offset, file_size) = s.file_range();
                LoadSegment {
                    offset,
                    file_size,
                    vaddr: s.address(),
                }
            })
            .collect();
        Ok(FileUnwindInfo {
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            text_svma: range(".text"),
            got_svma: range(".got"),
            entry: file.entry(),
            loads,
        })
    }

    /// The load bias of a mapping of this file whose first byte is file offset `offset`
    /// at run-time address `start`: what to add to the file's addresses to get run-time
    /// ones. None when no loaded segment holds that offset. A segment is mapped from its
    /// offset rounded down to a page, and its file offset and address may differ by more
    /// than a page's rounding (lld puts the code a page further in memory than in the
    /// file): the mapping is the last segment whose rounded-down offset is at or below
    /// `offset`, and its address follows from that segment's.
    pub(super) fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let seg = self
            .loads
            .iter()
            .filter(|s| s.offset & !(PAGE - 1) <= offset && offset < s.offset + s.file_size.max(1))
            .max_by_key(|s| s.offset)?;
        let svma = (seg.vaddr.wrapping_sub(seg.offset)).wrapping_add(offset);
        Some(start.wrapping_sub(svma))
    }

    /// Bytes held (the sections kept), for the memory bound.
    pub(super) fn held_bytes(&self) -> usize {
        [&self.eh_frame, &self.eh_frame_hdr]
            .into_iter()
            .flatten()
            .map(|s| s.data.len())
            .sum()
    }
}
