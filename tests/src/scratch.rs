//! Scratch directories for one test: a fake HOME, a work directory, logs. Removed on drop unless
//! `ACP_USAGE_KEEP_SCRATCH` is set, so that a failed run can be inspected.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A directory under the system temp dir, unique to this process and call.
#[derive(Debug)]
pub struct Scratch {
    root: PathBuf,
    keep: bool,
}

impl Scratch {
    /// Creates `<tmp>/acp-usage-tests/<label>-<pid>-<n>-<nanos>` with `home/` and `work/` inside.
    pub fn new(label: &str) -> anyhow::Result<Scratch> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos();
        let root = std::env::temp_dir()
            .join("acp-usage-tests")
            .join(format!("{label}-{}-{n}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(root.join("home"))?;
        std::fs::create_dir_all(root.join("work"))?;
        let keep = std::env::var_os("ACP_USAGE_KEEP_SCRATCH").is_some();
        Ok(Scratch { root, keep })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The fake HOME of the agent.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The session's working directory (the "project").
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Keep the directory after the test (e.g. when it failed).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep || std::thread::panicking() {
            eprintln!("scratch kept: {}", self.root.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
