//! The user config file and the catalog it and `--catalog` layer over the embedded one.
//!
//! The config file is TOML, found at `--config`, else `$ACP_USAGE_CONFIG`, else
//! `$XDG_CONFIG_HOME/acp-usage/config.toml`, else `~/.config/acp-usage/config.toml`:
//!
//! ```toml
//! catalog = "litellm.json"   # a newer LiteLLM file or an override file, relative to this file
//! default_window = 200000    # the context window when nothing else is known
//! tap = false                # the LLM-API tap is on by default; false turns it off (`--tap off`)
//!
//! [models."my-model"]        # same shape as an override file; USD per 1M tokens
//! window = 200000
//! input = 3.0
//! output = 15.0
//!
//! [budget]                   # USD; each optional
//! session = 5.0
//! day = 20.0
//! month = 300.0
//! warn_at = [0.75, 0.9]      # fractions of each budget that are noticed (the default)
//! action = "warn"            # or "block": a prompt past a budget is refused
//!
//! [context]
//! warn_at = [0.75, 0.9, 0.95] # fractions of the window that are noticed (the default)
//!
//! [limits]
//! warn_at = [0.75, 0.9]      # fractions of a subscription window that are noticed, besides
//!                            # the limit itself (the default)
//!
//! [notices]
//! chat = true                # a client that shows no `notice` updates gets a window's or a
//!                            # budget's crossing as one line of agent message text (the default)
//!
//! [commands]
//! usage = "usage"            # the name of acp-usage's own `/usage` command; "" turns it off
//!
//! [otlp]                     # OTLP export; the OTEL_* variables win over these
//! endpoint = "http://127.0.0.1:4318"
//! headers = { "x-api-key" = "..." }
//! resource_attributes = { team = "platform" }
//! export_interval_ms = 60000
//! ```
//!
//! Layering, lowest first: the embedded catalog, the config's `catalog` file, the config's
//! `[models]`, then `--catalog FILE`. A missing default config file is normal; a file named on
//! the command line or in the environment must exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use acp_usage_core::Catalog;
use acp_usage_core::budget::{
    DEFAULT_BUDGET_WARN, DEFAULT_CONTEXT_WARN, DEFAULT_LIMIT_WARN, Lines, Scope,
};
use anyhow::{Context, bail};
use serde::Deserialize;

use crate::catalog_file::{self, ModelOverride, Overrides};

/// Environment variable naming the config file.
pub const CONFIG_ENV: &str = "ACP_USAGE_CONFIG";

/// The context window assumed when neither the agent nor the catalog knows one: the window of
/// most models agents have run on (Claude's standard window).
pub const DEFAULT_WINDOW: u64 = 200_000;

/// Everything the config decides.
#[derive(Debug, Clone)]
pub struct Config {
    /// The layered catalog.
    pub catalog: Catalog,
    /// The window used when nothing else is known.
    pub default_window: u64,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// The catalog files layered over the embedded catalog, in order (the config's `catalog`,
    /// then `--catalog`).
    pub catalog_files: Vec<PathBuf>,
    /// `tap = true|false`: whether the LLM-API tap is on (unset: on).
    pub tap: Option<bool>,
    /// `[budget]` and `[context]`.
    pub budgets: Budgets,
    /// `[otlp]` (the `OTEL_*` variables are read when the exporter is configured).
    pub otlp: Option<crate::sinks::otlp::OtlpTable>,
    /// `[commands] usage`: the name of the `/usage` command acp-usage answers itself (`None`:
    /// off).
    pub usage_command: Option<String>,
    /// The config file's keys nothing reads (`budget.sesion`): ignored, logged, and named by
    /// `doctor`.
    pub unknown_keys: Vec<String>,
}

impl Config {
    /// Whether the LLM-API tap is on: as `--tap` (or `ACP_USAGE_TAP`) says, else the config
    /// file's `tap`, else on. The one rule the relay and `doctor` share; the relay then starts
    /// it only for a profile that can point the agent (the generic one only when `--tap on` or
    /// `ACP_USAGE_TAP=1` asked for the tap: `asked` is `Some(true)`).
    pub fn tap_on(&self, asked: Option<bool>) -> bool {
        asked.or(self.tap).unwrap_or(true)
    }
}

/// The name of acp-usage's own command when the config does not rename it.
pub const DEFAULT_USAGE_COMMAND: &str = "usage";

