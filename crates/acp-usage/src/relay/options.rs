//! What one relay run uses ([`Options`]), resolved from what the user asked for
//! ([`RelayOptions`], in `crate::options`) with the config file and the state file.
//!
//! Plain Rust types only: the relay does not know how its options were given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::observer::Settings;
use crate::agents::Profile;
use crate::options::{AgentUsage, RelayOptions, Transcripts};
use crate::sinks::ledger::learned::Learned;
use crate::sources::transcripts::Locations;

/// Options of one relay run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The agent command line.
    pub argv: Vec<String>,
    /// How long the agent may take to exit after the editor closed its side.
    pub grace: Duration,
    /// Longest accepted line.
    pub max_line: usize,
    /// Observer settings.
    pub settings: Settings,
    /// Where the ledger is exported over OTLP (`None`: it is not).
    pub otlp: Option<crate::sinks::otlp::OtlpConfig>,
    /// Where the agents' transcripts are (`None`: not read).
    pub transcripts: Option<Locations>,
    /// Longest a turn's result waits for the transcript to catch up.
    pub transcript_wait: Duration,
    /// The ledger to open, until [`Options::start_ledger`] starts opening it. Until the relay
    /// has it open, `settings` has neither it nor what earlier runs learned.
    pub ledger_to_open: Option<PathBuf>,
    /// `--tap on` (or `ACP_USAGE_TAP=1`) was given: the tap starts for an agent without a
    /// profile too, on the well-known base-URL variables.
    pub tap_asked: bool,
}

/// The ledger being opened on a thread of its own, so that the agent starts meanwhile: opening
/// it (SQLite, settling what killed runs left, reading the baselines) takes a millisecond or
/// two, which the relay does not wait for before it passes on the `initialize` exchange.
pub struct PendingLedger {
    path: PathBuf,
    /// What the thread learned (`None` inside: the ledger could not be opened).
    result: tokio::sync::oneshot::Receiver<Option<Learned>>,
}

impl std::fmt::Debug for PendingLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLedger").field("path", &self.path).finish_non_exhaustive()
    }
}

impl PendingLedger {
    /// Starts opening the ledger at `path`, and reading whose windows `profile`'s agent will
    /// fill (its credentials' account, `crate::accounts`).
    fn start(path: PathBuf, profile: Profile) -> PendingLedger {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let at = path.clone();
        // A thread that panics drops the sender: the run goes on without the ledger.
        let spawned = std::thread::Builder::new().name("ledger-open".into()).spawn(move || {
            crate::lower_thread_priority();
            let store = crate::sinks::ledger::open(&at);
            let learned = open_ledger(store.as_ref(), &at).map(|mut l| {
                if let Ok(store) = &store {
                    l.accounts = start_accounts(profile, store, &at);
                }
                l
            });
            let _ = tx.send(learned);
        });
        if let Err(err) = spawned {
            tracing::warn!("cannot open the ledger {}: no thread ({err})", path.display());
        }
        PendingLedger { path, result: rx }
    }

    /// The ledger's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the thread: what earlier runs learned, or `None` when the ledger could not be
    /// opened.
    pub async fn wait(self) -> Option<Learned> {
        self.result.await.ok().flatten()
    }
}

/// The windows whose period has not ended, remembered for the first update. A ledger that
/// cannot give them leaves the run as it was before windows were remembered, with one WARN.
fn remembered_windows(
    store: &crate::sinks::ledger::store::Store,
    path: &Path,
) -> Vec<acp_usage_core::limits::Tracked> {
    let now_s = crate::sinks::ledger::learned::now() as i64;
    store.windows(Some(now_s)).unwrap_or_else(|err| {
        tracing::warn!(
            "cannot read the subscription windows in the ledger {}: {err}; they show from the first response",
            path.display()
        );
        Vec::new()
    })
}

/// The account `profile`'s agent will use, per provider, from the credentials it will find
/// (none when they do not tell, or tell of two).
fn start_accounts(
    profile: Profile,
    store: &crate::sinks::ledger::store::Store,
    ledger: &Path,
) -> Vec<(String, String)> {
    let Some(plan) = profile.plan() else { return Vec::new() };
    let var = |name: &str| std::env::var(name).ok();
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    let env = crate::sources::tap::point::Env { var: &var, read_file: &read };
    let found = profile.credentials(&env);
    let fingerprints = crate::accounts::Fingerprints::load(Some(ledger));
    // A key whose organisation a response named before is that organisation's.
    let account =
        fingerprints.of_credentials(&found).map(|a| store.aliased(&a).ok().flatten().unwrap_or(a));
    tracing::debug!(
        provider = plan.provider,
        known = account.is_some(),
        "the account in use at start"
    );
    account.map(|a| (plan.provider.to_owned(), a)).into_iter().collect()
}

/// What a word of the agent's command is on disk through its symlinks (a program found on
/// `PATH` when it names no directory), when that is another file: for recognising an agent
/// started through a link to it (`Profile::detect_launch`).
fn real_path(word: &str) -> Option<String> {
    let named = Path::new(word);
    let path = if named.components().count() > 1 {
        named.to_path_buf()
    } else {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|dir| dir.join(word)).find(|p| p.is_file())?
    };
    let real = std::fs::canonicalize(&path).ok()?;
    (real != path).then(|| real.display().to_string())
}

