//! Where the numbers come from: readers of what was billed, each turning what it sees into call
//! records for the ledger (the LLM-API tap, the agents' transcripts; the agent's own ACP reports
//! and the estimates from visible content are read by the relay's observer).

pub mod tap;
pub mod transcripts;
