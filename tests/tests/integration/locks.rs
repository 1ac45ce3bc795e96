//! `tracer record --locks`: the C library's pthread lock, condition variable and barrier
//! calls of the traced program are recorded, one entry/exit pair per call, with the
//! object's address; without `--locks` there are none.

use std::collections::{BTreeMap, HashMap};

use tracer_analysis::calls::{self, split_call_field, Family, Flavor};
use tracer_common::call;
use tracer_tests::{program, record, Call, Traced};

/// Lock/unlock rounds per thread (K) and turns handed over through the condvar (M).
const K: usize = 40;
const M: usize = 15;

/// Runs `locks_count K M OUT` under the tracer; returns the trace and the addresses of the
/// program's objects (written by the program to OUT).
fn run(tag: &str, args: &[&str]) -> (Traced, HashMap<String, u64>) {
    let out = std::env::temp_dir().join(format!("tracer-locks-{}-{tag}", std::process::id()));
    let t = record(
        tag,
        args,
        &[
            program("locks_count"),
            K.to_string(),
            M.to_string(),
            out.display().to_string(),
        ],
    );
    let text = std::fs::read_to_string(&out).expect("the program wrote its addresses");
    let _ = std::fs::remove_file(&out);
    let addrs = text
        .lines()
        .filter_map(|l| {
            let (name, hex) = l.split_once(' ')?;
            let v = u64::from_str_radix(hex.trim().trim_start_matches("0x"), 16).ok()?;
            Some((name.to_string(), v))
        })
        .collect();
    (t, addrs)
}

fn is_pthread(id: u16) -> bool {
    calls::spec(id).is_some_and(|s| s.family == Family::Threads)
}

