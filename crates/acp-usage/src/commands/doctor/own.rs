//! Doctor's findings about acp-usage's own parts: the config file, the ledger, the OTLP
//! collector and the catalog.

use std::ffi::OsString;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{Finding, Inputs, Status};
use crate::catalog_file::{self, CatalogLayer};
use crate::config::{self, Config};
use crate::sinks::ledger::{self, LEDGER_ENV};
use crate::sinks::otlp::{self, OtlpTable};

/// Past this age the catalog is said to be old. Providers bring out models about monthly and
/// LiteLLM lists them within days, so after a quarter a model the user has just switched to
/// is likely missing: its calls get no cost.
pub const CATALOG_STALE_DAYS: u64 = 90;

fn finding(check: &'static str, status: Status, message: String) -> Finding {
    Finding::new(None, check, status, message)
}

/// The config as the relay would read it, and the finding about it. A config that does not
/// load stops the relay before it starts the agent; the rest is then checked with defaults.
pub(super) fn config(inputs: &Inputs) -> (Config, Finding) {
    let env = |var: &str| (inputs.env)(var).map(OsString::from);
    let location = config::config_path_in(inputs.config.as_deref(), &env);
    let loaded = config::load_from(location.clone(), inputs.catalog.as_deref());
    let defaults = || {
        // Without the user's file and --catalog, nothing can fail but a build bug.
        config::load_from(None, None).expect("the embedded catalog loads")
    };
    match (location, loaded) {
        (location, Err(err)) => {
            let message =
                format!("{err:#}: acp-usage stops with this error before it starts the agent");
            let fail = finding("config", Status::Fail, message);
            (defaults(), if let Some((path, _)) = location { fail.at(path) } else { fail })
        }
        (None, Ok(c)) => {
            let message = "no location (neither XDG_CONFIG_HOME nor HOME is set): defaults".into();
            (c, finding("config", Status::Info, message))
        }
        (Some((path, _)), Ok(c)) if c.config_file.is_none() => {
            let message = format!("none at {}: defaults", path.display());
            (c, finding("config", Status::Info, message).at(path))
        }
        (Some((path, _)), Ok(c)) if !c.unknown_keys.is_empty() => {
            let keys: Vec<String> = c.unknown_keys.iter().map(|k| format!("`{k}`")).collect();
            let message = format!(
                "{} read; nothing reads {} (a typo? ignored; the keys are in docs/cli.md)",
                path.display(),
                keys.join(", ")
            );
            (c, finding("config", Status::Warn, message).at(path))
        }
        (Some((path, _)), Ok(c)) => {
            let message = format!("{} read", path.display());
            (c, finding("config", Status::Ok, message).at(path))
        }
    }
}

/// The ledger: where, whether acp-usage can write it (checked without creating it), how big,
/// how many calls. Also whether one is kept at all (the OTLP export reads it).
pub(super) fn ledger(inputs: &Inputs) -> (Finding, bool) {
    if (inputs.env)(LEDGER_ENV).as_deref() == Some("off") {
        let message = format!(
            "off ({LEDGER_ENV}=off): no call is kept; report, watch, status and day or month \
             budgets have nothing to read"
        );
        return (finding("ledger", Status::Info, message), false);
    }
    let env = |var: &str| (inputs.env)(var).map(OsString::from);
    let Some(path) = ledger::path_in(&env) else {
        let message = "no location (neither XDG_DATA_HOME nor HOME is set): no call is kept".into();
        return (finding("ledger", Status::Warn, message), false);
    };
    let (status, message) = ledger_state(&path, inputs.now);
    (finding("ledger", status, message).at(path), true)
}

