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
use super::process::{code_mappings, FileCache, ProcessUnwinder, Unwound, UserState};

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
        let (unwound, new_code) = self.unwind_in(header.tgid, &state);
        sample.depth = unwound.frames.len() as u16;
        sample.end = unwound.end;
        sample.frames[..unwound.frames.len()].copy_from_slice(&unwound.frames);
        self.unwound += 1;
        self.unwind_ns += started.elapsed().as_nanos() as u64;
        Some(UnwoundSample { sample, new_code })
    }

    /// The stack unwound in process `pid`, and whether the mappings were read again and
    /// held new code.
    fn unwind_in(&mut self, pid: u32, state: &UserState<'_>) -> (Unwound, bool) {
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
        if !process.knows(state.ip) && process.may_reread(now) {
            process.add_mappings(now, &code_mappings(pid), &mut file_of);
        }
        let unwound = process.unwind(state);
        let stopped_outside = unwound.end == unwind_end::NO_UNWIND_INFO
            && unwound.frames.last().is_some_and(|&a| !process.knows(a));
        if stopped_outside && process.may_reread(now) {
            // A library loaded since the mappings were read: read them again, and if
            // that found new code, unwind again.
            let before = process.module_count();
            process.add_mappings(now, &code_mappings(pid), &mut file_of);
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
