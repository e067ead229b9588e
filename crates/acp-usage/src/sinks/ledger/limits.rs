//! The ledger's subscription windows: every observation kept (per account, provider and
//! window), and one row per window with its latest observation and the first of its current
//! period (`limit_windows`), which a relay loads at start and `status`, `watch` and the
//! forecast read; `report limits` reads the observations.

use acp_usage_core::limits::credits::Credits;
use acp_usage_core::limits::{Limit, LimitSource, Tracked};
use rusqlite::{OptionalExtension as _, params};

use super::schema;
use super::store::Store;

/// The first schema version with the `limits` table.
const SINCE_VERSION: i64 = 3;
/// The first with accounts and `limit_windows`.
const WINDOWS_VERSION: i64 = 7;

const WINDOW_COLUMNS: &str = "provider, limit_id, window, window_minutes, used_percent,
    resets_at, status, source, at, account, first_at, first_used";

impl Store {
    /// Keeps observations of subscription windows. The same observation written twice (two
    /// relays reading one response cannot, but a retry can) is kept once.
    pub fn limits(&mut self, limits: &[Limit], session: Option<&str>) -> rusqlite::Result<()> {
        let tx = self.conn_mut().transaction()?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO limits(provider, limit_id, window, window_minutes,
                    used_percent, resets_at, status, source, session, at, account)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for l in limits {
                insert.execute(params![
                    l.provider,
                    l.limit_id.as_deref().unwrap_or(""),
                    l.window,
                    l.window_minutes.map(|m| m as i64),
                    l.used_percent,
                    l.resets_at,
                    l.status,
                    l.source.as_str(),
                    session,
                    l.observed_ms,
                    l.account.as_deref().unwrap_or(""),
                ])?;
            }
            // Each window's row follows the same rules as the relay's board (a new period
            // starts over, an older observation changes nothing).
            let mut get = tx.prepare_cached(&format!(
                "SELECT {WINDOW_COLUMNS} FROM limit_windows
                 WHERE account = ?1 AND provider = ?2 AND limit_id = ?3 AND window = ?4"
            ))?;
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO limit_windows(account, provider, limit_id, window,
                    window_minutes, used_percent, resets_at, status, source, at, first_at,
                    first_used)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?;
            for l in limits {
                let (account, provider, limit_id, window) = l.key();
                let tracked = match get
                    .query_row(params![account, provider, limit_id, window], tracked)
                    .optional()?
                {
                    Some(mut t) => {
                        t.observe(l.clone());
                        t
                    }
                    None => Tracked::new(l.clone()),
                };
                let w = &tracked.latest;
                put.execute(params![
                    account,
                    provider,
                    limit_id,
                    window,
                    w.window_minutes.map(|m| m as i64),
                    w.used_percent,
                    w.resets_at,
                    w.status,
                    w.source.as_str(),
                    w.observed_ms,
                    tracked.first.0,
                    tracked.first.1,
                ])?;
            }
        }
        tx.commit()
    }

    /// Every observation since `since` (Unix ms), oldest first. An older file without the
    /// table has none.
    pub fn limits_since(&self, since: i64) -> rusqlite::Result<Vec<Limit>> {
        let version = schema::version(self.conn())?;
        if version < SINCE_VERSION {
            return Ok(Vec::new());
        }
        let account = if version < WINDOWS_VERSION { "''" } else { "account" };
        let mut q = self.conn().prepare(&format!(
            "SELECT provider, limit_id, window, window_minutes, used_percent, resets_at, status,
                    source, at, {account}
             FROM limits WHERE at >= ?1 ORDER BY at, id"
        ))?;
        let rows = q.query_map([since], observation)?;
        rows.collect()
    }

    /// Every window's current period as the ledger holds it (its latest observation and its
    /// first), of every account; those whose period ended before `now_s` (Unix seconds) when
    /// `now_s` is given. A file older than accounts has its windows' latest observations.
    pub fn windows(&self, now_s: Option<i64>) -> rusqlite::Result<Vec<Tracked>> {
        let version = schema::version(self.conn())?;
        if version < SINCE_VERSION {
            return Ok(Vec::new());
        }
        if version < WINDOWS_VERSION {
            let mut q = self.conn().prepare(
                "SELECT provider, limit_id, window, window_minutes, used_percent, resets_at,
                        status, source, at, ''
                 FROM limits l
                 WHERE id = (SELECT id FROM limits m
                             WHERE m.provider = l.provider AND m.limit_id = l.limit_id
                               AND m.window = l.window
                             ORDER BY at DESC, id DESC LIMIT 1)
                 ORDER BY provider, limit_id, window",
            )?;
            let rows = q.query_map([], observation)?;
            let all = rows.collect::<rusqlite::Result<Vec<Limit>>>()?;
            return Ok(all
                .into_iter()
                .filter(|l| now_s.is_none_or(|now| l.resets_at.is_some_and(|r| r > now)))
                .map(Tracked::new)
                .collect());
        }
        let mut q = self.conn().prepare_cached(&format!(
            "SELECT {WINDOW_COLUMNS} FROM limit_windows
             WHERE ?1 IS NULL OR resets_at > ?1
             ORDER BY provider, limit_id, window, account"
        ))?;
        let rows = q.query_map([now_s], tracked)?;
        rows.collect()
    }

    /// The latest observation of each window of the account in use per provider (the one
    /// observed last), with its forecast as of `now_ms`.
    pub fn latest_limits(&self, now_ms: i64) -> rusqlite::Result<Vec<Limit>> {
        let all: Vec<Limit> = self.windows(None)?.iter().map(|t| t.shown(now_ms)).collect();
        let mut in_use: std::collections::BTreeMap<&str, (i64, Option<&str>)> = Default::default();
        for l in &all {
            let e = in_use.entry(l.provider.as_str()).or_insert((i64::MIN, None));
            if l.observed_ms > e.0 {
                *e = (l.observed_ms, l.account.as_deref());
            }
        }
        let keep: Vec<bool> =
            all.iter().map(|l| in_use[l.provider.as_str()].1 == l.account.as_deref()).collect();
        Ok(all.into_iter().zip(keep).filter_map(|(l, k)| k.then_some(l)).collect())
    }

    /// Keeps a statement of credits and plan.
    pub fn credits(&mut self, c: &Credits) -> rusqlite::Result<()> {
        self.conn_mut()
            .prepare_cached(
                "INSERT INTO credits(account, provider, has_credits, unlimited, balance,
                    plan_type, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                c.account.as_deref().unwrap_or(""),
                c.provider,
                c.has_credits,
                c.unlimited,
                c.balance,
                c.plan_type,
                c.observed_ms,
            ])
            .map(drop)
    }

    /// Keeps the account a response named for a credential (its fingerprint).
    pub fn alias(&mut self, credential: &str, account: &str) -> rusqlite::Result<()> {
        self.conn_mut()
            .prepare_cached(
                "INSERT OR REPLACE INTO account_aliases(credential, account, at)
                 VALUES (?1, ?2, ?3)",
            )?
            .execute(params![credential, account, super::now_ms()])
            .map(drop)
    }

    /// The account a response last named for a credential, if one did.
    pub fn aliased(&self, credential: &str) -> rusqlite::Result<Option<String>> {
        if schema::version(self.conn())? < WINDOWS_VERSION {
            return Ok(None);
        }
        self.conn()
            .query_row(
                "SELECT account FROM account_aliases WHERE credential = ?1",
                [credential],
                |r| r.get(0),
            )
            .optional()
    }

    /// The latest statement of credits per account and provider.
    pub fn latest_credits(&self) -> rusqlite::Result<Vec<Credits>> {
        if schema::version(self.conn())? < WINDOWS_VERSION {
            return Ok(Vec::new());
        }
        let mut q = self.conn().prepare(
            "SELECT account, provider, has_credits, unlimited, balance, plan_type, at
             FROM credits c
             WHERE id = (SELECT MAX(id) FROM credits d
                         WHERE d.account = c.account AND d.provider = c.provider)
             ORDER BY provider, account",
        )?;
        let rows = q.query_map([], |r| {
            let account: String = r.get(0)?;
            Ok(Credits {
                account: (!account.is_empty()).then_some(account),
                provider: r.get(1)?,
                has_credits: r.get(2)?,
                unlimited: r.get(3)?,
                balance: r.get(4)?,
                plan_type: r.get(5)?,
                observed_ms: r.get(6)?,
            })
        })?;
        rows.collect()
    }

    /// When the latest observation was made, if any.
    pub fn last_limit_at(&self) -> rusqlite::Result<Option<i64>> {
        if schema::version(self.conn())? < SINCE_VERSION {
            return Ok(None);
        }
        self.conn()
            .query_row("SELECT MAX(at) FROM limits", [], |r| r.get(0))
            .optional()
            .map(Option::flatten)
    }
}

/// An observation: provider, limit id, window, minutes, used, reset, status, source, at,
/// account.
fn observation(r: &rusqlite::Row<'_>) -> rusqlite::Result<Limit> {
    let limit_id: String = r.get(1)?;
    let source: String = r.get(7)?;
    let account: String = r.get(9)?;
    Ok(Limit {
        provider: r.get(0)?,
        limit_id: (!limit_id.is_empty()).then_some(limit_id),
        window: r.get(2)?,
        window_minutes: r.get::<_, Option<i64>>(3)?.map(|m| m as u64),
        used_percent: r.get(4)?,
        resets_at: r.get(5)?,
        status: r.get(6)?,
        source: LimitSource::parse(&source).unwrap_or(LimitSource::Tap),
        observed_ms: r.get(8)?,
        account: (!account.is_empty()).then_some(account),
        runs_out_at: None,
    })
}

/// A `limit_windows` row: an observation, then the period's first (at, used).
fn tracked(r: &rusqlite::Row<'_>) -> rusqlite::Result<Tracked> {
    Ok(Tracked { latest: observation(r)?, first: (r.get(10)?, r.get(11)?) })
}
