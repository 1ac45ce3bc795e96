//! The reader: drains the ring buffer and the per-CPU slots in timestamp order until
//! the targets are gone, the deadline passes or a signal comes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::context::LoopContext;
use super::memory::MemoryLimit;
use super::remote_nodes::{RemoteNodes, LAST_BATCH_WAIT};
use super::sink::{Sink, THIS_NODE};
use super::{Probed, SessionError, StopReason, LOSS_CHECK_PERIOD};
use crate::probes::monotonic_ns;
use crate::probes::slots::CpuSlots;
use crate::remote::LinkEvent;
use tracer_analysis::records;

/// Nice value of the thread that reads the buffers (this one, once the command is
/// launched: the command keeps the nice value it would have had) while it is behind.
const READER_NICE: i32 = -10;
/// Behind: a drain found at least this share of the ring unread. The probes write to the
/// ring only what does not fit a CPU's slots (long records, and all records while its
/// slots are full), and wake the reader each time a CPU has written a sixteenth of it.
const BEHIND_FILL: f64 = 1.0 / 16.0;
/// Caught up: every drain for `CALM_TIME` found less than this share unread.
const CALM_FILL: f64 = 1.0 / 64.0;
const CALM_TIME: Duration = Duration::from_secs(1);

/// The reader's priority follows how far behind it is. At its nice value of start it
/// shares a CPU with the ranks as the scheduler's fairness allows; once its drains find
/// the slots overflowing into the ring it goes to `READER_NICE`, so that ranks polling
/// on every CPU cannot starve it (hpcc at 2 ranks on 2 CPUs lost 979,548 of 4.3 million
/// records at the default nice value), and back after a second of drains that found the
/// ring nearly empty. Always at -10, it cost LAMMPS at 4 ranks on 2 CPUs 19 % more time
/// than at its start value (docs/benchmarks.md): woken every 50 ms, it took a rank's
/// CPU at once each time. Linux keeps nice values per thread.
struct ReaderPriority {
    start: i32,
    raised: bool,
    /// Since when every drain found the ring nearly empty, while raised.
    calm_since: Option<Instant>,
}

impl ReaderPriority {
    /// The calling thread's priority, which it keeps until it falls behind.
    fn of_this_thread() -> Self {
        // SAFETY: plain getpriority(2) on the calling thread (`who` 0); -1 is also a
        // valid nice value, and errno is not worth telling apart here.
        let start = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        ReaderPriority::starting_at(start)
    }

    fn starting_at(start: i32) -> Self {
        ReaderPriority {
            start,
            raised: false,
            calm_since: None,
        }
    }

    /// The nice value to set after a drain that found `fill` of the ring unread, if it
    /// changes.
    fn after_drain(&mut self, fill: f64, now: Instant) -> Option<i32> {
        if fill >= BEHIND_FILL {
            self.calm_since = None;
            if !self.raised && self.start > READER_NICE {
                self.raised = true;
                return Some(READER_NICE);
            }
        } else if self.raised && fill < CALM_FILL {
            let since = *self.calm_since.get_or_insert(now);
            if now.duration_since(since) >= CALM_TIME {
                self.raised = false;
                self.calm_since = None;
                return Some(self.start);
            }
        } else {
            self.calm_since = None;
        }
        None
    }

