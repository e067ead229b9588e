//! claude transcript parser (being written).
