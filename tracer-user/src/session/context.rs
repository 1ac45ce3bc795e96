//! The session's state while it traces, and what each record does to it: probing what
//! a new program needs at exec, holding ranks until they load MPI, following forks and
//! exits, telling of lost events.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::funcs::FunctionProbes;
use super::holds::HoldDeadline;
use super::launch::reap;
use super::libraries::probe_libraries;
use super::memory::MemoryLimit;
use super::node_filter::NodeFilter;
use super::openmp::OpenMpProbes;
use super::processes::from_traced_thread;
use super::remote_nodes::RemoteNodes;
use super::sink::Sink;
use super::thread_calls::ThreadCallProbes;
use super::watchdog::Watchdog;
use super::{CommandStatus, EventsSoFar, LossHook, ProbedHook, SampleHook, SessionError};
use crate::probes::{monotonic_ns, one_line, ProbeError, Probes};
use crate::target::libraries::{self, ImportedCalls, LibrarySet, NeededLibraries};
use crate::target::procfs;
use crate::unwind::Unwinders;
use tracer_analysis::calls;
use tracer_analysis::cost::RunsNotOneRecord;
use tracer_analysis::failures::FailureCounts;
use tracer_analysis::openmp::{self as lowering, OpenMpLowering};
use tracer_analysis::records::{self, Record};

pub(super) struct LoopContext {
    pub(super) probes: Probes,
    pub(super) funcs: FunctionProbes,
    pub(super) libs: LibrarySet,
    /// The libraries of the programs seen at exec.
    pub(super) needed: NeededLibraries,
    pub(super) joins: ThreadCallProbes,
    pub(super) locks: Option<ThreadCallProbes>,
    pub(super) openmp: OpenMpProbes,
    /// Turns the OpenMP probes' records into waits before anything reads them.
    pub(super) lowering: OpenMpLowering,
    /// Processes the probes stop after each dlopen ([`LoopContext::hold_until_mpi`]).
    pub(super) held_on_load: HashSet<u32>,
    pub(super) sink: Sink,
    pub(super) child: Option<u32>,
    pub(super) command_status: Option<CommandStatus>,
    pub(super) system_wide: bool,
    pub(super) on_sample: Option<SampleHook>,
    pub(super) on_loss: Option<LossHook>,
    pub(super) on_probed: Option<ProbedHook>,
    /// The kernel's lost-events counter when `on_loss` was last called.
    pub(super) lost_reported: u64,
    /// MPI calls the programs held at exec import and no probe covers: programs each.
    pub(super) unprobed_mpi_calls: BTreeMap<String, u64>,
    /// Told of every process that may be held, to let it go if the tracer dies.
    pub(super) watchdog: Option<Watchdog>,
    /// Lets go the processes held past the hold's deadline.
    pub(super) hold_deadline: Option<HoldDeadline>,
    /// Past it, records are dropped rather than recorded and analyzed.
    pub(super) memory: MemoryLimit,
    /// The probe runs that wrote other than one counted record (the session's cost
    /// counts the others from the summary's records).
    pub(super) runs_not_one_record: RunsNotOneRecord,
    /// Turns the sampler's stack bytes into call stacks.
    pub(super) unwinders: Unwinders,
    /// A collector's agents (`--agent`), whose records join this session's.
    pub(super) remote: Option<RemoteNodes>,
    /// A node of a job across nodes keeps only its own namespace's processes.
    pub(super) node_filter: Option<NodeFilter>,
    /// Ends the session when set (`RecordOptions::stop`).
    pub(super) stop: Option<Arc<AtomicBool>>,
}

impl LoopContext {
    pub(super) fn handle(&mut self, raw: &[u8]) -> Result<(), SessionError> {
        match records::peek_kind(raw)? {
            tracer_common::kind::LIBRARY_LOADED => {
                self.runs_not_one_record.libraries_loaded += 1;
                return self.library_loaded(records::peek_header(raw)?.tgid);
            }
            // The sampler's stack bytes become the SAMPLE record of the stack's return
            // addresses before anything else sees them (docs/sampling.md).
            tracer_common::kind::RAW_SAMPLE => {
                let unwound =
                    self.unwinders
                        .unwind(raw)
                        .ok_or(records::DecodeError::WrongSize {
                            kind: tracer_common::kind::RAW_SAMPLE,
                            got: raw.len(),
                            want: size_of::<tracer_common::RawSampleRecord>(),
                        })?;
                let rec = Record::Sample(Box::new(unwound.sample));
                if unwound.new_code && self.node_filter.as_mut().is_none_or(|f| f.keeps(&rec)) {
                    // The process's snapshot goes before the sample that needs it.
                    self.sink.see_new_code(rec.header().tgid)?;
                }
                return self.handle_record(rec.as_bytes(), &rec);
            }
            _ => {}
        }
        let rec = records::decode(raw)?;
        self.handle_record(raw, &rec)
    }

