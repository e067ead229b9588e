//! The ledger's subscription windows: every observation kept (per provider and window), read
//! back by `status`, `watch` and `report limits`.

use acp_usage_core::limits::{Limit, LimitSource};
use rusqlite::{OptionalExtension as _, params};

use super::schema;
use super::store::Store;

/// The first schema version with the `limits` table.
const SINCE_VERSION: i64 = 3;

impl Store {
    /// Keeps observations of subscription windows. The same observation written twice (two
    /// relays reading one response cannot, but a retry can) is kept once.
    pub fn limits(&mut self, limits: &[Limit], session: Option<&str>) -> rusqlite::Result<()> {
        let tx = self.conn_mut().transaction()?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO limits(provider, limit_id, window, window_minutes,
                    used_percent, resets_at, status, source, session, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
                ])?;
            }
        }
        tx.commit()
    }

    /// Every observation since `since` (Unix ms), oldest first. An older file without the
    /// table has none.
    pub fn limits_since(&self, since: i64) -> rusqlite::Result<Vec<Limit>> {
        if schema::version(self.conn())? < SINCE_VERSION {
            return Ok(Vec::new());
        }
        let mut q = self.conn().prepare(
            "SELECT provider, limit_id, window, window_minutes, used_percent, resets_at, status,
                    source, at
             FROM limits WHERE at >= ?1 ORDER BY at, id",
        )?;
        let rows = q.query_map([since], row)?;
        rows.collect()
    }

    /// The latest observation of each window.
    pub fn latest_limits(&self) -> rusqlite::Result<Vec<Limit>> {
        if schema::version(self.conn())? < SINCE_VERSION {
            return Ok(Vec::new());
        }
        let mut q = self.conn().prepare(
            "SELECT provider, limit_id, window, window_minutes, used_percent, resets_at, status,
                    source, at
             FROM limits l
             WHERE id = (SELECT id FROM limits m
                         WHERE m.provider = l.provider AND m.limit_id = l.limit_id
                           AND m.window = l.window
                         ORDER BY at DESC, id DESC LIMIT 1)
             ORDER BY provider, limit_id, window",
        )?;
        let rows = q.query_map([], row)?;
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

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Limit> {
    let limit_id: String = r.get(1)?;
    let source: String = r.get(7)?;
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
    })
}