fn ledger_state(path: &Path, now: SystemTime) -> (Status, String) {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        // Missing, or under a file (which then is what stands in the way).
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            // The relay creates it (and its directories) on its first run.
            let Some(base) = path.ancestors().skip(1).find(|a| a.exists()) else {
                return (Status::Fail, format!("{shown} cannot be created: no directory above it"));
            };
            return if base.is_dir() && writable(base) {
                (Status::Ok, format!("{shown} (not created yet: the first metered session does)"))
            } else {
                let what = if base.is_dir() { "is not writable" } else { "is not a directory" };
                (
                    Status::Fail,
                    format!(
                        "{shown} cannot be created: {} {what}; the relay runs without it and \
                         keeps no call",
                        base.display()
                    ),
                )
            };
        }
        Err(err) => return (Status::Fail, format!("{shown}: {err}")),
    };
    if !meta.is_file() {
        return (Status::Fail, format!("{shown} is not a file"));
    }
    // SQLite writes beside the file (its -wal and -shm), so the directory must be writable too.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !writable(path) || !writable(dir) {
        return (
            Status::Fail,
            format!(
                "{shown} is not writable (the file or its directory): the relay runs without \
                 it and keeps no call"
            ),
        );
    }
    let wal = std::fs::metadata(wal_path(path)).map_or(0, |m| m.len());
    let size = super::show::size(meta.len() + wal);
    match read_ledger(path) {
        Ok(r) if r.version > ledger::schema::VERSION => (
            Status::Fail,
            format!(
                "{shown} was written by a newer acp-usage (schema {}, this one knows {}): this \
                 one cannot write it",
                r.version,
                ledger::schema::VERSION
            ),
        ),
        Ok(r) => {
            let calls = crate::numbers::thousands(r.calls);
            let last = match r.last_ms {
                Some(at) => format!(", last {}", ago(now, at)),
                None => String::new(),
            };
            (Status::Ok, format!("{shown} ({size}, {calls} calls{last}; writable)"))
        }
        Err(err) => (Status::Fail, format!("{shown} ({size}) cannot be read: {err}")),
    }
}

/// What doctor reads of the ledger.
struct LedgerRead {
    version: i64,
    calls: u64,
    last_ms: Option<i64>,
}

/// Reads the ledger without leaving a trace. A read-only SQLite connection to a WAL file
/// creates its `-wal` and `-shm` when they are missing; when they are, no process has the
/// file open, so it is read as immutable, which touches nothing.
fn read_ledger(path: &Path) -> rusqlite::Result<LedgerRead> {
    use rusqlite::OpenFlags;
    let in_use = wal_path(path).exists();
    let conn = if in_use {
        rusqlite::Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?
    } else {
        let absolute = std::fs::canonicalize(path).map_err(|e| {
            rusqlite::Error::InvalidPath(PathBuf::from(format!("{}: {e}", path.display())))
        })?;
        let uri = reqwest::Url::from_file_path(&absolute)
            .map_err(|()| rusqlite::Error::InvalidPath(absolute.clone()))?;
        rusqlite::Connection::open_with_flags(
            format!("{uri}?mode=ro&immutable=1"),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?
    };
    conn.busy_timeout(Duration::from_secs(2))?;
    let version = ledger::schema::version(&conn)?;
    if version == 0 {
        return Ok(LedgerRead { version, calls: 0, last_ms: None });
    }
    let (calls, last_ms) = conn.query_row("SELECT COUNT(*), MAX(at) FROM calls", [], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
    })?;
    Ok(LedgerRead { version, calls: calls.max(0) as u64, last_ms })
}

fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Whether this process may write `path` (the system's own answer, ACLs included).
#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a NUL-terminated path that lives across the call; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Whether this process may write `path`, on Windows: only the read-only attribute is
/// consulted (not ACLs); a directory's does not stop writes in it, so a directory counts.
#[cfg(not(unix))]
fn writable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() || !m.permissions().readonly())
}