/// Budgets and the lines whose crossing is noticed.
#[derive(Debug, Clone, PartialEq)]
pub struct Budgets {
    /// Each budget set, in USD.
    pub limits: Vec<(Scope, f64)>,
    /// The lines of a budget that are noticed: its `warn_at` fractions and the limit itself.
    pub warn_at: Lines,
    /// `action = "block"`: a prompt that would start past a budget is refused.
    pub block: bool,
    /// The fractions of the context window that are noticed.
    pub context_warn_at: Lines,
    /// The lines of a subscription window that are noticed: `[limits] warn_at` and the limit.
    pub limits_warn_at: Lines,
    /// `[notices] chat`: a client that does not show `notice` updates is told a window's or a
    /// budget's crossing in the chat (one line of agent message text in the turn).
    pub chat: bool,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            limits: Vec::new(),
            warn_at: Lines::new(&DEFAULT_BUDGET_WARN, true),
            block: false,
            context_warn_at: Lines::new(&DEFAULT_CONTEXT_WARN, false),
            limits_warn_at: Lines::new(&DEFAULT_LIMIT_WARN, true),
            chat: true,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct BudgetTable {
    session: Option<f64>,
    day: Option<f64>,
    month: Option<f64>,
    warn_at: Option<Vec<f64>>,
    action: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ContextTable {
    warn_at: Option<Vec<f64>>,
}

/// `[limits]`: subscription windows.
#[derive(Debug, Default, Deserialize)]
struct LimitsTable {
    warn_at: Option<Vec<f64>>,
}

/// `[notices]`: how crossings reach a client.
#[derive(Debug, Default, Deserialize)]
struct NoticesTable {
    chat: Option<bool>,
}

/// `[commands]`: acp-usage's own slash commands.
#[derive(Debug, Default, Deserialize)]
struct CommandsTable {
    usage: Option<String>,
}

/// The config file's shape. Keys this version does not know are logged, not refused, so an
/// older binary still starts with a newer config ([`keys::parse`] collects them).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ConfigFile {
    catalog: Option<PathBuf>,
    default_window: Option<u64>,
    tap: Option<bool>,
    #[serde(default)]
    models: BTreeMap<String, ModelOverride>,
    budget: Option<BudgetTable>,
    context: Option<ContextTable>,
    limits: Option<LimitsTable>,
    notices: Option<NoticesTable>,
    commands: Option<CommandsTable>,
    otlp: Option<crate::sinks::otlp::OtlpTable>,
}

// The keys the file's types read, and the ones a file has that none reads.
#[path = "config_keys.rs"]
pub mod keys;

/// Where the config file is, and whether the user named it (then it must exist).
pub fn config_path(explicit: Option<&Path>) -> Option<(PathBuf, bool)> {
    config_path_in(explicit, &|name| std::env::var_os(name))
}

/// [`config_path`] in the environment `env` reads (`doctor` asks it of the environment it
/// checks).
pub fn config_path_in(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<(PathBuf, bool)> {
    if let Some(path) = explicit {
        return Some((path.to_owned(), true));
    }
    let env = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = env(CONFIG_ENV) {
        return Some((path, true));
    }
    let base = env("XDG_CONFIG_HOME").or_else(|| env("HOME").map(|home| home.join(".config")))?;
    Some((base.join("acp-usage").join("config.toml"), false))
}

/// Reads the config (`--config`, else as [`config_path`] says) and layers the catalog:
/// embedded, then the config file's overrides, then `--catalog`.
pub fn load(config: Option<&Path>, catalog: Option<&Path>) -> anyhow::Result<Config> {
    load_from(config_path(config), catalog)
}

/// [`load`] with the config location already resolved (see [`config_path`]).
pub fn load_from(
    config: Option<(PathBuf, bool)>,
    catalog_arg: Option<&Path>,
) -> anyhow::Result<Config> {
    // Copies nothing: the embedded catalog is a static table, and the layers below are kept
    // as owned entries over it.
    let mut catalog = Catalog::embedded().clone();
    let mut default_window = DEFAULT_WINDOW;
    let mut config_file = None;
    let mut catalog_files = Vec::new();
    let mut tap = None;
    let mut budgets = Budgets::default();
    let mut otlp = None;
    let mut usage_command = Some(DEFAULT_USAGE_COMMAND.to_owned());
    let mut unknown_keys = Vec::new();

    if let Some((path, explicit)) = config {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let (file, unknown) = keys::parse(&text)
                    .with_context(|| format!("in config file {}", path.display()))?;
                for key in &unknown {
                    tracing::warn!("config file {}: ignoring unknown key `{key}`", path.display());
                }
                unknown_keys = unknown;
                tap = file.tap;
                budgets = read_budgets(&path, &file)?;
                otlp = file.otlp.clone();
                usage_command = read_usage_command(&path, &file)?;
                catalog_files.extend(apply_config(&path, file, &mut catalog, &mut default_window)?);
                config_file = Some(path);
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !explicit => {
                tracing::debug!("no config file at {}", path.display());
            }
            Err(err) => {
                return Err(err).with_context(|| format!("reading config file {}", path.display()));
            }
        }
    }

    if let Some(path) = catalog_arg {
        apply_catalog_file(path, &mut catalog)?;
        catalog_files.push(path.to_owned());
    }
    tracing::info!("catalog: {} models from {}", catalog.len(), catalog.source());
    Ok(Config {
        catalog,
        default_window,
        config_file,
        catalog_files,
        tap,
        budgets,
        otlp,
        usage_command,
        unknown_keys,
    })
}

/// `[commands] usage`: the command's name (a leading `/` is allowed and dropped), `None` when
/// it is `""`. A name is one word: the editor's `/` menu and the prompt both show it.
fn read_usage_command(path: &Path, file: &ConfigFile) -> anyhow::Result<Option<String>> {
    let Some(name) = file.commands.as_ref().and_then(|c| c.usage.as_deref()) else {
        return Ok(Some(DEFAULT_USAGE_COMMAND.to_owned()));
    };
    let name = name.strip_prefix('/').unwrap_or(name);
    if name.is_empty() {
        return Ok(None);
    }
    if name.chars().any(|c| c.is_whitespace() || c == '/') {
        bail!(
            "in config file {}: commands.usage is `{name}`; a command name is one word, or \"\" \
             to turn the command off",
            path.display()
        );
    }
    Ok(Some(name.to_owned()))
}

/// The `[budget]` and `[context]` tables, checked: amounts positive, fractions in (0, 1].
fn read_budgets(path: &Path, file: &ConfigFile) -> anyhow::Result<Budgets> {
    let (budget, context) = (file.budget.as_ref(), file.context.as_ref());
    let mut b = Budgets::default();
    let fractions = |what: &str, v: &Vec<f64>| -> anyhow::Result<Vec<f64>> {
        if let Some(bad) = v.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
            bail!(
                "in config file {}: {what}.warn_at holds {bad}; fractions are between 0 and 1",
                path.display()
            );
        }
        Ok(v.clone())
    };
    if let Some(t) = budget {
        for (scope, limit) in
            [(Scope::Session, t.session), (Scope::Day, t.day), (Scope::Month, t.month)]
        {
            match limit {
                Some(l) if l > 0.0 && l.is_finite() => b.limits.push((scope, l)),
                Some(l) => bail!(
                    "in config file {}: budget.{} is {l}; a budget is a positive amount of USD",
                    path.display(),
                    scope.as_str()
                ),
                None => {}
            }
        }
        if let Some(w) = &t.warn_at {
            b.warn_at = Lines::new(&fractions("budget", w)?, true);
        }
        b.block = match t.action.as_deref() {
            None | Some("warn") => false,
            Some("block") => true,
            Some(other) => bail!(
                "in config file {}: budget.action is `{other}`; it is `warn` or `block`",
                path.display()
            ),
        };
    }
    if let Some(w) = context.and_then(|c| c.warn_at.as_ref()) {
        b.context_warn_at = Lines::new(&fractions("context", w)?, false);
    }
    if let Some(w) = file.limits.as_ref().and_then(|l| l.warn_at.as_ref()) {
        b.limits_warn_at = Lines::new(&fractions("limits", w)?, true);
    }
    if let Some(chat) = file.notices.as_ref().and_then(|n| n.chat) {
        b.chat = chat;
    }
    Ok(b)
}

