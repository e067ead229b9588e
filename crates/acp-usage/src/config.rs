//! The user config file and the catalog it and `--catalog` layer over the embedded one.
//! (Stub; the full implementation replaces this file.)

use acp_usage_core::Catalog;

use crate::cli::RelayArgs;

/// The catalog to use: embedded, then the config file's overrides, then `--catalog`.
pub fn load_catalog(_args: &RelayArgs) -> anyhow::Result<Catalog> {
    Ok(Catalog::default())
}
