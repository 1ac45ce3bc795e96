//! Every traced process's unwinder, and the files they share; what turns a RAW_SAMPLE
//! into a SAMPLE.

use std::collections::HashMap;
use std::mem::offset_of;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tracer_analysis::records;
use tracer_common::{kind, unwind_end, RawSampleRecord, SampleRecord, SAMPLE_STACK_BYTES};

use super::files::FileUnwindInfo;
use super::process::{read_mappings, FileCache, ProcessUnwinder, Unwound, UserState};

/// The unwinders of the traced processes that were sampled, by process id. A process's
/// goes when it exits or execs (`forget`); a file's unwind tables go when no process
/// left maps it. Memory: per process its module list and framehop's rule cache (a few
/// KiB); per file mapped by a live sampled process its `.eh_frame` and `.eh_frame_hdr`
/// (docs/sampling.md, "Memory").
#[derive(Default)]
pub(crate) struct Unwinders {
    processes: HashMap<u32, ProcessUnwinder>,
    files: FileCache,
    /// Samples unwound and the time it took, for docs/sampling.md's figures (logged at
    /// debug level when the session ends).
    pub(crate) unwound: u64,
    pub(crate) unwind_ns: u64,
}

/// A SAMPLE record, and whether unwinding it found code the process had not mapped when
/// its mappings were last read (its first sample, a library loaded since).
pub(crate) struct UnwoundSample {
    pub(crate) sample: SampleRecord,
    pub(crate) new_code: bool,
}

