//! The catalog end to end: the embedded file is fresh, catalog files load, `models` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use acp_usage::catalog_file::{self, CatalogLayer, EMBEDDED_CATALOG_FILE};
use acp_usage_core::Catalog;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory private to one test of this process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("acp-usage-catalog-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The generated file matches what the compiler makes of the pinned LiteLLM JSON. When it does
/// not, the test rewrites it (so the fix is one `git add` away) and fails.
#[test]
fn embedded_catalog_is_fresh() {
    let root = workspace_root();
    let fresh = catalog_file::generate_embedded(&root).unwrap();
    let path = root.join(EMBEDDED_CATALOG_FILE);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current.replace("\r\n", "\n") != fresh {
        std::fs::write(&path, &fresh).unwrap();
        panic!("catalog.tsv was stale; regenerated, commit it");
    }
    // What the binary compiled in is that same text.
    assert_eq!(
        Catalog::embedded_text().replace("\r\n", "\n"),
        fresh,
        "rebuild: the embedded catalog predates the file"
    );
    assert!(fresh.len() < 400_000, "the compact catalog grew to {} bytes", fresh.len());
}

#[test]
fn toml_overrides_change_only_given_fields() {
    let dir = scratch("toml");
    let path = dir.join("overrides.toml");
    std::fs::write(
        &path,
        r#"
[models."my-model"]
window = 200000          # input context window
max_output = 64000
input = 3.0              # USD per 1M tokens
output = 15.0
cache_read = 0.3
cache_write_5m = 3.75
cache_write_1h = 6.0
[models."my-model".long_context]
threshold = 200000
input = 6.0
output = 22.5

[models."claude-sonnet-4-5"]
output = 16.0
"#,
    )
    .unwrap();

    let catalog = catalog_file::load_file(&path).unwrap();
    assert_eq!(catalog.len(), 2);
    let mine = catalog.get("my-model").unwrap();
    assert_eq!((mine.max_input, mine.max_output), (Some(200_000), Some(64_000)));
    let p = mine.prices.as_ref().unwrap();
    assert_eq!((p.input, p.output, p.cache_read), (3e-6, 1.5e-5, Some(3e-7)));
    assert_eq!((p.cache_write_5m, p.cache_write_1h), (Some(3.75e-6), Some(6e-6)));
    let tier = p.tier.as_ref().unwrap();
    assert_eq!((tier.threshold, tier.prices.input, tier.prices.output), (200_000, 6e-6, 2.25e-5));

    // The embedded Sonnet keeps everything but its output price.
    let sonnet = catalog.get("claude-sonnet-4-5").unwrap();
    let p = sonnet.prices.as_ref().unwrap();
    assert_eq!((sonnet.provider.as_str(), sonnet.max_input), ("anthropic", Some(200_000)));
    assert_eq!((p.input, p.output, p.cache_write_1h), (3e-6, 1.6e-5, Some(6e-6)));

    // Layered over the embedded catalog, the rest is untouched.
    let mut layered = Catalog::embedded().clone();
    layered.merge(catalog);
    assert_eq!(layered.len(), Catalog::embedded().len() + 1);
    assert_eq!(
        layered.lookup("claude-sonnet-4-5-20250929"),
        Catalog::embedded().get("claude-sonnet-4-5-20250929")
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tiny_litellm_json_loads() {
    let dir = scratch("litellm");
    let path = dir.join("prices.json");
    std::fs::write(
        &path,
        r#"{
  "sample_spec": {"max_input_tokens": "max input tokens", "litellm_provider": "one of https://docs.litellm.ai/docs/providers"},
  "new-model-9": {
    "litellm_provider": "anthropic", "mode": "chat",
    "max_input_tokens": 400000.0, "max_output_tokens": 32000,
    "input_cost_per_token": 2e-06, "output_cost_per_token": 1e-05,
    "cache_read_input_token_cost": 2e-07, "cache_creation_input_token_cost": 2.5e-06,
    "cache_creation_input_token_cost_above_1hr": 4e-06,
    "input_cost_per_token_above_200k_tokens": 4e-06,
    "output_cost_per_token_above_200k_tokens": 1.5e-05,
    "input_cost_per_token_batches": 1e-06
  },
  "some-embedding": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 1e-08}
}"#,
    )
    .unwrap();
    let layer = catalog_file::load_layer(&path).unwrap();
    assert!(matches!(layer, CatalogLayer::Full(_)));
    let catalog = catalog_file::load_file(&path).unwrap();
    assert_eq!(catalog.len(), 1);
    let m = catalog.lookup("anthropic/new-model-9[1m]").unwrap();
    assert_eq!((m.max_input, m.max_output), (Some(400_000), Some(32_000)));
    let p = m.prices.as_ref().unwrap();
    assert_eq!(p.cache_write_1h, Some(4e-6));
    assert_eq!(p.tier.as_ref().unwrap().threshold, 200_000);

    // A broken file names itself and the line.
    std::fs::write(&path, "{\n  \"x\": {,\n}").unwrap();
    let err = format!("{:#}", catalog_file::load_file(&path).unwrap_err());
    assert!(err.contains("prices.json") && err.contains("line 2"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Runs the built binary with no user config in reach.
fn acp_usage(args: &[&str]) -> std::process::Output {
    // A home that does not exist: no config file is found there, and that is not an error.
    let home = std::env::temp_dir().join(format!("acp-usage-no-home-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(args)
        .env_remove("ACP_USAGE_CONFIG")
        .env_remove("ACP_USAGE_LOG")
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("HOME", &home)
        .output()
        .unwrap()
}

#[test]
fn models_command_prints_a_table() {
    let out = acp_usage(&["models", "sonnet-4-5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("claude-sonnet-4-5 "))
        .unwrap_or_else(|| panic!("no claude-sonnet-4-5 row in:\n{stdout}"));
    assert!(row.contains("200000") && row.contains("3.00") && row.contains("15.00"), "{row}");
    assert!(stdout.lines().next().unwrap().starts_with("MODEL"), "{stdout}");
    assert!(stderr.contains("models matched") && stderr.contains("LiteLLM"), "{stderr}");
}

#[test]
fn models_command_prints_json_lines() {
    let out = acp_usage(&["models", "--json", "gemini/gemini-2.5-pro"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout.lines().find(|l| l.contains("\"id\":\"gemini/gemini-2.5-pro\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["window"], 1_048_576);
    assert_eq!(v["usd_per_million_tokens"]["input"], 1.25);
    assert_eq!(v["long_context"]["threshold"], 200_000);
    assert_eq!(v["long_context"]["output"], 15.0);
    assert_eq!(
        v["multipliers"],
        serde_json::json!({"fast": null, "us_only": null, "priority": null})
    );
    // The corrections' long-context tier of Sonnet 4.5 and Opus 4.6's fast-mode multiplier.
    let out = acp_usage(&["models", "--json", "claude-"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let find = |id: &str| -> serde_json::Value {
        let key = format!("\"id\":\"{id}\"");
        serde_json::from_str(stdout.lines().find(|l| l.contains(&key)).unwrap()).unwrap()
    };
    assert_eq!(find("claude-sonnet-4-5")["long_context"]["input"], 6.0);
    assert_eq!(find("claude-opus-4-6")["multipliers"]["fast"], 6.0);
    // OpenAI priority processing, from LiteLLM's priority prices.
    let out = acp_usage(&["models", "--json", "gpt-5.5"]);
    let line = String::from_utf8(out.stdout).unwrap();
    let gpt = line.lines().find(|l| l.contains("\"id\":\"gpt-5.5\"")).expect("gpt-5.5");
    let gpt: serde_json::Value = serde_json::from_str(gpt).unwrap();
    assert_eq!(gpt["multipliers"]["priority"], 2.5);
}

#[test]
fn models_command_resolves_agent_spellings_and_reports_misses() {
    let out = acp_usage(&["models", "claude-opus-4-8[1m]"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("claude-opus-4-8"));

    let out = acp_usage(&["models", "no-such-model-xyz"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no model"));
}

#[test]
fn models_command_uses_the_catalog_flag() {
    let dir = scratch("flag");
    let path = dir.join("mine.toml");
    std::fs::write(
        &path,
        "[models.\"zz-local-model\"]\nwindow = 32768\ninput = 0.5\noutput = 1.5\n",
    )
    .unwrap();
    let out = acp_usage(&["models", "--catalog", path.to_str().unwrap(), "zz-local"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("zz-local-model") && stdout.contains("32768") && stdout.contains("0.50"),
        "{stdout}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
