//! The scenarios of the benchmark and their default sizes.

use std::fmt;

/// What a scenario drives through the relay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `sessions` sessions each get one prompt answered by `chunks` `agent_message_chunk`s of
    /// `size` bytes of text; the prompts are sent together, so the streams interleave.
    Stream {
        /// Concurrent sessions.
        sessions: u32,
        /// Chunks per session.
        chunks: u64,
        /// Text bytes per chunk.
        size: usize,
    },
    /// `session/load` replays `history` user/agent chunks before its response.
    Load {
        /// History messages replayed.
        history: u64,
        /// Text bytes per message.
        size: usize,
    },
    /// Small `_bench/echo` requests, one at a time.
    RoundTrip {
        /// Timed round trips.
        trips: usize,
        /// Untimed round trips first.
        warmup: usize,
    },
    /// One prompt streams a burst; the client reads its first `slow_bytes` at `rate` bytes/s,
    /// then the rest at full speed.
    Slow {
        /// Chunks in the burst.
        chunks: u64,
        /// Text bytes per chunk.
        size: usize,
        /// Bytes read slowly.
        slow_bytes: u64,
        /// Bytes per second while slow.
        rate: f64,
    },
}

/// A named scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it does.
    pub kind: Kind,
}

/// Names of every scenario, in the order they run.
pub const NAMES: [&str; 8] =
    ["small", "large-64k", "large-1m", "large-16m", "rtt", "sessions", "load", "slow"];

const MIB: usize = 1024 * 1024;

impl Scenario {
    /// The scenario `name` at full size, or scaled down for a smoke run.
    pub fn by_name(name: &str, quick: bool) -> Option<Scenario> {
        let q = |full: u64, small: u64| if quick { small } else { full };
        let large = |size: usize| {
            // 256 MiB per run (32 MiB quick), at least 4 lines.
            let total = q(256, 32) as usize * MIB;
            Kind::Stream { sessions: 1, chunks: (total / size).max(4) as u64, size }
        };
        let kind = match name {
            "small" => Kind::Stream { sessions: 1, chunks: q(200_000, 20_000), size: 200 },
            "large-64k" => large(64 * 1024),
            "large-1m" => large(MIB),
            "large-16m" => large(16 * MIB),
            "rtt" => Kind::RoundTrip { trips: q(2_000, 500) as usize, warmup: 200 },
            "sessions" => Kind::Stream { sessions: 100, chunks: q(2_000, 200), size: 200 },
            "load" => Kind::Load { history: q(100_000, 10_000), size: 200 },
            "slow" => Kind::Slow {
                chunks: q(1024, 256),
                size: 64 * 1024,
                slow_bytes: q(4_000_000, 1_000_000),
                rate: 1e6,
            },
            _ => return None,
        };
        let name = NAMES.iter().find(|n| **n == name)?;
        Some(Scenario { name, kind })
    }

    /// Whether the scenario's headline figure is throughput in MB/s (else messages/s or time).
    pub fn is_bulk(&self) -> bool {
        matches!(self.kind, Kind::Stream { size, .. } if size >= 64 * 1024)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Stream { sessions: 1, chunks, size } => write!(
                f,
                "{}: one prompt streams {chunks} agent_message_chunk of {} text",
                self.name,
                bytes(size as u64)
            ),
            Kind::Stream { sessions, chunks, size } => write!(
                f,
                "{}: {sessions} sessions, one prompt each sent together, {chunks} chunks of {} each, interleaved",
                self.name,
                bytes(size as u64)
            ),
            Kind::Load { history, size } => write!(
                f,
                "{}: session/load replays {history} history messages of {}",
                self.name,
                bytes(size as u64)
            ),
            Kind::RoundTrip { trips, warmup } => {
                write!(
                    f,
                    "{}: {trips} small request/response round trips (after {warmup} untimed)",
                    self.name
                )
            }
            Kind::Slow { chunks, size, slow_bytes, rate } => write!(
                f,
                "{}: a burst of {} ({chunks} chunks of {}); the editor reads the first {} at {}/s",
                self.name,
                bytes(chunks * size as u64),
                bytes(size as u64),
                bytes(slow_bytes),
                bytes(rate as u64)
            ),
        }
    }
}

/// A byte count for people: `200 B`, `64 KiB`, `16 MiB`, `4.0 MB`.
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n >> 10)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves() {
        for n in NAMES {
            let s = Scenario::by_name(n, false).unwrap();
            assert_eq!(s.name, n);
            assert!(!s.to_string().is_empty());
        }
        assert!(Scenario::by_name("nope", false).is_none());
        assert_eq!(bytes(64 * 1024), "64 KiB");
        assert_eq!(bytes(16 << 20), "16 MiB");
        assert_eq!(bytes(200), "200 B");
    }
}
