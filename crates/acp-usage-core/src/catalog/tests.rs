//! Tests of catalog lookups, merging and the compact text format.

use super::*;

fn sample() -> Catalog {
    let mut c = Catalog::new();
    c.set_source("test catalog");
    c.insert(ModelInfo {
        id: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        max_input: Some(200_000),
        max_output: Some(64_000),
        prices: Some(Prices {
            input: 3e-6,
            output: 1.5e-5,
            cache_read: Some(3e-7),
            cache_write_5m: Some(3.75e-6),
            cache_write_1h: Some(6e-6),
            multipliers: Default::default(),
            tier: Some(Tier {
                threshold: 200_000,
                prices: Box::new(Prices {
                    input: 6e-6,
                    output: 2.25e-5,
                    cache_read: Some(6e-7),
                    ..Prices::default()
                }),
            }),
        }),
    });
    c.insert(ModelInfo {
        id: "window-only".into(),
        max_input: Some(32_768),
        ..ModelInfo::default()
    });
    c.insert(ModelInfo {
        id: "gpt-odd".into(),
        provider: "openai".into(),
        prices: Some(Prices { input: 0.1 + 0.2, output: 0.0, ..Prices::default() }),
        ..ModelInfo::default()
    });
    c
}

#[test]
fn compact_round_trips() {
    let c = sample();
    let text = c.to_compact();
    let back = Catalog::parse_compact(&text).unwrap();
    assert_eq!(back, c);
    assert_eq!(back.to_compact(), text);
    // Trailing empty fields are left out.
    assert!(text.contains("\nwindow-only\t\t32768\n"), "{text}");
}

#[test]
fn embedded_catalog_round_trips() {
    let c = Catalog::embedded();
    assert!(c.len() > 1000, "{}", c.len());
    assert!(c.source().contains("LiteLLM"), "{}", c.source());
    // A CRLF checkout still parses; the comparison ignores line endings.
    assert_eq!(c.to_compact(), Catalog::embedded_text().replace("\r\n", "\n"));
}

#[test]
fn compact_errors_name_the_line() {
    let err = Catalog::parse_compact("# src\nm\t\tabc\n").unwrap_err();
    assert!(err.starts_with("line 2: window"), "{err}");
    let err = Catalog::parse_compact("# src\nm\tp\t1\t2\t\t3e-6\n").unwrap_err();
    assert!(err.contains("input is required"), "{err}");
    let err = Catalog::parse_compact("m\na\nm\n").unwrap_err();
    assert!(err.contains("line 3: duplicate"), "{err}");
}

fn id_of<'a>(c: &'a Catalog, model: &str) -> Option<&'a str> {
    c.lookup(model).map(|m| m.id.as_str())
}

#[test]
fn lookup_normalises_real_ids() {
    let c = Catalog::embedded();
    let cases = [
        ("claude-sonnet-4-5-20250929", Some("claude-sonnet-4-5-20250929")),
        ("claude-opus-4-8[1m]", Some("claude-opus-4-8")),
        ("claude-opus-4-6 (1M context)", Some("claude-opus-4-6")),
        ("anthropic/claude-sonnet-4-5", Some("claude-sonnet-4-5")),
        ("openrouter/anthropic/claude-sonnet-4.5", Some("claude-sonnet-4-5")),
        ("claude-sonnet-4-5@20250929", Some("claude-sonnet-4-5")),
        ("Claude-Sonnet-4-5", Some("claude-sonnet-4-5")),
        ("gpt-5.2-codex", Some("gpt-5.2-codex")),
        ("openai/gpt-5.2-codex", Some("gpt-5.2-codex")),
        ("gpt-5.2-codex/medium", Some("gpt-5.2-codex")),
        ("gpt-5.1-codex-max", Some("gpt-5.1-codex-max")),
        ("o4-mini-high", Some("o4-mini")),
        ("gemini-2.5-pro", Some("gemini/gemini-2.5-pro")),
        ("models/gemini-2.5-pro", Some("gemini/gemini-2.5-pro")),
        ("google/gemini-2.5-pro", Some("gemini/gemini-2.5-pro")),
        ("gemini-3-pro-preview", Some("vertex_ai/gemini-3-pro-preview")),
        ("vertex_ai/claude-sonnet-4-5", Some("vertex_ai/claude-sonnet-4-5")),
        // Retired ids stay unknown rather than borrowing a sibling's prices.
        ("claude-opus-4-1", None),
        ("claude-opus-4-1-20250805", None),
        ("claude-sonnet-4-7", None),
        ("no-such-model-anywhere", None),
        ("", None),
    ];
    for (model, want) in cases {
        assert_eq!(id_of(c, model), want, "{model}");
    }
    let gemini = c.lookup("gemini-2.5-pro").unwrap();
    assert_eq!(gemini.provider, "gemini");
    assert_eq!(gemini.max_input, Some(1_048_576));
    assert_eq!(c.lookup("claude-opus-4-8[1m]").unwrap().max_input, Some(1_000_000));
}

