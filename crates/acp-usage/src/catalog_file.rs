//! Reading catalogs from files: LiteLLM's JSON, or small TOML/JSON override files.
//! (Stub; the full implementation replaces this file.)
