//! The per-CPU slots the probes write most records to (`tracer_common::SLOT_BYTES`),
//! mapped into our memory: a record costs the probes plain stores, where a ring-buffer
//! reservation takes a lock and a commit, and reading costs us plain loads.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use aya::maps::MapData;
use tracer_common::{maps, SlotCursor, SLOT_BYTES};

use super::ProbeError;

/// How many slots each CPU gets: as many as fit in the ring's size shared out among the
/// CPUs (so the slots take no more memory than the ring, unless the minimum needs more),
/// a power of two between 256 and 16,384 (2.1 MiB per CPU: 50 ms of a CPU writing
/// 330,000 records a second; a CPU that writes faster wakes the reader when half its
/// slots are unread).
pub(crate) fn slots_per_cpu(ring_bytes: u32, cpus: usize) -> u32 {
    let fit = ring_bytes as usize / cpus.max(1) / SLOT_BYTES;
    1 << fit.clamp(256, 16384).ilog2()
}

/// A map's memory, shared with the kernel (`BPF_F_MMAPABLE` arrays).
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(map: &MapData, bytes: usize, name: &'static str) -> Result<Self, ProbeError> {
        let len = bytes.next_multiple_of(page_size());
        // SAFETY: a shared mapping of the map's own memory, of the size the kernel gave it
        // (max_entries × value size, rounded up to a page); unmapped on drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(ProbeError::Mmap {
                name,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, no longer referenced (CpuSlots owns it).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: plain sysconf.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// The slots of every CPU and their cursors. The probes write a CPU's slots in turn and
/// move its head past each record they finish; we read the slots between the tail and
/// the head, then move the tail, which gives those slots back to the probes.
pub(crate) struct CpuSlots {
    slots: Mapping,
    cursors: Mapping,
    cpus: usize,
    per_cpu: u64,
    /// The maps themselves (their file descriptors), closed after the mappings above
    /// are gone: fields drop in order.
    _maps: [MapData; 2],
}

/// One CPU's unread records: its `n`th record for `n` in `tail..head`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unread {
    pub cpu: usize,
    pub tail: u64,
    pub head: u64,
}

impl CpuSlots {
    pub(super) fn map(
        slots: MapData,
        cursors: MapData,
        cpus: usize,
        per_cpu: u32,
    ) -> Result<Self, ProbeError> {
        let slot_map = Mapping::new(&slots, cpus * per_cpu as usize * SLOT_BYTES, maps::SLOTS)?;
        let cursor_map = Mapping::new(
            &cursors,
            cpus * std::mem::size_of::<SlotCursor>(),
            maps::CURSORS,
        )?;
        Ok(CpuSlots {
            slots: slot_map,
            cursors: cursor_map,
            cpus,
            per_cpu: per_cpu as u64,
            _maps: [slots, cursors],
        })
    }

    fn cursor_word(&self, cpu: usize, offset: usize) -> &AtomicU64 {
        assert!(cpu < self.cpus);
        let at = cpu * std::mem::size_of::<SlotCursor>() + offset;
        // SAFETY: inside the cursors' mapping, 8-byte aligned (a page-aligned array of
        // 128-byte values), and only ever accessed atomically or by the probes.
        unsafe { AtomicU64::from_ptr(self.cursors.ptr.add(at).cast()) }
    }

    /// Every CPU's records written and not read yet, oldest first.
    pub(crate) fn unread(&self) -> Vec<Unread> {
        let head_at = std::mem::offset_of!(SlotCursor, head);
        let tail_at = std::mem::offset_of!(SlotCursor, tail);
        (0..self.cpus)
            .filter_map(|cpu| {
                // Acquire: the record stores come before the head's.
                let head = self.cursor_word(cpu, head_at).load(Ordering::Acquire);
                let tail = self.cursor_word(cpu, tail_at).load(Ordering::Relaxed);
                (head != tail).then_some(Unread { cpu, tail, head })
            })
            .collect()
    }

    /// The whole slot of `cpu`'s `n`th record (the record is at its start). Valid until
    /// [`CpuSlots::release`] passes `n`.
    pub(crate) fn slot(&self, cpu: usize, n: u64) -> &[u8] {
        assert!(cpu < self.cpus);
        let index = cpu as u64 * self.per_cpu + (n & (self.per_cpu - 1));
        // SAFETY: inside the slots' mapping; a slot between tail and head is whole and the
        // probes do not write it again before the tail moves past it.
        unsafe {
            std::slice::from_raw_parts(self.slots.ptr.add(index as usize * SLOT_BYTES), SLOT_BYTES)
        }
    }

    /// Gives `cpu`'s slots below `head` back to the probes.
    pub(crate) fn release(&self, u: Unread) {
        let tail_at = std::mem::offset_of!(SlotCursor, tail);
        // Release: we are done reading the slots before the probes may write them again.
        self.cursor_word(u.cpu, tail_at)
            .store(u.head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slots_per_cpu_stay_within_the_ring_and_bounds() {
        let n = super::slots_per_cpu;
        assert_eq!(n(16 << 20, 2), 16384);
        assert_eq!(n(16 << 20, 64), 1024);
        assert_eq!(n(16 << 20, 1024), 256);
        assert_eq!(n(1 << 20, 1), 4096);
        assert_eq!(n(4096, 1), 256);
    }
}
