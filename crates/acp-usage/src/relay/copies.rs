//! What the relay copies off its path: `--record` and `--validate` see each line through
//! [`Copies`], a copy handed over with `try_send`, so neither can ever hold the relay up.

use std::sync::Arc;
use std::time::Instant;

use super::live_validate::Live;
use crate::record::{CopiedLine, Dir, Recorder};

/// What the relay copies off its path: the recording and the live validator.
#[derive(Debug)]
pub struct Copies {
    recorder: Option<Recorder>,
    validator: Option<Live>,
    /// Lines copied so far.
    seq: u64,
    start: Instant,
}

impl Default for Copies {
    fn default() -> Copies {
        Copies::new(None, None)
    }
}

impl Copies {
    /// Copies for a recording and/or live validation; both `None` costs the relay nothing.
    pub fn new(recorder: Option<Recorder>, validator: Option<Live>) -> Copies {
        Copies { recorder, validator, seq: 0, start: Instant::now() }
    }

    /// Whether anything is copied.
    pub(super) fn active(&self) -> bool {
        self.recorder.is_some() || self.validator.is_some()
    }

    /// Copies one line (without its terminator) that is being sent on.
    pub(super) fn line(&mut self, dir: Dir, bytes: &[u8], rewritten: bool) {
        if self.recorder.is_none() && self.validator.is_none() {
            return;
        }
        self.seq += 1;
        let t = self.start.elapsed().as_micros() as f64 / 1e6;
        // One copy, shared by both consumers.
        let line = CopiedLine { seq: self.seq, t, dir, rewritten, bytes: Arc::from(bytes) };
        if let Some(r) = &mut self.recorder {
            r.offer(&line);
        }
        if let Some(v) = &mut self.validator {
            v.offer(&line);
        }
    }

    /// Waits for both to finish what they were given, and logs their summaries.
    pub(super) async fn finish(self) {
        if let Some(r) = self.recorder {
            r.finish().await;
        }
        if let Some(v) = self.validator {
            v.finish().await;
        }
    }
}