#[test]
fn lookup_never_crosses_versions() {
    let mut c = Catalog::new();
    for id in ["claude-opus-4", "gpt-5", "gemini-2.5"] {
        c.insert(ModelInfo { id: id.into(), ..ModelInfo::default() });
    }
    for model in ["claude-opus-4-1", "claude-opus-4-5", "gpt-5.1", "gpt-5-mini", "gemini-2.5-pro"] {
        assert_eq!(id_of(&c, model), None, "{model}");
    }
    assert_eq!(id_of(&c, "claude-opus-4-20250514"), Some("claude-opus-4"));
    assert_eq!(id_of(&c, "gpt-5-2025-08-07"), Some("gpt-5"));
}

#[test]
fn suffix_helpers() {
    assert_eq!(strip_date_suffix("gpt-5-2025-08-07").as_deref(), Some("gpt-5"));
    assert_eq!(strip_date_suffix("x-20250929").as_deref(), Some("x"));
    assert_eq!(strip_date_suffix("x@20250929").as_deref(), Some("x"));
    assert_eq!(strip_date_suffix("claude-opus-4-1"), None);
    assert_eq!(strip_date_suffix("model-12345678"), None);
    assert_eq!(strip_flag_suffix("a[1m]").as_deref(), Some("a"));
    assert_eq!(strip_flag_suffix("[1m]"), None);
    assert_eq!(strip_effort_suffix("gpt-5.1-codex-max"), None);
    assert_eq!(claude_dashes("claude-3.5-sonnet-v1.0").as_deref(), Some("claude-3-5-sonnet-v1-0"));
    assert_eq!(claude_dashes("gpt-5.2"), None);
}

#[test]
fn search_is_case_insensitive_and_sorted() {
    let c = sample();
    let ids: Vec<_> = c.search("-O").iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["gpt-odd", "window-only"]);
    assert_eq!(c.search("").len(), 3);
}

#[test]
fn merge_keeps_what_the_other_does_not_know() {
    let mut c = sample();
    let mut other = Catalog::new();
    other.set_source("newer");
    other.insert(ModelInfo {
        id: "claude-sonnet-4-5".into(),
        max_input: Some(1_000_000),
        ..ModelInfo::default()
    });
    other.insert(ModelInfo { id: "brand-new".into(), ..ModelInfo::default() });
    c.merge(other);
    let m = c.get("claude-sonnet-4-5").unwrap();
    assert_eq!(
        (m.provider.as_str(), m.max_input, m.max_output),
        ("anthropic", Some(1_000_000), Some(64_000))
    );
    assert_eq!(m.prices.as_ref().unwrap().input, 3e-6);
    assert_eq!(c.len(), 4);
    assert_eq!(c.source(), "test catalog + newer");
}

#[test]
fn patch_changes_only_given_fields() {
    let mut c = sample();
    let patch = ModelPatch {
        output: Some(2e-5),
        tier: Some(TierPatch { output: Some(3e-5), ..TierPatch::default() }),
        ..ModelPatch::default()
    };
    let m = c.patch("claude-sonnet-4-5", &patch).unwrap().clone();
    let p = m.prices.unwrap();
    assert_eq!((p.input, p.output, p.cache_read), (3e-6, 2e-5, Some(3e-7)));
    let t = p.tier.unwrap();
    assert_eq!((t.threshold, t.prices.input, t.prices.output), (200_000, 6e-6, 3e-5));
    assert_eq!(m.max_input, Some(200_000));

    // A new model needs input and output before anything else.
    let err = c.patch("mine", &ModelPatch { input: Some(1e-6), ..ModelPatch::default() });
    assert!(err.unwrap_err().contains("both `input` and `output`"));
    let ok = c.patch("mine", &ModelPatch { max_input: Some(8192), ..ModelPatch::default() });
    assert_eq!(ok.unwrap().max_input, Some(8192));
    let tier_only = ModelPatch {
        input: Some(1e-6),
        output: Some(2e-6),
        tier: Some(TierPatch { threshold: Some(100), ..TierPatch::default() }),
        ..ModelPatch::default()
    };
    assert!(c.patch("mine", &tier_only).unwrap_err().contains("threshold"));
}

