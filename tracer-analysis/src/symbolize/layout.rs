//! The program headers of an ELF file: where its offset 0 and its code are.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use object::elf::PF_X;
use object::{Object, ObjectSegment, SegmentFlags};

use super::types::ElfLayoutError;

/// What the program headers say about one ELF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfLayout {
    /// Virtual address of file offset 0 before relocation (0 for PIEs and shared
    /// libraries): the mapping of offset 0 starts at this plus the load bias.
    pub base_vaddr: u64,
    /// Executable PT_LOAD segments, as virtual address ranges in the file.
    pub text: Vec<Range<u64>>,
}

/// Virtual address of file offset 0 before relocation: the lowest of the segments'
/// address minus file offset (wrapping: a malformed file gives a nonsense address, not a
/// panic).
pub fn base_vaddr<'data, R: object::ReadRef<'data>>(elf: &object::File<'data, R>) -> u64 {
    elf.segments()
        .map(|s| s.address().wrapping_sub(s.file_range().0))
        .min()
        .unwrap_or(0)
}

impl ElfLayout {
    /// Reads the program headers only (large files with debug info are not read whole).
    pub fn read(path: &Path) -> Result<Self, ElfLayoutError> {
        let file = File::open(path).map_err(|error| ElfLayoutError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).map_err(|error| ElfLayoutError::Parse {
            path: path.to_path_buf(),
            error,
        })?;
        let base_vaddr = base_vaddr(&elf);
        let text = elf
            .segments()
            .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & PF_X != 0))
            .map(|s| s.address()..s.address() + s.size())
            .collect();
        Ok(ElfLayout { base_vaddr, text })
    }

    /// The file's own virtual address of run-time address `addr`, if `addr` is in this
    /// file's code when offset 0 is mapped at `bias`.
    pub fn file_vaddr(&self, bias: u64, addr: u64) -> Option<u64> {
        let vaddr = addr.checked_sub(bias)?.checked_add(self.base_vaddr)?;
        self.text
            .iter()
            .any(|r| r.contains(&vaddr))
            .then_some(vaddr)
    }
}
