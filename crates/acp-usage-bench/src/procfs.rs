//! What a relay process has used so far, read from `/proc`: CPU time (user + system, all its
//! threads, not its children) and peak resident memory (`VmHWM`); and the same of this process
//! and its named threads, for the tap, which runs in process.

use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcUsage {
    /// User + system CPU time of the process itself.
    pub cpu: Duration,
    /// Peak resident set size, in KiB.
    pub hwm_kib: u64,
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`.
pub fn read(pid: u32) -> std::io::Result<ProcUsage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let bad = || std::io::Error::other(format!("cannot read the usage of process {pid}"));
    let ticks = cpu_ticks(&stat).ok_or_else(bad)?;
    let hwm_kib = status_kib(&status, "VmHWM:").ok_or_else(bad)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let coarse = Duration::from_nanos(ticks * 1_000_000_000 / hz);
    // The scheduler's per-thread run time is exact to the nanosecond but forgets threads that
    // have exited; the tick count keeps them, at 10 ms resolution. Take the exact one unless
    // threads are missing from it.
    let fine = schedstat_ns(pid).map(Duration::from_nanos);
    let tick = Duration::from_nanos(1_000_000_000 / hz);
    let cpu = match fine {
        Some(f) if f + 2 * tick >= coarse => f,
        _ => coarse,
    };
    Ok(ProcUsage { cpu, hwm_kib })
}

/// Sum of the run times (ns) in `/proc/<pid>/task/*/schedstat`.
fn schedstat_ns(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += s.split_ascii_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// utime + stime (clock ticks) from a `/proc/<pid>/stat` line; the command name in parentheses
/// may hold spaces, so fields are counted after the last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// This process's resident set and its peak so far (`VmRSS`, `VmHWM`), in KiB.
pub fn own_memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some((status_kib(&status, "VmRSS:")?, status_kib(&status, "VmHWM:")?))
}

/// Resets this process's peak RSS to its current RSS (Linux 4.0 and later), so that a later
/// `VmHWM` is the peak of what ran in between; false when the kernel refused.
pub fn reset_own_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU time so far of this process's threads named `name` (their `comm`), from the scheduler's
/// per-thread run time: how the tap, which runs in process on threads of its own, is measured.
pub fn threads_cpu(name: &str) -> Option<Duration> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        // A thread that ended between the listing and this read has no more time to give.
        if let Ok(s) = std::fs::read_to_string(path.join("schedstat")) {
            total += s.split_ascii_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(Duration::from_nanos(total))
}

/// A `kB` field of `/proc/<pid>/status`.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_ascii_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_and_status() {
        let stat = "1234 (a (b) c) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 37 0 0 20 0 3 0 1 2 3";
        assert_eq!(cpu_ticks(stat), Some(287));
        let status = "Name:\tx\nVmPeak:\t  10 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(2048));
        assert_eq!(status_kib(status, "Nope:"), None);
        let me = read(std::process::id()).unwrap();
        assert!(me.hwm_kib > 0);
        let (rss, hwm) = own_memory().unwrap();
        assert!(rss > 0 && hwm >= rss);
        let this = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        assert!(threads_cpu(this.trim_end()).is_some());
    }
}
