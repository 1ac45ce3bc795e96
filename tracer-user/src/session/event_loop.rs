//! The reader: drains the ring buffer and the per-CPU slots in timestamp order until
//! the targets are gone, the deadline passes or a signal comes.

use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, SignalKind};

use super::context::LoopContext;
use super::{SessionError, StopReason, LOSS_CHECK_PERIOD};
use crate::probes::slots::CpuSlots;
use tracer_analysis::format::records;

/// Nice value of the thread that reads the buffers (this one, once the command is
/// launched: the command keeps the nice value it would have had).
const READER_NICE: i32 = -10;

/// Lets the reader drain the buffers when the traced program keeps every CPU busy (ranks
/// that poll while they wait): at the default nice value it got its share of a CPU
/// among them and fell behind (hpcc on 2 CPUs: 979,548 of 4.3 million records lost with
/// the default buffers; none at -10). It sleeps while the buffers fill, so the program
/// loses only the time the reader needs anyway. Linux keeps nice values per thread.
pub(super) fn raise_reader_priority() {
    // SAFETY: plain setpriority(2) on the calling thread (`who` 0).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, READER_NICE) } != 0 {
        log::debug!(
            "reader priority unchanged: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// What the probes wrote since the last drain: the ring's records are copied out (it
/// hands them over one at a time), the slots' are read where they are.
#[derive(Default)]
struct RingCopy {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// Hands every record the probes have written so far to `ctx`, in timestamp order across
/// the ring and the CPUs' slots (`records::merge_by_time`).
fn drain(
    ring: &mut aya::maps::RingBuf<aya::maps::MapData>,
    slots: &CpuSlots,
    copy: &mut RingCopy,
    ctx: &mut LoopContext,
) -> Result<(), SessionError> {
    copy.bytes.clear();
    copy.ends.clear();
    while let Some(item) = ring.next() {
        copy.bytes.extend_from_slice(&item);
        copy.ends.push(copy.bytes.len());
    }
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
    records::merge_by_time(streams, |raw| records::unpair(raw, |r| ctx.handle(r)))?;
    for u in unread {
        slots.release(u);
    }
    Ok(())
}

pub(super) async fn event_loop(
    ctx: &mut LoopContext,
    duration: Option<Duration>,
    interval: Option<Duration>,
) -> Result<StopReason, SessionError> {
    let ring = ctx.probes.take_ring()?;
    let slots = ctx.probes.take_slots()?;
    let mut copy = RingCopy::default();
    // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the
    // AsyncFd is dropped at the end of this function.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| SessionError::Io(e.into()))?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
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
    let stop = loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                drain(guard.get_inner_mut(), &slots, &mut copy, ctx)?;
                guard.clear_ready();
            }
            _ = tick.tick() => {
                // Drain first: a fork or exec still in the ring may add targets.
                drain(ring.get_mut(), &slots, &mut copy, ctx)?;
                // A tracer killed now leaves a recording at most a second behind.
                let probes = &mut ctx.probes;
                ctx.sink.flush_if_due(|| probes.failures())?;
                if !ctx.system_wide && ctx.targets_gone()? {
                    break StopReason::TargetsExited;
                }
            }
            _ = samples.tick(), if interval.is_some() => {
                drain(ring.get_mut(), &slots, &mut copy, ctx)?;
                let lost = ctx.probes.lost()?;
                let profile = ctx.sink.profile(lost);
                if let Some(hook) = &mut ctx.on_sample {
                    hook(&profile);
                }
            }
            _ = loss_checks.tick(), if watch_loss => ctx.check_loss()?,
            _ = sigint.recv() => break StopReason::Signal,
            _ = sigterm.recv() => break StopReason::Signal,
            _ = &mut deadline, if duration.is_some() => break StopReason::Deadline,
        }
    };
    drain(ring.get_mut(), &slots, &mut copy, ctx)?;
    Ok(stop)
}
