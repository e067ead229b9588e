//! Reading sessions on several threads while one thread writes them, in their order.
//!
//! ```text
//! readers (one per core) --(index, session)--> writer (the caller's thread): in index order
//! ```
//! Readers claim the next index in turn and stay at most [`AHEAD`] sessions ahead of the
//! writer, so a slow ledger does not fill memory with sessions waiting to be written. The
//! writer holds what arrives early until every session before it is written: the ledger sees
//! the same writes, in the same order, as from a single thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, mpsc};

/// How many sessions readers may have read beyond the one the writer waits for.
const AHEAD: usize = 64;

/// Calls `read(i)` for every `i` in `0..n` on `threads` threads, and `write(i, what read gave)`
/// on this thread in order of `i`. The first error of `write` stops the readers and is returned.
pub fn in_order<T: Send, E>(
    n: usize,
    threads: usize,
    read: impl Fn(usize) -> T + Sync,
    mut write: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let written = (Mutex::new(0usize), Condvar::new());
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(usize, T)>();
        for _ in 0..threads.max(1).min(n) {
            let tx = tx.clone();
            let (next, stop, written, read) = (&next, &stop, &written, &read);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    {
                        // The session the writer waits for is always claimed and never waits
                        // here (i == written < written + AHEAD), so readers cannot all wait.
                        let (lock, cv) = written;
                        let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
                        while i >= *w + AHEAD && !stop.load(Ordering::SeqCst) {
                            w = cv.wait(w).unwrap_or_else(|e| e.into_inner());
                        }
                    }
                    if stop.load(Ordering::SeqCst) || tx.send((i, read(i))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut at = 0;
        let mut result = Ok(());
        while at < n {
            if let Some(v) = pending.remove(&at) {
                if let Err(err) = write(at, v) {
                    result = Err(err);
                    break;
                }
                at += 1;
                let (lock, cv) = &written;
                *lock.lock().unwrap_or_else(|e| e.into_inner()) = at;
                cv.notify_all();
                continue;
            }
            match rx.recv() {
                Ok((i, v)) => {
                    pending.insert(i, v);
                }
                // Every reader stopped (one panicked: the scope passes its panic on).
                Err(_) => break,
            }
        }
        stop.store(true, Ordering::SeqCst);
        written.1.notify_all();
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_come_in_order_whatever_the_readers_finish_first() {
        let mut seen = Vec::new();
        let res: Result<(), ()> = in_order(
            500,
            4,
            |i| {
                // Later indices finish sooner.
                std::thread::sleep(std::time::Duration::from_micros(((500 - i) % 7) as u64 * 50));
                i * 2
            },
            |i, v| {
                seen.push((i, v));
                Ok(())
            },
        );
        assert!(res.is_ok());
        assert_eq!(seen, (0..500).map(|i| (i, i * 2)).collect::<Vec<_>>());
    }

    #[test]
    fn a_write_error_stops_the_run() {
        let reads = AtomicUsize::new(0);
        let res = in_order(
            10_000,
            2,
            |i| {
                reads.fetch_add(1, Ordering::SeqCst);
                i
            },
            |i, _| if i == 3 { Err("full disk") } else { Ok(()) },
        );
        assert_eq!(res, Err("full disk"));
        assert!(reads.load(Ordering::SeqCst) < 10_000, "the readers stopped early");
        let none: Result<(), ()> = in_order(0, 2, |i| i, |_, _| Ok(()));
        assert!(none.is_ok());
    }
}
