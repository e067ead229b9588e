//! A process and its descendants, read from `/proc`, for tests that check that nothing of a
//! process tree outlives it. A process is identified by its pid and start time, so a pid the
//! kernel hands out again is never mistaken for the process that had it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    /// Clock ticks after boot (field 22 of `stat`).
    pub start: u64,
    /// `R`, `S`, `Z` (exited, not reaped yet), ...
    pub state: char,
    pub comm: String,
}

/// Reads `/proc/<pid>/stat`; `None` once the process is gone.
pub fn read(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm is in parentheses and may itself hold spaces or parentheses: split at the last `)`.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_owned();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // fields[0] is field 3 of stat (state), so field n is fields[n - 3].
    Some(Proc {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
        state: fields.first()?.chars().next()?,
        comm,
    })
}

/// Every process on the machine, by pid.
fn all() -> BTreeMap<i32, Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return BTreeMap::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| read(pid).map(|proc| (pid, proc)))
        .collect()
}

/// `root` and every process below it (by parent pid), root first.
pub fn tree(root: i32) -> Vec<Proc> {
    let procs = all();
    let Some(first) = procs.get(&root) else { return Vec::new() };
    let mut found = vec![first.clone()];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next].pid;
        found.extend(procs.values().filter(|proc| proc.ppid == parent).cloned());
        next += 1;
    }
    found
}

/// Whether the process still runs: same pid and start time, and not a zombie (a zombie has
/// exited; only its parent's wait is missing).
pub fn alive(proc: &Proc) -> bool {
    read(proc.pid).is_some_and(|now| now.start == proc.start && !matches!(now.state, 'Z' | 'X'))
}

/// Polls `tree(root)` until `done` accepts it, up to `timeout`; returns the last reading.
pub fn wait_for_tree(
    root: i32,
    timeout: Duration,
    done: impl Fn(&[Proc]) -> bool,
) -> Result<Vec<Proc>, Vec<Proc>> {
    let deadline = Instant::now() + timeout;
    loop {
        let procs = tree(root);
        if done(&procs) {
            return Ok(procs);
        }
        if Instant::now() >= deadline {
            return Err(procs);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until none of `procs` is alive, up to `timeout`; returns those still alive.
pub fn wait_all_gone(procs: &[Proc], timeout: Duration) -> Vec<Proc> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<Proc> = procs.iter().filter(|proc| alive(proc)).cloned().collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs whatever of `0` is still alive when dropped, so that a test that failed leaves no
/// process of the tree it watched behind either.
#[derive(Debug)]
pub struct KillOnDrop(pub Vec<Proc>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for proc in self.0.iter().filter(|proc| alive(proc)) {
            // SAFETY: kill(2) has no memory-safety preconditions; `alive` just matched the pid
            // with its start time, so it is still the process that was recorded.
            unsafe {
                libc::kill(proc.pid, libc::SIGKILL);
            }
        }
    }
}
