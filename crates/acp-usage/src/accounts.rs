//! Whose subscription windows they are. A window belongs to an account, so each observation is
//! labelled with one: the provider's organisation id where a response states it (Anthropic's
//! `anthropic-organization-id`: `org:…`), its account id where a request states it (Codex's
//! `chatgpt-account-id`: `acct:…`), else a keyed fingerprint of the credential the agent sends
//! (its API key or OAuth token: `key:…`). When a response names the organisation of a
//! credential, the ledger keeps that pairing (`account_aliases`), so an API key seen before
//! names its organisation at the next start. At start the same label is made from the
//! credentials the agent will find (each agent's module says where,
//! [`crate::agents::Agent::credentials`]), so the windows remembered in the ledger are shown for
//! that account only.
//!
//! The fingerprint is HMAC-SHA256 (ring, which the TLS stack brings) under a random key kept
//! beside the ledger (`account.key`, mode 0600, made once by whichever process comes first):
//! it cannot be reversed, nor checked against a guessed key without that file. Neither the
//! credential nor its fingerprint is logged.

use std::path::Path;

use hyper::HeaderMap;
use ring::hmac;

/// What an agent's credentials say of its account before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The account's label as a request or response will state it (`acct:…`, `org:…`).
    Account(String),
    /// A secret the agent will send (an API key, an OAuth token): fingerprinted.
    Secret(String),
}

