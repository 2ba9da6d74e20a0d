//! Threads kept parked for the work a restore splits: its undo point recorded beside the
//! changes, its files written and renamed from several threads.
//!
//! A thread spawned for a job starts on its parent's processor and, on the kernels this was
//! measured on (6.x, EEVDF), waits there until the parent blocks or its time slice ends — up
//! to a millisecond, with the other processor idle. A parked thread that is woken runs on an
//! idle processor within microseconds. The pool starts on first use, and where it cannot
//! start the work runs on the asking thread, one part after the other.
//!
//! Nothing queued here waits for another job of the pool, or for the thread that queued it (a
//! restore's gate is waited for on the operation's own thread): a job waits only for the disk,
//! so a pool whose every thread is busy delays work, never stops it.

use std::sync::OnceLock;

/// Threads of the pool, at most (and at least two).
const MAX_THREADS: usize = 8;

/// The daemon's pool, started on first use; None where it could not start.
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .clamp(2, MAX_THREADS);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("ckpt-work-{i}"))
            .build()
            .inspect_err(
                |e| tracing::warn!(error = %e, "cannot start worker threads; working on one"),
            )
            .ok()
    })
    .as_ref()
}

/// `f` of every item, in order, computed here and on up to `threads - 1` of the pool's threads
/// (here alone when fewer than two are asked for, or the pool cannot start). A part a thread
/// of the pool has not started when this thread is done is left to it: it finds nothing
/// left to do. A panic of `f` is raised here once every part is done.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let pool = match threads {
        0 | 1 => None,
        _ => pool(),
    };
    let Some(pool) = pool else {
        return items.iter().map(&f).collect();
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(at) else {
                return done;
            };
            done.push((at, f(item)));
        }
    };
    let helped = parking_lot::Mutex::new(Vec::new());
    let mut results: Vec<(usize, R)> = pool.in_place_scope(|scope| {
        for _ in 1..threads.min(items.len()) {
            scope.spawn(|_| {
                let done = work();
                helped.lock().extend(done);
            });
        }
        work()
    });
    results.extend(helped.into_inner());
    results.sort_by_key(|(at, _)| *at);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_parallel_keeps_the_order_and_does_every_item_once() {
        let items: Vec<usize> = (0..1000).collect();
        for threads in [0, 1, 2, 4, 64] {
            let seen = std::sync::atomic::AtomicUsize::new(0);
            let out = in_parallel(&items, threads, |i| {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i * 2
            });
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
            assert_eq!(seen.into_inner(), items.len());
        }
    }

    #[test]
    fn in_parallel_runs_on_the_pool_when_asked_for_threads() {
        // Each item waits until two threads hold one: proof that a second thread worked.
        if pool().is_none() {
            return;
        }
        let items = [0, 1];
        let arrived = std::sync::Barrier::new(2);
        let names = in_parallel(&items, 2, |_| {
            arrived.wait();
            std::thread::current().name().map(str::to_string)
        });
        assert!(
            names
                .iter()
                .any(|n| n.as_deref().is_some_and(|n| n.starts_with("ckpt-work-"))),
            "{names:?}"
        );
    }

    #[test]
    fn a_panic_in_one_part_is_raised_to_the_caller() {
        let items: Vec<usize> = (0..100).collect();
        let caught = std::panic::catch_unwind(|| {
            in_parallel(&items, 2, |&i| {
                if i == 57 {
                    panic!("item 57");
                }
                i
            })
        });
        assert!(caught.is_err());
        // The pool still works afterwards.
        assert_eq!(in_parallel(&items, 2, |&i| i).len(), 100);
    }
}