    fn follow(&mut self, fill: f64) {
        let Some(nice) = self.after_drain(fill, Instant::now()) else {
            return;
        };
        // SAFETY: plain setpriority(2) on the calling thread (`who` 0).
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
            log::debug!(
                "reader priority unchanged: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// What the probes wrote since the last drain: the ring's records are copied out (it
/// hands them over one at a time), the slots' are read where they are.
#[derive(Default)]
struct RingCopy {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// What a drain left in the ring.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RingLeft {
    Nothing,
    /// It read a ring's worth and stopped: read again at once.
    More,
}

/// Hands the records the probes have written so far to `ctx`, in timestamp order across
/// the ring and the CPUs' slots (`records::merge_by_time`): all of them, or a ring's
/// worth of the ring's (`RingLeft::More`).
fn drain(
    ring: &mut aya::maps::RingBuf<aya::maps::MapData>,
    slots: &CpuSlots,
    copy: &mut RingCopy,
    ctx: &mut LoopContext,
    priority: &mut ReaderPriority,
    ring_size: u32,
) -> Result<RingLeft, SessionError> {
    // What the probes wrote before now is read by this drain (within the reorder window
    // of the analysis): this node's watermark, for a collector's merge of nodes.
    let read_from = monotonic_ns();
    copy.bytes.clear();
    copy.ends.clear();
    // At most one ring's worth a drain: the probes write on while it reads, and a
    // flood that writes as fast as this loop copies would keep it here, the copy
    // growing, with no signal, deadline or flush seen. What it leaves is read by the
    // next drain, at once.
    let mut left = RingLeft::Nothing;
    while let Some(item) = ring.next() {
        copy.bytes.extend_from_slice(&item);
        copy.ends.push(copy.bytes.len());
        if copy.bytes.len() >= ring_size as usize {
            left = RingLeft::More;
            break;
        }
    }
    // Each ring record had an 8-byte header.
    let ring_bytes = copy.bytes.len() + 8 * copy.ends.len();
    priority.follow(ring_bytes as f64 / ring_size as f64);
    let unread = slots.unread();
    let mut streams: Vec<Box<dyn Iterator<Item = &[u8]>>> = Vec::with_capacity(unread.len() + 1);
    let bytes = &copy.bytes;
    streams.push(Box::new(
        std::iter::once(0)
            .chain(copy.ends.iter().copied())
            .zip(copy.ends.iter().copied())
            .map(move |(start, end)| &bytes[start..end]),
    ));
    for u in &unread {
        streams.push(Box::new(
            (u.tail..u.head).map(move |n| records::in_slot(slots.slot(u.cpu, n))),
        ));
    }
    records::merge_by_time(streams, |raw| {
        // One run of the switch program wrote both records (the session's cost).
        if records::peek_kind(raw).ok() == Some(tracer_common::kind::SWITCH_PAIR) {
            ctx.runs_not_one_record.switch_pairs += 1;
        }
        records::unpair(raw, |r| ctx.handle(r))
    })?;
    for u in unread {
        slots.release(u);
    }
    ctx.sink.node_read_up_to(THIS_NODE, read_from);
    ctx.sink.release(false)?;
    Ok(left)
}

/// The session's event loop stage: runs [`event_loop`] on a single-threaded runtime,
/// started only now that the synchronous set-up (the fork of a launched command among
/// it) is done.
pub(super) fn run(
    ctx: &mut LoopContext,
    duration: Option<Duration>,
    interval: Option<Duration>,
) -> Result<StopReason, SessionError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut priority = ReaderPriority::of_this_thread();
    runtime.block_on(event_loop(ctx, &mut priority, duration, interval))
}

async fn event_loop(
    ctx: &mut LoopContext,
    priority: &mut ReaderPriority,
    duration: Option<Duration>,
    interval: Option<Duration>,
) -> Result<StopReason, SessionError> {
    let ring_size = ctx.probes.ring_bytes();
    let ring = ctx.probes.take_ring()?;
    let slots = ctx.probes.take_slots()?;
    let mut copy = RingCopy::default();
    // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the
    // AsyncFd is dropped at the end of this function.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| SessionError::Io(e.into()))?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    // A child of ours ended (the launched command, or a helper): the tick's checks run
    // now rather than up to a tick later, so that a session ends as its command does.
    let mut sigchld = signal(SignalKind::child())?;
    // The probes wake us only when the ring fills up; the tick drains it, and the slots,
    // regularly.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::from_secs(u64::MAX / 4)));
    tokio::pin!(deadline);
    let mut samples = tokio::time::interval(interval.unwrap_or(Duration::from_secs(3600)));
    samples.tick().await;
    let mut loss_checks = tokio::time::interval(LOSS_CHECK_PERIOD);
    loss_checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loss_checks.tick().await;
    let watch_loss = ctx.on_loss.is_some();
    let mut links_open = ctx.remote.is_some();
    // Before the first record: a tracer over its limit from the start keeps none.
    ctx.memory.check();
    let stop = loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                let left = drain(guard.get_inner_mut(), &slots, &mut copy, ctx, priority, ring_size)?;
                if left == RingLeft::Nothing {
                    guard.clear_ready();
                }
            }
            _ = tick.tick() => {
                // Drain first: a fork or exec still in the ring may add targets.
                drain(ring.get_mut(), &slots, &mut copy, ctx, priority, ring_size)?;
                // A tracer killed now leaves a recording at most a second behind.
                ctx.memory.check();
                let (probes, deadline) = (&mut ctx.probes, ctx.hold_deadline.as_ref());
                let memory = &ctx.memory;
                ctx.sink
                    .flush_if_due(|| LoopContext::failures(probes, deadline, memory))?;
                if let Some(remote) = &mut ctx.remote {
                    // Known once a process of the job showed it (within a tick).
                    remote.tell_job(ctx.sink.job.as_deref());
                }
                if ctx.targets_gone()? {
                    break StopReason::TargetsExited;
                }
                if ctx.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                    break StopReason::Requested;
                }
            }
            _ = samples.tick(), if interval.is_some() => {
                drain(ring.get_mut(), &slots, &mut copy, ctx, priority, ring_size)?;
                let lost = ctx.lost()?;
                if let (Some(profile), Some(hook)) = (ctx.sink.profile(lost), &mut ctx.on_sample) {
                    hook(&profile);
                }
                if let Some(hook) = &mut ctx.on_probed {
                    hook(&Probed {
                        probes: ctx.probes.probe_count(),
                        libraries: ctx.libs.probed().len(),
                    });
                }
            }
            _ = loss_checks.tick(), if watch_loss => ctx.check_loss()?,
            event = next_remote(&mut ctx.remote), if links_open => match event {
                Some(event) => {
                    let remote = ctx.remote.as_mut().expect("links_open: a collector");
                    remote.take(event, &mut ctx.sink, &mut ctx.memory)?;
                }
                None => links_open = false,
            },
            _ = sigchld.recv() => tick.reset_immediately(),
            _ = sigint.recv() => break StopReason::Interrupted,
            _ = sigterm.recv() => break StopReason::Terminated,
            _ = &mut deadline, if duration.is_some() => break StopReason::Deadline,
        }
    };
    drain(ring.get_mut(), &slots, &mut copy, ctx, priority, ring_size)?;
    // This node has sent everything: the other nodes' last records need not wait for it.
    ctx.sink.node_closed(THIS_NODE);
    if let Some(remote) = &mut ctx.remote {
        last_batches(
            remote,
            &mut ctx.sink,
            &mut ctx.memory,
            &mut sigint,
            &mut sigterm,
        )
        .await?;
    }
    // Losses not told yet (the targets may end within a second of them) are told now,
    // while recording, as every other loss was.
    if watch_loss {
        ctx.check_loss()?;
    }
    Ok(stop)
}

