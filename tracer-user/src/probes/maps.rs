//! Reading and writing the probes' maps: the traced set, the failure counters (the lost
//! records among them), the ring buffer and the per-CPU slots; looking up maps and
//! programs by name.

use aya::maps::{HashMap, MapData, PerCpuArray, RingBuf};
use aya::Ebpf;
use tracer_analysis::failures::FailureCounts;
use tracer_common::{maps, ProbeFailure, ThreadClock, ThreadState};

use super::{slots, ProbeError, Probes};

impl Probes {
    /// Marks a process (all its threads) as traced. Children it forks from now on are
    /// traced by the probes themselves.
    pub(crate) fn trace_process(&mut self, pid: u32, threads: &[u32]) -> Result<(), ProbeError> {
        let mut traced: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::TRACED)?;
        traced
            .insert(&pid, &1, 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::TRACED,
                source,
            })?;
        let mut states: HashMap<&mut MapData, u32, ThreadState> =
            map(&mut self.ebpf, maps::THREADS)?;
        for &tid in threads {
            let state = ThreadState {
                clock: ThreadClock {
                    tgid: pid,
                    ..Default::default()
                },
                ..Default::default()
            };
            // A thread that already has a state (it ran a probe) keeps it.
            if states.get(&tid, 0).is_err() {
                states
                    .insert(&tid, &state, 0)
                    .map_err(|source| ProbeError::MapOp {
                        name: maps::THREADS,
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// Ids (tgids and thread ids) currently in the traced set.
    pub(crate) fn traced_ids(&mut self) -> Result<Vec<u32>, ProbeError> {
        let traced: HashMap<&mut MapData, u32, u32> = map(&mut self.ebpf, maps::TRACED)?;
        Ok(traced.keys().filter_map(|k| k.ok()).collect())
    }

    /// Records the probes could not write because the ring buffer was full.
    pub(crate) fn lost(&mut self) -> Result<u64, ProbeError> {
        let mut counts = FailureCounts::default();
        self.add_failures(&mut counts, ProbeFailure::RingFull)?;
        Ok(counts.lost())
    }

    /// How often the probes failed, by reason, summed over the CPUs.
    pub(crate) fn failures(&mut self) -> Result<FailureCounts, ProbeError> {
        let mut counts = FailureCounts::default();
        for reason in ProbeFailure::ALL {
            self.add_failures(&mut counts, reason)?;
        }
        Ok(counts)
    }

    /// Adds every CPU's count of `reason` to `counts`.
    fn add_failures(
        &mut self,
        counts: &mut FailureCounts,
        reason: ProbeFailure,
    ) -> Result<(), ProbeError> {
        let counters: PerCpuArray<&mut MapData, u64> = map(&mut self.ebpf, maps::FAILURES)?;
        let per_cpu = counters
            .get(&reason.index(), 0)
            .map_err(|source| ProbeError::MapOp {
                name: maps::FAILURES,
                source,
            })?;
        for &count in per_cpu.iter() {
            counts.add(reason, count);
        }
        Ok(())
    }

    /// Takes the ring buffer (call once).
    pub(crate) fn take_ring(&mut self) -> Result<RingBuf<MapData>, ProbeError> {
        let m = self
            .ebpf
            .take_map(maps::EVENTS)
            .ok_or(ProbeError::Map(maps::EVENTS))?;
        RingBuf::try_from(m).map_err(|_| ProbeError::Map(maps::EVENTS))
    }

    /// Takes the per-CPU slots, mapped into our memory (call once).
    pub(crate) fn take_slots(&mut self) -> Result<slots::CpuSlots, ProbeError> {
        let mut take = |name: &'static str| match self.ebpf.take_map(name) {
            Some(aya::maps::Map::Array(data)) => Ok(data),
            _ => Err(ProbeError::Map(name)),
        };
        let (slot_map, cursor_map) = (take(maps::SLOTS)?, take(maps::CURSORS)?);
        slots::CpuSlots::map(slot_map, cursor_map, self.cpus, self.slots_per_cpu)
    }
}

pub(super) fn map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, ProbeError>
where
    T: TryFrom<&'a mut aya::maps::Map>,
{
    let m = ebpf.map_mut(name).ok_or(ProbeError::Map(name))?;
    T::try_from(m).map_err(|_| ProbeError::Map(name))
}

pub(super) fn program<'a, T>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    let p = ebpf.program_mut(name).ok_or(ProbeError::Program {
        name,
        source: aya::programs::ProgramError::NotLoaded,
    })?;
    p.try_into().map_err(|_| ProbeError::Program {
        name,
        source: aya::programs::ProgramError::NotLoaded,
    })
}
