//! codex transcript parser (being written).