/// Puts one config file's settings in place, in layering order; the catalog file it named.
fn apply_config(
    path: &Path,
    file: ConfigFile,
    catalog: &mut Catalog,
    default_window: &mut u64,
) -> anyhow::Result<Option<PathBuf>> {
    if let Some(window) = file.default_window {
        if window == 0 {
            bail!("in config file {}: default_window must be positive", path.display());
        }
        *default_window = window;
    }
    let mut catalog_file = None;
    if let Some(rel) = &file.catalog {
        let dir = path.parent().unwrap_or(Path::new("."));
        let resolved = dir.join(expand_home(rel));
        apply_catalog_file(&resolved, catalog)
            .with_context(|| format!("the `catalog` of config file {}", path.display()))?;
        catalog_file = Some(resolved);
    }
    if !file.models.is_empty() {
        let overrides =
            Overrides::from_models(format!("{} [models]", path.display()), &file.models)?;
        overrides.apply(catalog)?;
        tracing::info!(
            "catalog: {} model overrides from config file {}",
            file.models.len(),
            path.display()
        );
    }
    tracing::info!("read config file {}", path.display());
    Ok(catalog_file)
}

/// Layers one catalog file over `catalog`.
fn apply_catalog_file(path: &Path, catalog: &mut Catalog) -> anyhow::Result<()> {
    let layer = catalog_file::load_layer(path)?;
    tracing::info!("catalog: {} models from {} {}", layer.len(), layer.kind(), path.display());
    layer.apply(catalog)
}