/// The secrets among an agent's variables `names` that are set (and not blank).
pub fn secrets_in(var: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Vec<Credential> {
    names
        .iter()
        .filter_map(|v| var(v).filter(|s| !s.trim().is_empty()))
        .map(Credential::Secret)
        .collect()
}

/// The key fingerprints are made with.
#[derive(Debug)]
pub struct Fingerprints {
    key: hmac::Key,
}

/// The key file's name, beside the ledger.
const KEY_FILE: &str = "account.key";
const KEY_LEN: usize = 32;

impl Fingerprints {
    /// The key beside the ledger at `ledger` (made when missing); a key of this process alone
    /// when it cannot be had, with one WARN (fingerprints then differ from other runs', so
    /// remembered windows are not shown until a response names the account).
    pub fn load(ledger: Option<&Path>) -> Fingerprints {
        let bytes = ledger.and_then(|l| match key_file(&l.with_file_name(KEY_FILE)) {
            Ok(k) => Some(k),
            Err(e) => {
                tracing::warn!("cannot keep the account key beside the ledger ({e}): windows are told apart by account in this run only");
                None
            }
        });
        let bytes = bytes.unwrap_or_else(|| {
            let mut k = [0u8; KEY_LEN];
            // Without randomness a fixed key is still non-reversible, only guessable.
            let _ = getrandom::fill(&mut k);
            k.to_vec()
        });
        Fingerprints { key: hmac::Key::new(hmac::HMAC_SHA256, &bytes) }
    }

    /// `key:` and the first 16 hex digits of the credential's HMAC.
    pub fn of(&self, secret: &str) -> String {
        let tag = hmac::sign(&self.key, secret.trim().as_bytes());
        let hex: String = tag.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("key:{hex}")
    }

    /// The account a response names (Anthropic's organisation), when it names one.
    pub fn of_response(headers: &HeaderMap) -> Option<String> {
        let org = headers.get("anthropic-organization-id")?.to_str().ok()?.trim();
        (!org.is_empty()).then(|| format!("org:{org}"))
    }

    /// The account a request names, else the fingerprint of the credential it carries.
    pub fn of_request(&self, headers: &HeaderMap) -> Option<String> {
        let get = |name: &str| {
            headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
        };
        if let Some(id) = get("chatgpt-account-id") {
            return Some(format!("acct:{id}"));
        }
        let bearer = get("authorization")
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let secret = get("x-api-key").or(get("x-goog-api-key")).or(bearer)?;
        Some(self.of(secret))
    }

    /// The account of an agent's credentials at start: one credential, else none (with two,
    /// which the agent will use is its own business, and a wrong guess would show another
    /// account's windows).
    pub fn of_credentials(&self, found: &[Credential]) -> Option<String> {
        let mut labels: Vec<String> = found
            .iter()
            .map(|c| match c {
                Credential::Account(label) => label.clone(),
                Credential::Secret(s) => self.of(s),
            })
            .collect();
        labels.sort();
        labels.dedup();
        match labels.len() {
            1 => labels.pop(),
            _ => None,
        }
    }
}

/// Reads the key file, or makes it: written whole to a file of this process, then linked into
/// place, so a concurrent reader never sees half a key and two makers agree on the first.
fn key_file(path: &Path) -> std::io::Result<Vec<u8>> {
    if let Ok(k) = std::fs::read(path)
        && k.len() == KEY_LEN
    {
        return Ok(k);
    }
    let mut key = [0u8; KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_file_name(format!("{KEY_FILE}.{}", std::process::id()));
    {
        use std::io::Write as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        // Not synced: a key lost to a crash is made again, and only costs the windows'
        // memory of that account until its next response; a sync would hold the tap's first
        // request for as long as the disk takes.
        let mut f = options.open(&tmp)?;
        f.write_all(&key)?;
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key.to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let k = std::fs::read(path)?;
            if k.len() == KEY_LEN {
                Ok(k)
            } else {
                Err(std::io::Error::other(format!("{} is not a key", path.display())))
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_per_ledger_and_labels_that_match_requests() {
        let dir = crate::test_support::scratch("accounts", "one-key");
        let ledger = dir.join("ledger.db");
        let a = Fingerprints::load(Some(&ledger));
        let b = Fingerprints::load(Some(&ledger));
        assert_eq!(a.of("sk-ant-1"), b.of("sk-ant-1"), "two processes, one key");
        assert_ne!(a.of("sk-ant-1"), a.of("sk-ant-2"));
        assert!(!a.of("sk-ant-1").contains("sk-ant"), "never the credential");
        let key = std::fs::read(dir.join(KEY_FILE)).unwrap();
        assert_eq!(key.len(), KEY_LEN);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        let mut h = HeaderMap::new();
        h.insert("x-api-key", "sk-ant-1".parse().unwrap());
        assert_eq!(a.of_request(&h), Some(a.of("sk-ant-1")));
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer tok".parse().unwrap());
        assert_eq!(a.of_request(&h), Some(a.of("tok")));
        h.insert("chatgpt-account-id", "user-123".parse().unwrap());
        assert_eq!(a.of_request(&h).as_deref(), Some("acct:user-123"));
        assert_eq!(a.of_request(&HeaderMap::new()), None);
        let mut r = HeaderMap::new();
        r.insert("anthropic-organization-id", "8d3f-org".parse().unwrap());
        assert_eq!(Fingerprints::of_response(&r).as_deref(), Some("org:8d3f-org"));
        assert_eq!(Fingerprints::of_response(&HeaderMap::new()), None);

        let one = [Credential::Secret("tok".into())];
        assert_eq!(a.of_credentials(&one), Some(a.of("tok")));
        let same = [Credential::Secret("tok".into()), Credential::Secret("tok".into())];
        assert_eq!(a.of_credentials(&same), Some(a.of("tok")));
        let two = [Credential::Secret("tok".into()), Credential::Account("acct:user-123".into())];
        assert_eq!(a.of_credentials(&two), None, "two logins: not a guess");
        assert_eq!(a.of_credentials(&[]), None);
    }

    #[test]
    fn a_key_file_that_is_not_a_key_is_refused() {
        let dir = crate::test_support::scratch("accounts", "bad-key");
        std::fs::write(dir.join(KEY_FILE), b"short").unwrap();
        assert!(key_file(&dir.join(KEY_FILE)).is_err());
        // The run still tells accounts apart, with a key of its own.
        let f = Fingerprints::load(Some(&dir.join("ledger.db")));
        assert!(f.of("x").starts_with("key:"));
    }
}