/// Opens the ledger at `path` (made when missing, bringing in an old `learned.json`) and reads
/// what earlier runs learned; `None` when it cannot be opened, which is logged: the run goes on
/// without it.
fn open_ledger(
    store: Result<&crate::sinks::ledger::store::Store, &rusqlite::Error>,
    path: &Path,
) -> Option<Learned> {
    let read = |s: &crate::sinks::ledger::store::Store| -> rusqlite::Result<_> {
        Ok((s.agents()?, remembered_windows(s, path)))
    };
    match store.map_err(|e| e.to_string()).and_then(|s| read(s).map_err(|e| e.to_string())) {
        Ok((agents, windows)) => Some(Learned { agents, windows, ..Learned::default() }),
        Err(err) => {
            tracing::warn!("cannot open the ledger {}: {err}; going on without it", path.display());
            None
        }
    }
}

impl Options {
    /// The options of a run on what the user asked for: reads the config file (layering the
    /// catalog) and finds the ledger, which [`Options::start_ledger`] starts opening and the
    /// relay puts in place once it is open. A ledger that cannot be opened is left out of the
    /// run.
    pub fn resolve(args: &RelayOptions) -> anyhow::Result<Options> {
        let ledger_to_open = crate::sinks::ledger::path();
        let config = args.load_config()?;
        let transcripts = args.transcripts == Transcripts::On;
        let tap = config.tap_on(args.tap);
        let launched_as = Profile::detect_launch(&args.agent, &real_path);
        Ok(Options {
            argv: args.agent.clone(),
            grace: args.grace,
            max_line: args.max_line_mib.saturating_mul(1024 * 1024).max(1024),
            settings: Settings {
                forced_profile: args.profile,
                launched_as,
                command: args.agent.clone(),
                keep_agent_usage: args.agent_usage == AgentUsage::Keep,
                catalog: config.catalog,
                default_window: config.default_window,
                learned: Learned::default(),
                ledger: None,
                transcripts,
                tap,
                tap_wanted: tap,
                budgets: config.budgets.clone(),
                usage_command: config.usage_command.clone(),
            },
            // Kept only with a ledger to export (dropped when it cannot be opened).
            otlp: match crate::sinks::otlp::config::resolve(
                |k| std::env::var(k).ok(),
                config.otlp.as_ref(),
            ) {
                Ok(c) => c.filter(|_| ledger_to_open.is_some()),
                Err(err) => {
                    tracing::warn!("{err:#}; the ledger is not exported");
                    None
                }
            },
            transcripts: transcripts.then(Locations::from_process),
            transcript_wait: args.transcript_wait,
            ledger_to_open,
            tap_asked: args.tap == Some(true),
        })
    }

    /// Starts reading what earlier runs learned from the ledger (made when missing) on a thread
    /// of its own; `None` without a ledger. Not in [`Options::resolve`]: the relay starts it
    /// once the agent is started, so that the open does not delay the agent.
    pub fn start_ledger(&mut self) -> Option<PendingLedger> {
        let profile = self.settings.forced_profile.unwrap_or(self.settings.launched_as);
        self.ledger_to_open.take().map(|path| PendingLedger::start(path, profile))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_whose_windows_cannot_be_read_leaves_none_remembered_and_still_opens() {
        let dir = crate::test_support::scratch("relay-options", "windows-unreadable");
        let path = dir.join("ledger.db");
        let store = crate::sinks::ledger::open(&path).unwrap();
        store.conn().execute_batch("DROP TABLE limit_windows").unwrap();
        assert!(remembered_windows(&store, &path).is_empty());
        drop(store);
        // The run still has its ledger (the windows show from the first response).
        let reopened = crate::sinks::ledger::open(&path);
        let learned = open_ledger(reopened.as_ref(), &path).expect("the ledger opens");
        assert!(learned.windows.is_empty());
        // Garbage where the ledger should be: no ledger, as before windows were remembered.
        std::fs::write(dir.join("junk.db"), b"not a database, not at all").unwrap();
        let junk = dir.join("junk.db");
        assert!(open_ledger(crate::sinks::ledger::open(&junk).as_ref(), &junk).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_the_agent_is_followed_to_its_target() {
        let dir = crate::test_support::scratch("relay-options", "links");
        let target = dir.join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js");
        crate::test_support::executable(&target);
        let link = dir.join("bin/my-agent");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let real = std::fs::canonicalize(&target).unwrap().display().to_string();
        let link = link.display().to_string();
        assert_eq!(real_path(&link), Some(real.clone()));
        // The file itself is no link; a file that is not there resolves to nothing.
        assert_eq!(real_path(&real), None);
        assert_eq!(real_path(&dir.join("missing").display().to_string()), None);
        assert_eq!(Profile::detect_launch(&[link], &real_path).name(), "claude");
        let _ = std::fs::remove_dir_all(dir);
    }
}
