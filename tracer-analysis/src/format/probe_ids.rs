//! One numbering of the selected procedures for records of several nodes, which each
//! number their own from 1: the same procedure (symbol, binary and address) gets one id
//! whichever nodes probed it. Used by `tracer merge` (`format::merge`) and by the
//! collector's live merge (`analysis::live_merge`).

use std::collections::HashMap;

use crate::format::recording::{FunctionProbe, Item};
use crate::format::records::Record;

/// A procedure probed: the same on every node that probed it in the same binary.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ProbeKey {
    symbol: String,
    path: String,
    vaddr: u64,
}

/// The output's probe ids.
#[derive(Default)]
pub(crate) struct ProbeIds {
    by_key: HashMap<ProbeKey, u16>,
}

/// The output's id of a node's probe, and whether the output meets it for the first time
/// (its PROBE item goes on once, then).
pub(crate) struct NewOrKnown {
    pub(crate) id: u16,
    pub(crate) new: bool,
}

/// One node's probe ids -> the output's.
pub(crate) type NodeProbeIds = HashMap<u16, u16>;

impl ProbeIds {
    /// The output's id of `probe`, which `node_ids` (its node's map) learns; None when
    /// the ids ran out (more than 65,536 procedures over every node).
    pub(crate) fn of(
        &mut self,
        probe: &FunctionProbe,
        node_ids: &mut NodeProbeIds,
    ) -> Option<NewOrKnown> {
        let key = ProbeKey {
            symbol: probe.symbol.clone(),
            path: probe.path.clone(),
            vaddr: probe.vaddr,
        };
        let known = self.by_key.get(&key).copied();
        let out = match known {
            Some(id) => NewOrKnown { id, new: false },
            None => {
                let id = u16::try_from(self.by_key.len()).ok()?;
                self.by_key.insert(key, id);
                NewOrKnown { id, new: true }
            }
        };
        node_ids.insert(probe.id, out.id);
        Some(out)
    }

    /// Gives a node's item the output's probe ids: a FUNC record renumbered (an id its
    /// node announced no probe for is kept: no procedure either way), a probe the output
    /// meets for the first time too. Ok(false): a probe the output has already met, which
    /// goes no further. Err when the ids ran out (the item is left as it was).
    pub(crate) fn renumber(
        &mut self,
        item: &mut Item,
        node_ids: &mut NodeProbeIds,
    ) -> Result<bool, ProbeIdsRanOut> {
        match item {
            Item::Record(Record::FuncEnter(h) | Record::FuncExit(h)) => {
                h.call = node_ids.get(&h.call).copied().unwrap_or(h.call);
                Ok(true)
            }
            Item::Probe(p) => {
                let out = self.of(p, node_ids).ok_or(ProbeIdsRanOut)?;
                p.id = out.id;
                Ok(out.new)
            }
            _ => Ok(true),
        }
    }
}

/// More than 65,536 procedures over every node: probe ids are 16 bits.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProbeIdsRanOut;
