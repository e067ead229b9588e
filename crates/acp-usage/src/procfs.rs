//! A process's `/proc/<pid>/stat` line, where Linux has one (the guard's process tree, the
//! ledger's check that a writer still runs).

/// The fields of `/proc/<pid>/stat` after the command's name, from field 3 (the state) on;
/// `None` when there is no such process or no `/proc`. The name (field 2) is in parentheses
/// and may itself hold spaces or `)`, so the fields start after the last `)`.
pub fn stat_fields(pid: i64) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_ascii_whitespace().map(str::to_owned).collect())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn this_processs_parent_is_the_kernels_answer() {
        let fields = super::stat_fields(std::process::id() as i64).unwrap();
        // SAFETY: getppid cannot fail.
        let parent = unsafe { libc::getppid() };
        assert_eq!(fields[1], parent.to_string());
    }
}