/// `~/x` → `$HOME/x`, the one shell expansion people expect in a config path.
fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn layers_in_order() {
        let dir = temp_dir("layers");
        std::fs::write(
            dir.join("extra.toml"),
            "[models.\"claude-sonnet-4-5\"]\ninput = 1.0\n[models.\"layered\"]\nwindow = 5\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("config.toml"),
            "catalog = \"extra.toml\"\ndefault_window = 128000\nfuture_key = 1\n\
             [models.\"claude-sonnet-4-5\"]\noutput = 20.0\n[models.\"layered\"]\nwindow = 6\n",
        )
        .unwrap();
        std::fs::write(dir.join("cli.toml"), "[models.\"layered\"]\nmax_output = 7\n").unwrap();

        let config = Some((dir.join("config.toml"), true));
        let s = load_from(config, Some(&dir.join("cli.toml"))).unwrap();
        assert_eq!(s.default_window, 128_000);
        let sonnet = s.catalog.get("claude-sonnet-4-5").unwrap();
        let p = sonnet.prices.as_ref().unwrap();
        assert_eq!((p.input, p.output, p.cache_read), (1e-6, 2e-5, Some(3e-7)));
        assert_eq!(sonnet.max_input, Some(200_000));
        let layered = s.catalog.get("layered").unwrap();
        assert_eq!((layered.max_input, layered.max_output), (Some(6), Some(7)));
        assert!(s.catalog.source().contains("overrides"), "{}", s.catalog.source());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_files() {
        let dir = temp_dir("missing");
        let absent = dir.join("nope.toml");
        let s = load_from(Some((absent.clone(), false)), None).unwrap();
        assert_eq!(s.default_window, DEFAULT_WINDOW);
        assert_eq!(s.catalog.len(), Catalog::embedded().len());
        let err = load_from(Some((absent.clone(), true)), None).unwrap_err();
        assert!(format!("{err:#}").contains("nope.toml"), "{err:#}");
        let err = load_from(None, Some(&absent)).unwrap_err();
        assert!(format!("{err:#}").contains("nope.toml"), "{err:#}");
        std::fs::write(dir.join("zero.toml"), "default_window = 0\n").unwrap();
        let err = load_from(Some((dir.join("zero.toml"), true)), None).unwrap_err();
        assert!(format!("{err:#}").contains("default_window"), "{err:#}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn usage_command_is_renamed_or_turned_off() {
        let dir = temp_dir("commands");
        let read = |text: &str| {
            std::fs::write(dir.join("c.toml"), text).unwrap();
            load_from(Some((dir.join("c.toml"), true)), None).map(|c| c.usage_command)
        };
        assert_eq!(read("").unwrap().as_deref(), Some("usage"));
        assert_eq!(read("[commands]\n").unwrap().as_deref(), Some("usage"));
        assert_eq!(read("[commands]\nusage = \"cost\"\n").unwrap().as_deref(), Some("cost"));
        assert_eq!(read("[commands]\nusage = \"/spend\"\n").unwrap().as_deref(), Some("spend"));
        assert_eq!(read("[commands]\nusage = \"\"\n").unwrap(), None);
        let err = read("[commands]\nusage = \"my usage\"\n").unwrap_err();
        assert!(format!("{err:#}").contains("commands.usage"), "{err:#}");
        let absent = load_from(Some((dir.join("absent.toml"), false)), None).unwrap();
        assert_eq!(absent.usage_command.as_deref(), Some("usage"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