impl Unwinders {
    /// The SAMPLE record a RAW_SAMPLE record (`raw`, its bytes as the ring holds them)
    /// stands for; None if `raw` is not a whole RAW_SAMPLE.
    pub(crate) fn unwind(&mut self, raw: &[u8]) -> Option<UnwoundSample> {
        if raw.len() != size_of::<RawSampleRecord>() {
            return None;
        }
        let started = Instant::now();
        let header = records::peek_header(raw).ok()?;
        let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().unwrap_or([0; 8]));
        let stack_len = u32::from_le_bytes(
            raw[offset_of!(RawSampleRecord, stack_len)..][..4]
                .try_into()
                .unwrap_or([0; 4]),
        );
        let stack_at = offset_of!(RawSampleRecord, stack);
        let state = UserState {
            ip: word(offset_of!(RawSampleRecord, ip)),
            sp: word(offset_of!(RawSampleRecord, sp)),
            bp: word(offset_of!(RawSampleRecord, bp)),
            stack: &raw[stack_at..stack_at + (stack_len as usize).min(SAMPLE_STACK_BYTES)],
        };
        let mut sample = SampleRecord {
            header,
            stack_bytes: stack_len,
            ..SampleRecord::default()
        };
        sample.header.kind = kind::SAMPLE;
        sample.header.call = 0;
        if stack_len == 0 {
            // The probe could not read the registers or the stack: `end` stays
            // NO_USER_STATE, no frames.
            return Some(UnwoundSample {
                sample,
                new_code: false,
            });
        }
        let (unwound, new_code) = self.unwind_in(header.tgid, header.ts_ns, &state);
        sample.depth = unwound.frames.len() as u16;
        sample.end = unwound.end;
        sample.frames[..unwound.frames.len()].copy_from_slice(&unwound.frames);
        self.unwound += 1;
        self.unwind_ns += started.elapsed().as_nanos() as u64;
        Some(UnwoundSample { sample, new_code })
    }

    /// The stack unwound in process `pid`, sampled at `taken_ns`, and whether the
    /// mappings were read again and held new code.
    fn unwind_in(&mut self, pid: u32, taken_ns: u64, state: &UserState<'_>) -> (Unwound, bool) {
        let now = Instant::now();
        let files = &mut self.files;
        let process = self
            .processes
            .entry(pid)
            .or_insert_with(ProcessUnwinder::new);
        let mut file_of = |path: &PathBuf| {
            files
                .entry(path.clone())
                .or_insert_with(|| match FileUnwindInfo::read(path) {
                    Ok(f) => Some(Arc::new(f)),
                    Err(e) => {
                        log::debug!("no unwind tables from {}: {e}", path.display());
                        None
                    }
                })
                .clone()
        };
        let modules_before = process.module_count();
        if !process.knows(state.ip) && process.may_reread(state.ip, taken_ns, now) {
            process.add_mappings(now, read_mappings(pid), &mut file_of);
        }
        let unwound = process.unwind(state);
        let stopped_outside = match unwound.frames.last() {
            Some(&a) if unwound.end == unwind_end::NO_UNWIND_INFO && !process.knows(a) => Some(a),
            _ => None,
        };
        if stopped_outside.is_some_and(|a| process.may_reread(a, taken_ns, now)) {
            // A library loaded since the mappings were read: read them again, and if
            // that found new code, unwind again.
            let before = process.module_count();
            process.add_mappings(now, read_mappings(pid), &mut file_of);
            if process.module_count() > before {
                return (process.unwind(state), true);
            }
        }
        (unwound, process.module_count() > modules_before)
    }

    /// Forgets process `pid` (it exited, or exec'd another program), and the unwind
    /// tables of files no process maps any more.
    pub(crate) fn forget(&mut self, pid: u32) {
        if self.processes.remove(&pid).is_none() {
            return;
        }
        self.files
            .retain(|_, f| f.as_ref().is_none_or(|f| Arc::strong_count(f) > 1));
    }

    /// Bytes of unwind tables held now.
    pub(crate) fn held_bytes(&self) -> usize {
        self.files.values().flatten().map(|f| f.held_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hint::black_box;
    use tracer_common::EventHeader;

    /// This thread's registers, taken inside `capture`, and its stack bytes from the
    /// stack pointer up, as the probe copies them: at most 16 KiB, not past `stack_end`
    /// (the end of the stack's mapping). Nothing but the copy between the two, so the
    /// frames above the stack pointer are as they were.
    #[inline(never)]
    fn capture(raw: &mut RawSampleRecord, stack_end: u64) {
        let (ip, sp, bp): (u64, u64, u64);
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
            );
        }
        let len = (stack_end - sp).min(SAMPLE_STACK_BYTES as u64) as usize;
        // SAFETY: `len` bytes from sp up are this thread's stack, inside its mapping.
        unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, raw.stack.as_mut_ptr(), len) };
        (raw.ip, raw.sp, raw.bp, raw.stack_len) = (ip, sp, bp, len as u32);
    }

    /// A RAW_SAMPLE of this thread taken in `capture`, called from here.
    #[inline(never)]
    fn sample_here() -> Box<RawSampleRecord> {
        // Built on the heap: a 16 KiB record built on the stack first (as a debug build
        // does) would push this frame's return address out of the 16 KiB copied.
        // SAFETY: every field of the record is an integer, for which zeros are valid.
        let mut raw: Box<RawSampleRecord> = unsafe { Box::new_zeroed().assume_init() };
        raw.header.kind = kind::RAW_SAMPLE;
        (raw.header.tgid, raw.header.tid) = (std::process::id(), std::process::id());
        let here = &raw as *const _ as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let stack_end = maps
            .lines()
            .filter_map(|l| {
                let (s, e) = l.split_whitespace().next()?.split_once('-')?;
                Some(u64::from_str_radix(s, 16).ok()?..u64::from_str_radix(e, 16).ok()?)
            })
            .find(|r| r.contains(&here))
            .unwrap()
            .end;
        capture(&mut raw, stack_end);
        raw
    }

    #[inline(never)]
    fn level_b() -> Box<RawSampleRecord> {
        black_box(sample_here())
    }

    #[inline(never)]
    fn level_a() -> Box<RawSampleRecord> {
        black_box(level_b())
    }

    /// Unwinding this very thread's stack, captured as the probe would: the frames start
    /// at the captured instruction and go through sample_here, level_b and then level_a,
    /// each return address a little past its function's start.
    #[test]
    fn unwinds_this_threads_own_stack() {
        let raw = level_a();
        let bytes = unsafe {
            std::slice::from_raw_parts(
                &*raw as *const RawSampleRecord as *const u8,
                size_of::<RawSampleRecord>(),
            )
        };
        let mut unwinders = Unwinders::default();
        let unwound = unwinders.unwind(bytes).expect("a whole RAW_SAMPLE");
        assert!(unwound.new_code, "the first sample reads the mappings");
        let s = unwound.sample;
        assert_eq!(s.header.kind, kind::SAMPLE);
        assert_eq!(s.stack_bytes, raw.stack_len);
        assert_eq!(s.frames[0], raw.ip);
        // The 16 KiB may end before the test harness's outermost frames do.
        assert!(
            [unwind_end::COMPLETE, unwind_end::STACK_END].contains(&s.end),
            "end {}: {:x?}",
            s.end,
            &s.frames[..usize::from(s.depth)]
        );
        let frames = &s.frames[..usize::from(s.depth)];
        let within = |f: fn() -> Box<RawSampleRecord>, addr: u64| {
            let start = f as usize as u64;
            addr > start && addr < start + 4096
        };
        let b = frames
            .iter()
            .position(|&a| within(level_b, a))
            .unwrap_or_else(|| panic!("no level_b in {frames:x?}"));
        assert!(
            frames[b + 1..].iter().any(|&a| within(level_a, a)),
            "level_a after level_b: {frames:x?}"
        );
        // Forgetting the process drops what only it used.
        unwinders.forget(std::process::id());
        assert_eq!(unwinders.held_bytes(), 0);
    }

    #[test]
    fn a_sample_without_user_state_has_no_frames() {
        let raw = RawSampleRecord {
            header: EventHeader {
                kind: kind::RAW_SAMPLE,
                tgid: 7,
                tid: 8,
                ..Default::default()
            },
            ip: 0,
            sp: 0,
            bp: 0,
            stack_len: 0,
            _reserved: 0,
            stack: [0; SAMPLE_STACK_BYTES],
        };
        let bytes = unsafe {
            std::slice::from_raw_parts(
                &raw as *const RawSampleRecord as *const u8,
                size_of::<RawSampleRecord>(),
            )
        };
        let mut unwinders = Unwinders::default();
        let s = unwinders.unwind(bytes).unwrap().sample;
        assert_eq!(
            (s.depth, s.end, s.header.tid),
            (0, unwind_end::NO_USER_STATE, 8)
        );
        assert!(unwinders.unwind(&bytes[..100]).is_none());
    }
}