    /// What a decoded record (`raw`, its bytes) does to the session.
    fn handle_record(&mut self, raw: &[u8], rec: &Record) -> Result<(), SessionError> {
        if let Some(w) = &mut self.watchdog {
            // A new traced thread or process, and an exec the probes hold: the watchdog
            // learns of it before anything here can fail.
            match rec {
                Record::Fork(f) => w.tell(f.child_tid),
                Record::Exec(e) => w.tell(e.header.tgid),
                _ => {}
            }
        }
        if let Record::CallEnter(c) = rec {
            if calls::spec(calls::split_call_field(c.header.call).id)
                .is_some_and(|s| s.role == calls::Role::OmpParallel)
            {
                let parallel_call = calls::split_call_field(c.header.call).id;
                self.openmp
                    .region_started(&mut self.probes, c.header.tgid, parallel_call, c.comm);
            }
        }
        let this_nodes = self.node_filter.as_mut().is_none_or(|f| f.keeps(rec));
        if !this_nodes {
            // Another node's process (on one machine whose nodes are namespaces): it
            // is still probed and let go below; its records are that node's tracer's.
        } else if self.memory.over() {
            // Held and exec'd processes are still probed and let go below; only the
            // record goes.
            self.memory.dropped += 1;
        } else if lowering::concerns(rec) {
            let mut lowered = Vec::with_capacity(2);
            self.lowering.lower(rec, |r| lowered.push(r));
            for r in &lowered {
                self.sink.record(r.as_bytes(), r)?;
            }
        } else {
            self.sink.record(raw, rec)?;
        }
        if let Record::Exec(e) = rec {
            let pid = e.header.tgid;
            // Where a hold's time goes (`RUST_LOG=tracer_user::session=debug`): the exec
            // record's wait to be read, then each step below.
            let read_ns = monotonic_ns().saturating_sub(e.header.ts_ns);
            let started = std::time::Instant::now();
            // Another program: other code at other addresses.
            self.unwinders.forget(pid);
            // The probes stopped the process at exec: probe the MPI/PVM libraries and the
            // procedures the new program needs, then let it run.
            let needs = self.needed.of(pid);
            let (needed, imports) = (&needs.libraries, &needs.imports);
            let found = started.elapsed();
            self.joins.attach_exec(&mut self.probes, pid, needed);
            self.openmp.attach_exec(&mut self.probes, pid, needed);
            if let Some(locks) = &mut self.locks {
                locks.attach_exec(&mut self.probes, pid, needed);
            }
            for name in imports.unprobed() {
                *self.unprobed_mpi_calls.entry(name).or_default() += 1;
            }
            let libs = probe_libraries(
                &mut self.libs,
                &mut self.probes,
                |p| needed.contains(p),
                imports,
            );
            let attached = libs
                .map_err(SessionError::from)
                .and_then(|()| self.funcs.attach_in_process(&mut self.probes, pid));
            self.hold_until_mpi(pid, needed);
            if !self.system_wide {
                self.probes.let_go(pid)?;
            }
            log::debug!(
                "pid {pid} exec: read {:.1} ms after it, libraries found in {:.1} ms, \
                 let go after {:.1} ms more",
                read_ns as f64 / 1e6,
                found.as_secs_f64() * 1e3,
                (started.elapsed() - found).as_secs_f64() * 1e3
            );
            for p in attached? {
                self.sink.probe(&p)?;
            }
        }
        let pid = rec.header().tgid;
        if matches!(rec, Record::Exit(x) if x.group_dead != 0) && self.held_on_load.remove(&pid) {
            // Gone: nothing to hold any more.
            let _ = self.probes.hold_on_load(pid, false);
        }
        if matches!(rec, Record::Exit(x) if x.group_dead != 0) {
            self.unwinders.forget(pid);
            self.funcs.exited(pid);
        } else if self.system_wide && this_nodes && from_traced_thread(rec) {
            // Processes are traced from their first probed call on, also those that
            // started after the session (on an agent's node, the job's ranks): their
            // selected procedures too.
            for p in self.funcs.attach_newly_traced(&mut self.probes, pid)? {
                self.sink.probe(&p)?;
            }
        }
        match rec {
            Record::Exit(x) if x.group_dead != 0 => self.openmp.exited(pid),
            _ if from_traced_thread(rec) => self.openmp.attach_running(&mut self.probes, pid),
            _ => {}
        }
        for calls in std::iter::once(&mut self.joins).chain(self.locks.as_mut()) {
            match rec {
                Record::Exit(x) if x.group_dead != 0 => calls.exited(&mut self.probes, pid),
                // A process forked by a traced one (it runs already: calls before this
                // point are not seen), or one that became traced in system-wide mode.
                _ if from_traced_thread(rec) => calls.attach_running(&mut self.probes, pid),
                _ => {}
            }
        }
        Ok(())
    }