/// The next event of a collector's links; never, without a collector.
async fn next_remote(remote: &mut Option<RemoteNodes>) -> Option<LinkEvent> {
    match remote {
        Some(r) => r.next_event().await,
        None => std::future::pending().await,
    }
}

/// Asks the agents to stop and takes what they send until their last batches, for at
/// most `LAST_BATCH_WAIT` (a signal ends the wait at once); a node still silent then is
/// lost.
async fn last_batches(
    remote: &mut RemoteNodes,
    sink: &mut Sink,
    memory: &mut MemoryLimit,
    sigint: &mut Signal,
    sigterm: &mut Signal,
) -> Result<(), SessionError> {
    remote.stop();
    let wait = tokio::time::sleep(LAST_BATCH_WAIT);
    tokio::pin!(wait);
    let mut signalled = false;
    while !remote.all_done() {
        tokio::select! {
            event = remote.next_event() => match event {
                Some(event) => remote.take(event, sink, memory)?,
                None => break,
            },
            _ = &mut wait => break,
            _ = sigint.recv() => { signalled = true; break }
            _ = sigterm.recv() => { signalled = true; break }
        }
    }
    remote.give_up_on_the_rest(sink);
    // Pings to nodes that all answered are quick; a signal wants the session over.
    if !signalled && remote.all_ended() {
        remote.tell_clocks();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{ReaderPriority, READER_NICE};
    use std::time::{Duration, Instant};

    #[test]
    fn the_reader_rises_when_behind_and_returns_after_a_calm_second() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut p = ReaderPriority::starting_at(0);
        assert_eq!(
            p.after_drain(0.05, at(0)),
            None,
            "keeping up at its own value"
        );
        assert_eq!(
            p.after_drain(1.0 / 16.0, at(50)),
            Some(READER_NICE),
            "behind"
        );
        assert_eq!(p.after_drain(0.9, at(60)), None, "raised already");
        assert_eq!(p.after_drain(0.01, at(100)), None, "calm from here");
        assert_eq!(p.after_drain(0.01, at(1050)), None);
        // A drain that found more than a 64th starts the count again.
        assert_eq!(p.after_drain(0.02, at(1060)), None);
        assert_eq!(p.after_drain(0.0, at(1100)), None);
        assert_eq!(p.after_drain(0.0, at(2099)), None);
        assert_eq!(p.after_drain(0.0, at(2100)), Some(0), "a calm second: back");
        assert_eq!(p.after_drain(0.5, at(2150)), Some(READER_NICE));
    }

    #[test]
    fn a_reader_started_above_the_raised_priority_stays_there() {
        let mut p = ReaderPriority::starting_at(READER_NICE - 5);
        for fill in [0.0, 1.0, 0.0] {
            assert_eq!(p.after_drain(fill, Instant::now()), None);
        }
    }
}
