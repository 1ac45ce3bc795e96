//! The session from start to end, stage by stage: the targets (`targets`), the probes
//! (`probing`), the sink and its consumers (`sink`, `consumers/`), tracing started
//! (here), the event loop (`event_loop`), the outputs and the detaching (`finish`).

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use super::context::LoopContext;
use super::event_loop;
use super::finish::finish;
use super::holds::HoldDeadline;
use super::launch::launch;
use super::memory::MemoryLimit;
use super::node_filter::NodeFilter;
use super::probing::{command_executables, Probing};
use super::remote_nodes::RemoteNodes;
use super::sink::Sink;
use super::targets::Targets;
use super::{NodeRole, Ready, RecordOptions, RecordOutcome, SessionError};
use crate::remote::TraceRequest;
use crate::target::procfs;
use crate::unwind::Unwinders;
use tracer_analysis::cost::RunsNotOneRecord;
use tracer_analysis::openmp::OpenMpLowering;

/// Runs a whole session. Synchronous set-up (including the fork of a launched command)
/// happens before the single-threaded runtime starts.
pub fn record(mut opts: RecordOptions) -> Result<RecordOutcome, SessionError> {
    let started = Instant::now();
    let role = std::mem::replace(&mut opts.node_role, NodeRole::Alone);
    let targets = Targets::find(&opts)?;
    // The agents start tracing before the probes here are attached: by the time this
    // session launches its command, the ranks it starts on other nodes are traced.
    let (remote, stream) = match role {
        NodeRole::Alone => (None, None),
        NodeRole::Collector(collecting) => {
            let request = TraceRequest {
                every_process: opts.system_wide,
                sample_hz: opts.sample_hz,
                buffer_mib: opts.ring_mib,
                funcs: opts.funcs.clone(),
                func_files: targets
                    .program
                    .as_deref()
                    .and_then(|p| command_executables(p, &opts.command[1..]))
                    .unwrap_or_default()
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect(),
            };
            (Some(RemoteNodes::connect(&collecting, &request)?), None)
        }
        NodeRole::Agent(to) => (None, Some(to)),
    };
    // A node of a job across nodes keeps its own namespace's processes; an agent asked
    // for the collector's job, only those that start from now on.
    let node_filter = if remote.is_some() || stream.is_some() {
        let filter = NodeFilter::of_this_tracer()?;
        Some(match &stream {
            Some(to) if to.new_processes_only => {
                filter.started_from_now_on().of_job(to.job.clone())
            }
            _ => filter,
        })
    } else {
        None
    };
    let probing = Probing::attach(&opts, &targets)?;
    let whatif = opts.whatif.take();
    let other_nodes = remote
        .as_ref()
        .map(RemoteNodes::node_infos)
        .unwrap_or_default();
    let sink = Sink::open(&opts, whatif, &targets, &probing, &other_nodes, stream)?;
    let mut ctx = start_tracing(&mut opts, targets, probing, sink)?;
    ctx.remote = remote;
    ctx.node_filter = node_filter;
    let stop = event_loop::run(&mut ctx, opts.duration, opts.interval)?;
    let u = &ctx.unwinders;
    if u.unwound > 0 {
        // The figures of docs/sampling.md ("Cost", "Memory"): `RUST_LOG=debug`.
        log::debug!(
            "unwinder: {} samples, {:.1} us each, {} KiB of unwind tables held at the end",
            u.unwound,
            u.unwind_ns as f64 / 1e3 / u.unwound as f64,
            u.held_bytes() >> 10
        );
    }
    finish(ctx, stop, opts, started)
}

/// The stage between the sink and the event loop: the running targets traced (then
/// looked at, so that an exec after the look is seen), the command launched, every
/// process held so far given its deadline.
fn start_tracing(
    opts: &mut RecordOptions,
    targets: Targets,
    probing: Probing,
    mut sink: Sink,
) -> Result<LoopContext, SessionError> {
    let Targets {
        system_wide,
        running,
        program,
        mut watchdog,
    } = targets;
    let Probing {
        mut probes,
        needed,
        libs,
        funcs,
        joins,
        locks,
        openmp,
        attached_functions: _,
    } = probing;
    for &pid in &running {
        probes.trace_process(pid, &procfs::threads_of(pid))?;
        sink.see_process(pid)?;
    }
    let child = match program {
        Some(program) => Some(launch(
            &program,
            &opts.command,
            &opts.command_terminal,
            opts.run_as.as_ref(),
            &mut probes,
            watchdog.as_mut(),
        )?),
        None => None,
    };
    if let Some(ready) = opts.on_ready.take() {
        ready(&Ready {
            libraries: libs.probed().len(),
            probes: probes.probe_count(),
            links: probes.link_kind(),
            processes: running.len() + child.is_some() as usize,
        });
    }
    let hold_deadline = if system_wide {
        None
    } else {
        Some(HoldDeadline::start(probes.held_processes()?)?)
    };
    Ok(LoopContext {
        probes,
        funcs,
        libs,
        needed,
        joins,
        locks,
        openmp,
        lowering: OpenMpLowering::default(),
        held_on_load: HashSet::new(),
        sink,
        child,
        command_status: None,
        system_wide,
        on_sample: opts.on_sample.take(),
        on_loss: opts.on_loss.take(),
        on_probed: opts.on_probed.take(),
        lost_reported: 0,
        unprobed_mpi_calls: BTreeMap::new(),
        watchdog,
        hold_deadline,
        memory: MemoryLimit::new(opts.memory_limit_bytes),
        runs_not_one_record: RunsNotOneRecord::default(),
        unwinders: Unwinders::default(),
        remote: None,
        node_filter: None,
        stop: opts.stop.take(),
    })
}