/// The OTLP export: not configured, misconfigured, or each collector endpoint reachable or
/// not (a TCP connection within the timeout). Header values are never shown.
pub(super) fn otlp(inputs: &Inputs, table: Option<&OtlpTable>, ledger_on: bool) -> Vec<Finding> {
    let resolved = otlp::config::resolve(|var| (inputs.env)(var), table);
    let c = match resolved {
        Err(err) => {
            let message = format!("{err:#}: nothing is exported");
            return vec![finding("otlp", Status::Fail, message)];
        }
        Ok(None) => {
            let message = "not configured (OTEL_EXPORTER_OTLP_ENDPOINT or [otlp] in the config): \
                           nothing is exported"
                .into();
            return vec![finding("otlp", Status::Info, message)];
        }
        Ok(Some(c)) => c,
    };
    if !ledger_on {
        let message = "configured, but no ledger is kept: there is nothing to export".into();
        return vec![finding("otlp", Status::Warn, message)];
    }
    let mut out = Vec::new();
    let headers = match c.headers.len() {
        0 => String::new(),
        n => format!("; {n} header{} set (values not shown)", if n == 1 { "" } else { "s" }),
    };
    let mut seen: Vec<(String, u16)> = Vec::new();
    for url in [&c.metrics_url, &c.logs_url] {
        let shown = super::show::url(url);
        let Some((host, port)) = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| Some((u.host_str()?.to_owned(), u.port_or_known_default()?)))
        else {
            out.push(finding("otlp", Status::Fail, format!("{shown}: no host and port in it")));
            continue;
        };
        if seen.contains(&(host.clone(), port)) {
            continue;
        }
        seen.push((host.clone(), port));
        out.push(match connect(&host, port, inputs.connect_timeout) {
            Ok(()) => finding("otlp", Status::Ok, format!("{shown} reachable{headers}")),
            Err(err) => finding(
                "otlp",
                Status::Fail,
                format!(
                    "{shown} not reachable ({err}): nothing is exported until it is; the ledger \
                     keeps every call meanwhile"
                ),
            ),
        });
    }
    if let Some(ca) = &c.ca_file
        && std::fs::metadata(ca).is_err()
    {
        let message = format!("the CA file {} cannot be read: TLS exports fail", ca.display());
        out.push(finding("otlp", Status::Fail, message).at(ca));
    }
    out
}

/// A TCP connection to `host:port` within `timeout` (per address the name resolves to).
fn connect(host: &str, port: u16, timeout: Duration) -> std::io::Result<()> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(_) => return Ok(()),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the name resolves to no address")))
}

/// The catalog: the embedded copy's age (or the newest LiteLLM file layered over it) and each
/// catalog file layered.
pub(super) fn catalog(config: &Config, now: SystemTime) -> Vec<Finding> {
    let mut out = Vec::new();
    let taken = embedded_taken();
    let mut newest = taken;
    let mut files = Vec::new();
    for path in &config.catalog_files {
        let changed = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        // The config loaded, so each file did too; read again for what it holds.
        let Ok(layer) = catalog_file::load_layer(path) else { continue };
        if let (CatalogLayer::Full(_), Some(t)) = (&layer, changed) {
            newest = newest.max(t);
        }
        let when = changed.map_or_else(String::new, |t| format!(", changed {}", ago_time(now, t)));
        let message = format!("{}: {}, {} models{when}", path.display(), layer.kind(), layer.len());
        files.push(finding("catalog", Status::Ok, message).at(path));
    }
    let days = now.duration_since(newest).unwrap_or_default().as_secs() / 86_400;
    let mut message = format!(
        "{} models; embedded: LiteLLM {} of {}",
        crate::numbers::thousands(config.catalog.len() as u64),
        embedded_version(),
        catalog_file::EMBEDDED_TAKEN
    );
    if newest != taken {
        message.push_str(&format!("; newest LiteLLM file {days} days old"));
    } else {
        message.push_str(&format!(" ({days} days old)"));
    }
    let status = if days > CATALOG_STALE_DAYS {
        message.push_str(&format!(
            ": over {CATALOG_STALE_DAYS} days, so newer models are likely unknown (their calls \
             get no cost); a newer acp-usage, or a newer LiteLLM \
             model_prices_and_context_window.json as --catalog or `catalog =` in the config, \
             brings them"
        ));
        Status::Warn
    } else {
        Status::Ok
    };
    out.push(finding("catalog", status, message));
    out.extend(files);
    out
}

/// When the embedded LiteLLM copy was taken.
pub(super) fn embedded_taken() -> SystemTime {
    let day = chrono::NaiveDate::parse_from_str(catalog_file::EMBEDDED_TAKEN, "%Y-%m-%d")
        .expect("EMBEDDED_TAKEN is a YYYY-MM-DD date");
    let secs = day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc().timestamp();
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64)
}

/// The LiteLLM release of the embedded copy (`1.109.1`), from its source line.
fn embedded_version() -> &'static str {
    catalog_file::EMBEDDED_SOURCE.split_whitespace().nth(2).unwrap_or("(unknown version)")
}

fn ago(now: SystemTime, then_ms: i64) -> String {
    let now_ms = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    crate::commands::watch::fmt_ago(now_ms, then_ms)
}

fn ago_time(now: SystemTime, then: SystemTime) -> String {
    let ms = then.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    ago(now, ms)
}