    /// An MPI rank whose program maps no MPI/PVM library when it starts loads one later
    /// with dlopen (Python with mpi4py, R with Rmpi): the probes stop it after each
    /// dlopen until it has one. Only ranks (a launcher put their rank in their
    /// environment): launchers and their daemons never call MPI, and mpirun forwards
    /// each SIGCONT it gets to the whole job, which would let ranks held at their exec
    /// go on unprobed. (System-wide, processes are traced from their first call on and
    /// are never held.)
    fn hold_until_mpi(&mut self, pid: u32, needed: &BTreeSet<PathBuf>) {
        if self.system_wide || self.libs.any_of(needed) || procfs::env_rank(pid).is_none() {
            return;
        }
        let Some(libraries::DlopenSite {
            file: path,
            symbol: dlopen,
        }) = libraries::dlopen_in(needed)
        else {
            return; // a static program cannot dlopen
        };
        let held = self
            .probes
            .attach_load_probe(&path, &dlopen.name, dlopen.file_offset)
            .and_then(|_| self.probes.hold_on_load(pid, true));
        match held {
            Ok(()) => {
                self.held_on_load.insert(pid);
            }
            Err(e) => log::warn!(
                "libraries pid {pid} loads later are not probed: {}",
                one_line(&e)
            ),
        }
    }

    /// Process `pid`, held, returned from dlopen and is stopped: probe the MPI/PVM
    /// libraries (and selected procedures) it maps now, then let it go on. Once it has
    /// an MPI/PVM library it is held no more.
    fn library_loaded(&mut self, pid: u32) -> Result<(), SessionError> {
        let mapped = libraries::mapped_candidates(&[pid]);
        // The calls of a library loaded with dlopen: what its loader imports is not
        // known here (mpi4py's module imports nearly all of MPI anyway).
        let libs = probe_libraries(
            &mut self.libs,
            &mut self.probes,
            |p| mapped.contains(p),
            &ImportedCalls::All,
        );
        let attached = libs
            .map_err(SessionError::from)
            .and_then(|()| self.funcs.attach_in_process(&mut self.probes, pid));
        if self.libs.any_of(&mapped) && self.held_on_load.remove(&pid) {
            let _ = self.probes.hold_on_load(pid, false);
        }
        self.probes.let_go(pid)?;
        for p in attached? {
            self.sink.probe(&p)?;
        }
        Ok(())
    }

    /// How often the probes failed, by reason, with what the tracer counts itself: the
    /// holds let go at their deadline and the records dropped past the memory limit.
    pub(super) fn failures(
        probes: &mut Probes,
        hold_deadline: Option<&HoldDeadline>,
        memory: &MemoryLimit,
    ) -> Result<FailureCounts, ProbeError> {
        let mut failures = probes.failures()?;
        if let Some(d) = hold_deadline {
            failures.add(tracer_common::ProbeFailure::HoldExpired, d.expired());
        }
        failures.add(tracer_common::ProbeFailure::MemoryLimit, memory.dropped);
        Ok(failures)
    }

    /// Records lost so far: those the probes could not write, and those dropped past
    /// the memory limit.
    pub(super) fn lost(&mut self) -> Result<u64, ProbeError> {
        Ok(self.probes.lost()? + self.memory.dropped)
    }

    /// Tells `on_loss` if the probes lost events since it was last told.
    pub(super) fn check_loss(&mut self) -> Result<(), SessionError> {
        if self.on_loss.is_none() {
            return Ok(());
        }
        let lost = self.lost()?;
        let Some(hook) = &mut self.on_loss else {
            return Ok(());
        };
        if lost > self.lost_reported {
            self.lost_reported = lost;
            hook(&EventsSoFar {
                recorded: self.sink.total,
                lost,
            });
        }
        Ok(())
    }

    /// True when no traced process is alive any more (system-wide: when the command the
    /// session launched has ended).
    pub(super) fn targets_gone(&mut self) -> Result<bool, SessionError> {
        if let Some(status) = self.child.and_then(reap) {
            self.command_status = Some(status);
            self.child = None;
        }
        // System-wide, every process is a target: the session ends with the command it
        // launched (`--all -- sleep 1`, as `perf record -a` does), or never.
        if self.system_wide {
            return Ok(self.command_status.is_some());
        }
        // While the command we launched runs, a target is alive: no need to list the
        // traced set, a walk of the probes' 65,536-bucket hash map every tick (4 % of
        // the tracer's time in a futex flood).
        if self.child.is_some() {
            return Ok(false);
        }
        Ok(!self.probes.traced_ids()?.into_iter().any(procfs::is_alive))
    }
}
