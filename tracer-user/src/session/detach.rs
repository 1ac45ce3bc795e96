//! Detaching per-process probes off the event loop.

/// Drops probe links on a thread of its own: the kernel takes 0.1-0.2 s per probe, and the
/// event loop must not wait for it.
pub(super) struct Detacher {
    tx: Option<std::sync::mpsc::Sender<Vec<aya::programs::uprobe::UProbeLink>>>,
    pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Detacher {
    pub(super) fn spawn() -> Self {
        use std::sync::atomic::Ordering;
        let (tx, rx) = std::sync::mpsc::channel::<Vec<aya::programs::uprobe::UProbeLink>>();
        let pending = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let left = pending.clone();
        let thread = std::thread::Builder::new()
            .name("tracer-detach".into())
            .spawn(move || {
                for links in rx {
                    for link in links {
                        drop(link);
                        left.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            })
            .ok();
        Detacher {
            tx: Some(tx),
            pending,
            thread,
        }
    }

    pub(super) fn detach(&self, links: Vec<aya::programs::uprobe::UProbeLink>) {
        if links.is_empty() {
            return;
        }
        let n = links.len();
        self.pending
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        // Without the thread (it could not start) the links go here and now.
        if let Some(Err(e)) = self.tx.as_ref().map(|tx| tx.send(links)) {
            drop(e.0);
            self.pending
                .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Probes handed over and not detached yet.
    pub(super) fn pending(&self) -> usize {
        self.pending.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until every probe handed over is detached.
    pub(super) fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
