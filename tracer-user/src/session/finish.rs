//! The session's last stage: the outputs written, the command given a moment to end,
//! then the probes detached.

use std::path::Path;
use std::time::{Duration, Instant};

use tracer_analysis::cost::{CostInputs, ProbeCounts, RunCost};

use super::context::LoopContext;
use super::detach::Detacher;
use super::launch::{interrupt_group, reap_unless_interrupted, reap_within, COMMAND_GRACE};
use super::output::write_private;
use super::sink::SinkResults;
use super::{
    CommandTerminal, Detaching, RecordOptions, RecordOutcome, RunAs, SessionError, StopReason,
};
use crate::probes::{one_line, Probes};

/// Ends a session the event loop stopped for `stop`; it `started` then.
pub(super) fn finish(
    ctx: LoopContext,
    stop: StopReason,
    opts: RecordOptions,
    started: Instant,
) -> Result<RecordOutcome, SessionError> {
    let LoopContext {
        mut probes,
        funcs,
        libs,
        locks,
        sink,
        mut command_status,
        child,
        unprobed_mpi_calls,
        watchdog,
        hold_deadline,
        memory,
        runs_not_one_record,
        remote,
        ..
    } = ctx;
    let mut failures = LoopContext::failures(&mut probes, hold_deadline.as_ref(), &memory)?;
    if let Some(remote) = &remote {
        remote.add_counts(&mut failures);
        failures.add(tracer_common::ProbeFailure::NodeLate, sink.late_records());
    }
    // Read as tracing stops: the probes still fire until they are detached, and the
    // analysis after tracing may take a while. The kernel's counts only with
    // `--bpf-stats`; else, or if they cannot be had, the records' (below).
    let counted_ns = probes.counted_ns();
    let kernel_counts = probes.kernel_run_counts().unwrap_or_else(|e| {
        log::warn!(
            "the kernel's BPF statistics could not be read; the session's cost counts the \
             probes' records instead: {}",
            one_line(&e)
        );
        None
    });
    // Tracing has stopped and the records are read: the probes go now, on a thread of
    // their own while the outputs are written, because the kernel takes its time (0.2 s
    // for the futex tracepoints' links alone, one grace period after another).
    let detacher = locks.and_then(|l| l.detacher);
    let to_detach = Detaching {
        probes: probes.probe_count(),
        kernel_links: probes.link_count(),
    };
    let unloading = Unloading::start(probes);
    let SinkResults {
        mut summary,
        profile,
        whatif,
    } = sink.finish(&failures)?;
    summary.tracer_cpu_ns = own_cpu_ns();
    let probe_counts = kernel_counts.unwrap_or_else(|| {
        ProbeCounts::from_records(&summary.events.by_kind, runs_not_one_record, counted_ns)
    });
    summary.cost = Some(RunCost::new(&CostInputs {
        probes: probe_counts,
        program_cpu_ns: profile.traced_cpu_ns,
        tracer_cpu_ns: summary.tracer_cpu_ns.unwrap_or(0),
        session_ns: started.elapsed().as_nanos() as u64,
    }));
    summary.unprobed_mpi_calls = Some(unprobed_mpi_calls);
    let owner = opts.run_as.as_ref();
    write_json(opts.summary_json.as_deref(), &summary, owner)?;
    write_json(opts.profile_json.as_deref(), &profile, owner)?;
    // Tracing stopped before the command ended. From a terminal, Ctrl-C reaches the
    // command too: give it a moment to end, so that its status is the tracer's (as
    // `time` does); one that takes longer (mpirun ends its ranks first) is waited for
    // once the probes are gone, below. A command away from the terminal gets the Ctrl-C
    // from us. At the deadline it runs on.
    let mut wait_for = None;
    if let (None, Some(child)) = (command_status, child) {
        let detached = matches!(opts.command_terminal, CommandTerminal::Detached { .. });
        if detached && matches!(stop, StopReason::Interrupted | StopReason::Terminated) {
            interrupt_group(child);
        }
        let grace = match stop {
            StopReason::Interrupted | StopReason::Terminated => COMMAND_GRACE,
            StopReason::Deadline | StopReason::TargetsExited | StopReason::Requested => {
                Duration::ZERO
            }
        };
        command_status = reap_within(child, grace);
        if command_status.is_none() && stop == StopReason::Interrupted {
            wait_for = Some(child);
        }
    }
    if let Some(detaching) = opts.on_detach {
        let pending = detacher.as_ref().map(Detacher::pending).unwrap_or_default();
        detaching(Detaching {
            probes: to_detach.probes + pending.probes,
            kernel_links: to_detach.kernel_links + pending.kernel_links,
        });
    }
    unloading.finish();
    // No hold can come any more (the watchdog lets go one made during the detaching).
    drop(hold_deadline);
    if let Some(d) = detacher {
        d.finish();
    }
    if let Some(w) = watchdog {
        w.finish();
    }
    // Nothing is probed or held any more: the wait harms nothing, and a second Ctrl-C
    // (or SIGTERM) ends it.
    if let Some(child) = wait_for {
        if let Some(waiting) = opts.on_command_wait {
            waiting(child);
        }
        command_status = reap_unless_interrupted(child)?;
    }
    Ok(RecordOutcome {
        summary,
        profile,
        whatif,
        stop,
        command_status,
        unmatched_funcs: funcs.unmatched(),
        libraries: libs.probed(),
    })
}

/// The probes being detached and unloaded, on a thread of their own.
struct Unloading {
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Unloading {
    fn start(probes: Probes) -> Unloading {
        // A thread that cannot start drops its closure, and the probes with it, here.
        let thread = std::thread::Builder::new()
            .name("tracer-unload".into())
            .spawn(move || drop(probes))
            .ok();
        Unloading { thread }
    }

    /// Waits until every probe is detached and every program unloaded.
    fn finish(self) {
        if let Some(t) = self.thread {
            let _ = t.join();
        }
    }
}

/// The tracer's own CPU time so far (all its threads, not its children).
fn own_cpu_ns() -> Option<u64> {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Some(ns(u.ru_utime) + ns(u.ru_stime))
}

fn write_json<T: serde::Serialize>(
    path: Option<&Path>,
    value: &T,
    owner: Option<&RunAs>,
) -> Result<(), SessionError> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        write_private(path, (json + "\n").as_bytes(), owner).map_err(|source| {
            SessionError::WriteJson {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}
