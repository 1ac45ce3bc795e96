//! Distributions of blocking intervals (outermost MPI/PVM calls, futex waits), per call
//! kind and per call site, and the tables made from them.

use std::collections::HashMap;

use super::dist::{Hist, Precision};
use super::sites::{Place, SiteMap};
use super::thread::{Blocking, Kind};
use super::{CallMetrics, CallSiteMetrics};

/// Distributions of blocking intervals, per call kind and per (kind, site).
#[derive(Default)]
pub(crate) struct BlockingDists {
    kinds: HashMap<Kind, Hist>,
    sites: HashMap<(Kind, Place), Hist>,
}

impl BlockingDists {
    pub(super) fn add(&mut self, b: &Blocking, place: Option<Place>) {
        self.kinds
            .entry(b.kind)
            .or_insert_with(|| Hist::new(Precision::Fine))
            .record(b.wall_ns);
        if let Some(place) = place {
            self.sites
                .entry((b.kind, place))
                .or_insert_with(|| Hist::new(Precision::Coarse))
                .record(b.wall_ns);
        }
    }

    pub(super) fn merge(&mut self, other: &BlockingDists) {
        for (k, h) in &other.kinds {
            self.kinds
                .entry(*k)
                .or_insert_with(|| Hist::new(Precision::Fine))
                .merge(h);
        }
        for (k, h) in &other.sites {
            self.sites
                .entry(*k)
                .or_insert_with(|| Hist::new(Precision::Coarse))
                .merge(h);
        }
    }

    /// Call kinds and sites, most total time first.
    pub(super) fn tables(&self, sites: &SiteMap) -> BlockingTables {
        let mut calls: Vec<CallMetrics> = self
            .kinds
            .iter()
            .map(|(k, h)| CallMetrics {
                name: k.name(),
                cause: k.cause(),
                blocked: h.summary(),
            })
            .collect();
        calls.sort_by(|a, b| (b.blocked.total_ns, &a.name).cmp(&(a.blocked.total_ns, &b.name)));
        let mut call_sites: Vec<CallSiteMetrics> = self
            .sites
            .iter()
            .map(|((k, place), h)| {
                let (object, address, pid) = match *place {
                    Place::Object { object, offset } => {
                        (Some(sites.object(object).to_string()), offset, None)
                    }
                    Place::Raw { pid, address } => (None, address, Some(pid)),
                };
                CallSiteMetrics {
                    name: k.name(),
                    cause: k.cause(),
                    object,
                    address: format!("{address:#x}"),
                    pid,
                    blocked: h.summary(),
                    location: None,
                }
            })
            .collect();
        call_sites.sort_by(|a, b| {
            (b.blocked.total_ns, &a.name, &a.object, &a.address).cmp(&(
                a.blocked.total_ns,
                &b.name,
                &b.object,
                &b.address,
            ))
        });
        BlockingTables { calls, call_sites }
    }
}

/// Time blocked by call kind and by call site, most total time first.
pub(crate) struct BlockingTables {
    pub(crate) calls: Vec<CallMetrics>,
    pub(crate) call_sites: Vec<CallSiteMetrics>,
}