#[test]
fn bare_mistral_ids_find_the_first_party_entry() {
    let c = Catalog::embedded();
    // Mistral Vibe's request model ids and its model aliases.
    for (model, id) in [
        ("mistral-vibe-cli-latest", "mistral/mistral-vibe-cli-latest"),
        ("mistral-vibe-cli-fast", "mistral/mistral-vibe-cli-fast"),
        ("mistral-medium-3.5", "mistral/mistral-medium-3.5"),
        ("devstral-small-latest", "mistral/devstral-small-latest"),
        ("mistral/mistral-vibe-cli-latest", "mistral/mistral-vibe-cli-latest"),
    ] {
        assert_eq!(id_of(c, model), Some(id), "{model}");
    }
    let vibe = c.lookup("mistral-vibe-cli-latest").unwrap();
    assert_eq!(vibe.max_input, Some(262_144));
    // Only a bare id goes there, and never by prefix.
    assert_eq!(id_of(c, "azure_ai/mistral-vibe-cli-latest"), None);
    assert_eq!(id_of(c, "mistral-vibe-cli"), None);
}

#[test]
fn static_table_matches_the_parsed_file() {
    // The build script's table and the runtime parser read catalog.tsv the same way.
    let parsed = Catalog::parse_compact(Catalog::embedded_text()).unwrap();
    assert_eq!(Catalog::embedded(), &parsed);
    assert_eq!(Catalog::embedded().clone(), parsed);
    assert_eq!(Catalog::embedded().len(), parsed.len());
}

#[test]
fn layers_over_the_embedded_table() {
    let base = Catalog::embedded();
    let mut c = base.clone();
    let patch = ModelPatch { output: Some(2e-5), ..ModelPatch::default() };
    c.patch("claude-sonnet-4-5", &patch).unwrap();
    c.insert(ModelInfo { id: "zz-mine".into(), ..ModelInfo::default() });
    // The patched model is counted once and listed in its place; the rest is the table's.
    assert_eq!(c.len(), base.len() + 1);
    let ids: Vec<&str> = c.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.len(), c.len());
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let sonnet = c.lookup("anthropic/claude-sonnet-4-5").unwrap();
    let p = sonnet.prices.as_ref().unwrap();
    assert_eq!((p.input, p.output), (3e-6, 2e-5));
    assert_eq!(base.get("claude-sonnet-4-5").unwrap().prices.as_ref().unwrap().output, 1.5e-5);
    let found = c.search("Claude-Sonnet-4-5");
    let found = found.iter().find(|m| m.id == "claude-sonnet-4-5").unwrap();
    assert_eq!(found.prices.as_ref().unwrap().output, 2e-5);
    // Replacing an embedded model hands back the embedded entry.
    let old = c.insert(ModelInfo { id: "gpt-5".into(), ..ModelInfo::default() }).unwrap();
    assert!(old.prices.is_some());
    assert_eq!(c.get("gpt-5").unwrap().prices, None);
    assert_ne!(&c, base);
    // A catalog merged over the table changes only the fields it knows.
    let mut merged = base.clone();
    let mut newer = Catalog::new();
    newer.set_source("newer");
    newer.insert(ModelInfo {
        id: "claude-sonnet-4-5".into(),
        max_input: Some(1_000_000),
        ..ModelInfo::default()
    });
    merged.merge(newer);
    let m = merged.get("claude-sonnet-4-5").unwrap();
    assert_eq!((m.max_input, m.provider.as_str()), (Some(1_000_000), "anthropic"));
    assert_eq!(merged.len(), base.len());
    assert!(merged.source().ends_with(" + newer"), "{}", merged.source());
}