#[test]
fn locks_records_each_threads_pthread_calls_with_the_object() {
    let (t, a) = run("locks", &["--locks"]);
    assert_eq!(t.lost, 0);
    let procs = t.summary["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    let pid = procs[0]["pid"].as_u64().unwrap() as u32;

    // Every pthread record comes from the probes' glibc flavor.
    for r in t.records() {
        if let tracer_analysis::records::Record::CallEnter(c)
        | tracer_analysis::records::Record::CallExit(c) = r
        {
            let calls::CallField { id, flavor } = split_call_field(c.header.call);
            assert!(is_pthread(id), "unexpected call {}", calls::name(id));
            assert_eq!(Flavor::from_id(flavor), Some(Flavor::Glibc));
        }
    }

    // Outermost calls only: a spin that retries passes the probe again, and glibc's
    // timed wait signals the condvar itself when it gives up a consumed signal.
    let mut by_thread: BTreeMap<u32, Vec<Call>> = BTreeMap::new();
    for c in t.calls() {
        assert_eq!(c.pid, pid);
        by_thread.entry(c.tid).or_default().push(c);
    }
    let workers: Vec<u32> = by_thread
        .keys()
        .copied()
        .filter(|&tid| tid != pid)
        .collect();
    assert_eq!(
        workers.len(),
        2,
        "two worker threads: {:?}",
        by_thread.keys()
    );

    // The main thread touches none of the program's locks. pthread_spin_init is the same
    // code as pthread_spin_unlock in glibc (one address, one probe): it shows as an unlock.
    let objects: Vec<u64> = a.values().copied().collect();
    let main_on_objects: Vec<(u16, u64)> = by_thread
        .get(&pid)
        .map(|v| v.iter().map(|c| (c.id, c.entry.handle)).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, h)| objects.contains(h))
        .collect();
    assert_eq!(
        main_on_objects,
        vec![(call::PTHREAD_SPIN_UNLOCK, a["spin"])]
    );

    let mut serial = 0;
    for (i, tid) in workers.iter().enumerate() {
        let calls = &by_thread[tid];
        let count = |id: u16, object: &str| {
            calls
                .iter()
                .filter(|c| c.id == id && c.entry.handle == a[object])
                .count()
        };
        let of = |id: u16| calls.iter().filter(|c| c.id == id).count();
        // The shared mutex: exactly K acquisitions and K releases, all on its address.
        assert_eq!(count(call::PTHREAD_MUTEX_LOCK, "mutex"), K, "thread {tid}");
        assert_eq!(
            count(call::PTHREAD_MUTEX_UNLOCK, "mutex"),
            K,
            "thread {tid}"
        );
        // The condvar's mutex: once per turn and once around the timed wait.
        assert_eq!(count(call::PTHREAD_MUTEX_LOCK, "cond_mutex"), M + 1);
        assert_eq!(count(call::PTHREAD_MUTEX_UNLOCK, "cond_mutex"), M + 1);
        assert_eq!(
            of(call::PTHREAD_MUTEX_LOCK),
            K + M + 1,
            "no other mutex is locked"
        );
        // The thread's own mutex, never contended: every trylock succeeds.
        let own = format!("own{i}");
        let own = if count(call::PTHREAD_MUTEX_TRYLOCK, &own) == K {
            own
        } else {
            format!("own{}", 1 - i) // threads are numbered by creation, tids may not be
        };
        assert_eq!(count(call::PTHREAD_MUTEX_TRYLOCK, &own), K);
        assert_eq!(count(call::PTHREAD_MUTEX_UNLOCK, &own), K);
        assert!(calls
            .iter()
            .filter(|c| c.id == call::PTHREAD_MUTEX_TRYLOCK)
            .all(|c| c.exit.ret == 0));
        assert_eq!(count(call::PTHREAD_RWLOCK_RDLOCK, "rwlock"), K);
        assert_eq!(count(call::PTHREAD_RWLOCK_WRLOCK, "rwlock"), K);
        assert_eq!(count(call::PTHREAD_RWLOCK_UNLOCK, "rwlock"), 2 * K);
        // pthread_spin_lock starts with a locked instruction: probed one instruction in.
        assert_eq!(count(call::PTHREAD_SPIN_LOCK, "spin"), K);
        assert_eq!(count(call::PTHREAD_SPIN_UNLOCK, "spin"), K);
        assert_eq!(count(call::PTHREAD_BARRIER_WAIT, "barrier"), K);
        serial += calls
            .iter()
            .filter(|c| c.id == call::PTHREAD_BARRIER_WAIT && c.exit.ret == -1)
            .count();
        assert_eq!(count(call::PTHREAD_COND_SIGNAL, "cond"), M);
        assert_eq!(count(call::PTHREAD_COND_TIMEDWAIT, "cond2"), 1);
        assert_eq!(count(call::PTHREAD_COND_BROADCAST, "cond2"), 1);
        // Condition waits carry the condvar in `handle` and the mutex in `comm`.
        for c in calls
            .iter()
            .filter(|c| matches!(c.id, call::PTHREAD_COND_WAIT | call::PTHREAD_COND_TIMEDWAIT))
        {
            assert_eq!(c.entry.comm, a["cond_mutex"]);
            assert!(c.entry.handle == a["cond"] || c.entry.handle == a["cond2"]);
        }
        // Lock and unlock calls succeed, and each call's site is in the program.
        for c in calls {
            assert_ne!(c.exit.site, 0, "{}", calls::name(c.id));
            if c.id != call::PTHREAD_BARRIER_WAIT && c.id != call::PTHREAD_COND_TIMEDWAIT {
                assert_eq!(c.exit.ret, 0, "{}", calls::name(c.id));
            }
        }
    }
    // One thread of each barrier round is its "serial thread".
    assert_eq!(serial, K, "PTHREAD_BARRIER_SERIAL_THREAD once per round");

    // What makes the n-th acquisition depend on the (n-1)-th release: the critical
    // sections of the shared mutex, from a lock's exit to the next unlock's entry of the
    // same thread, never overlap in the recorded time.
    let mut sections: Vec<(u64, u64)> = Vec::new();
    for tid in &workers {
        let on_mutex: Vec<&Call> = by_thread[tid]
            .iter()
            .filter(|c| c.entry.handle == a["mutex"])
            .collect();
        for pair in on_mutex.chunks(2) {
            assert_eq!(pair[0].id, call::PTHREAD_MUTEX_LOCK);
            assert_eq!(pair[1].id, call::PTHREAD_MUTEX_UNLOCK);
            sections.push((pair[0].exit.header.ts_ns, pair[1].entry.header.ts_ns));
        }
    }
    sections.sort();
    assert_eq!(sections.len(), 2 * K);
    for w in sections.windows(2) {
        assert!(w[0].0 <= w[0].1);
        assert!(
            w[0].1 < w[1].0,
            "critical sections overlap: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
}

/// Without --locks only thread creation and joins are probed (always): the program's
/// two pthread_create and two pthread_join calls, no lock call.
#[test]
fn without_locks_no_pthread_lock_calls_are_recorded() {
    let (t, a) = run("nolocks", &[]);
    assert!(a.contains_key("mutex"), "the program ran");
    let lock_records = t
        .records()
        .filter(|r| match r {
            tracer_analysis::records::Record::CallEnter(c)
            | tracer_analysis::records::Record::CallExit(c) => {
                let id = split_call_field(c.header.call).id;
                is_pthread(id) && !calls::spec(id).unwrap().is_thread_lifecycle()
            }
            _ => false,
        })
        .count();
    assert_eq!(lock_records, 0);
    let mut lifecycle: Vec<String> = t.calls().iter().map(|c| calls::name(c.id)).collect();
    lifecycle.sort();
    assert_eq!(
        lifecycle,
        [
            "pthread_create",
            "pthread_create",
            "pthread_join",
            "pthread_join"
        ]
    );
}
