//! gemini transcript parser (being written).
