//! Per-session accounting. (Stub; replaced below.)

/// Per-session ledger.
#[derive(Debug, Default)]
pub struct Ledger;
/// A point-in-time view.
#[derive(Debug, Default)]
pub struct Snapshot;
/// A turn's usage.
#[derive(Debug, Default)]
pub struct TurnUsage;
