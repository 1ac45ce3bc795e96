//! Detaching per-process probes off the event loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use super::Detaching;
use crate::probes::TakenLinks;

/// Drops probe links on a thread of its own: the kernel takes 0.1-0.2 s per kernel link,
/// and the event loop must not wait for it.
pub(super) struct Detacher {
    tx: Option<mpsc::Sender<TakenLinks>>,
    pending: Arc<Pending>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Probes and kernel links handed over and not detached yet.
#[derive(Default)]
struct Pending {
    probes: AtomicUsize,
    kernel_links: AtomicUsize,
}

impl Pending {
    fn add(&self, taken: &TakenLinks) {
        self.probes.fetch_add(taken.probes, Ordering::Relaxed);
        self.kernel_links
            .fetch_add(taken.kernel_links, Ordering::Relaxed);
    }

    fn remove(&self, probes: usize, kernel_links: usize) {
        self.probes.fetch_sub(probes, Ordering::Relaxed);
        self.kernel_links.fetch_sub(kernel_links, Ordering::Relaxed);
    }
}

impl Detacher {
    pub(super) fn spawn() -> Self {
        let (tx, rx) = mpsc::channel::<TakenLinks>();
        let pending = Arc::new(Pending::default());
        let left = pending.clone();
        let thread = std::thread::Builder::new()
            .name("tracer-detach".into())
            .spawn(move || {
                for taken in rx {
                    drop(taken.links);
                    left.remove(taken.probes, taken.kernel_links);
                }
            })
            .ok();
        Detacher {
            tx: Some(tx),
            pending,
            thread,
        }
    }

    pub(super) fn detach(&self, taken: TakenLinks) {
        if taken.links.is_empty() {
            return;
        }
        self.pending.add(&taken);
        // Without the thread (it could not start) the links go here and now.
        if let Some(Err(e)) = self.tx.as_ref().map(|tx| tx.send(taken)) {
            let TakenLinks {
                links,
                probes,
                kernel_links,
            } = e.0;
            drop(links);
            self.pending.remove(probes, kernel_links);
        }
    }

    /// Probes handed over and not detached yet.
    pub(super) fn pending(&self) -> Detaching {
        Detaching {
            probes: self.pending.probes.load(Ordering::Relaxed),
            kernel_links: self.pending.kernel_links.load(Ordering::Relaxed),
        }
    }

    /// Waits until every probe handed over is detached.
    pub(super) fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
