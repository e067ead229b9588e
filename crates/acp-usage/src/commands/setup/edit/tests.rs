//! Setup's edits and their inverse on the shapes settings files come in: every byte outside the
//! entries kept, a second run a no-op, `remove` giving back the file byte for byte (an object
//! written on one line aside: setup opens it, and it stays open).

use super::*;

const ZED: Dialect = Dialect { entry_type: Some("custom"), trailing_commas: true };
const STRICT: Dialect = Dialect { entry_type: None, trailing_commas: false };

fn want(key: &str, program: &str) -> Wanted {
    Wanted {
        key: key.to_owned(),
        command: "acp-usage".to_owned(),
        args: vec!["--".to_owned(), program.to_owned()],
        env: Default::default(),
        program: program.to_owned(),
    }
}

fn two() -> Vec<Wanted> {
    vec![want("Claude Agent (metered)", "claude-agent-acp"), want("Codex (metered)", "codex-acp")]
}

fn own() -> Vec<String> {
    ["Claude Agent (metered)", "Codex (metered)", "OpenCode (metered)"].map(String::from).to_vec()
}

/// Setup on `original`, checked to be undone by `remove` and to be a no-op the second time.
fn round_trip(dialect: Dialect, original: &str, wanted: &[Wanted]) -> String {
    let done = setup(Some(original), dialect, wanted, &own()).unwrap();
    assert!(done.outcomes.iter().all(|o| *o == Outcome::Added), "{:?}", done.outcomes);
    let again = setup(Some(&done.text), dialect, wanted, &own()).unwrap();
    assert_eq!(again.text, done.text, "a second run changes nothing");
    assert!(again.outcomes.iter().all(|o| *o == Outcome::Unchanged), "{:?}", again.outcomes);
    let undone = remove(&done.text, dialect, &own()).unwrap();
    assert_eq!(undone.text, original, "remove restores, from:\n{}", done.text);
    assert_eq!(undone.removed.len(), wanted.len());
    done.text
}

#[test]
fn a_missing_file_is_created_and_removed_to_nothing() {
    let done = setup(None, ZED, &two(), &own()).unwrap();
    assert_eq!(
        done.text,
        r#"{
  "agent_servers": {
    "Claude Agent (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "claude-agent-acp"]
    },
    "Codex (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "codex-acp"]
    }
  }
}
"#
    );
    assert_eq!(remove(&done.text, ZED, &own()).unwrap().text, "");
    assert_eq!(round_trip(ZED, "", &two()), done.text);
}

#[test]
fn comments_trailing_commas_and_a_hand_written_entry_survive() {
    let original = r#"// Zed settings
//
// For information on how to configure Zed, see the Zed docs.
{
  "ui_font_size": 16, // bigger
  /* the theme */
  "theme": {
    "mode": "system",
    "light": "One Light",
  },
  "agent_servers": { // mine
    // an agent of my own
    "My Agent": {
      "type": "custom",
      "command": "my-agent",
      "args": ["--acp"], // keep
    },
  },
}
"#;
    let done = round_trip(ZED, original, &two());
    let expected = r#"// Zed settings
//
// For information on how to configure Zed, see the Zed docs.
{
  "ui_font_size": 16, // bigger
  /* the theme */
  "theme": {
    "mode": "system",
    "light": "One Light",
  },
  "agent_servers": { // mine
    "Claude Agent (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "claude-agent-acp"]
    },
    "Codex (metered)": {
      "type": "custom",
      "command": "acp-usage",
      "args": ["--", "codex-acp"]
    },
    // an agent of my own
    "My Agent": {
      "type": "custom",
      "command": "my-agent",
      "args": ["--acp"], // keep
    },
  },
}
"#;
    assert_eq!(done, expected);
}

#[test]
fn agent_servers_is_added_first_and_removed_whole() {
    let original = "{\n    \"vim_mode\": true,\n    \"theme\": \"One Dark\"\n}\n";
    let done = round_trip(ZED, original, &two()[..1]);
    assert_eq!(
        done,
        "{\n    \"agent_servers\": {\n        \"Claude Agent (metered)\": {\n            \
         \"type\": \"custom\",\n            \"command\": \"acp-usage\",\n            \
         \"args\": [\"--\", \"claude-agent-acp\"]\n        }\n    },\n    \"vim_mode\": true,\n    \
         \"theme\": \"One Dark\"\n}\n"
    );
}

#[test]
fn every_shape_round_trips_in_both_dialects() {
    let shapes = [
        "",
        "\n",
        "{}",
        "{}\n",
        "{ }",
        "// only a comment\n",
        "/* block */ {\n  \"a\": 1\n} // after\n",
        "{ // same line\n  \"a\": 1\n}\n",
        "{ /* same line */ }",
        "{\n  // a comment inside\n}\n",
        "{\r\n\t\"a\": 1,\r\n\t\"b\": {\r\n\t\t\"c\": null\r\n\t}\r\n}\r\n",
        "{\n  \"a\": 1,\n  \"agent_servers\": {}\n}\n",
        "{\n  \"a\": 1,\n  \"agent_servers\": {\n  }\n}\n",
        "{\n  \"agent_servers\": {},\n  \"a\": 1\n}\n",
        "{\n  \"agent_servers\": {\n    \"x\": {\"command\": \"x\"}\n  }\n}\n",
        "{\n  \"agent_servers\": {\n    \"x\": {\"command\": \"x\"},\n  },\n}\n",
        "\u{feff}{\n  \"a\": \"é ☃\"\n}\n",
    ];
    for dialect in [ZED, STRICT] {
        for shape in shapes {
            let done = round_trip(dialect, shape, &two());
            // What setup wrote parses, and strict JSON stays strict: no trailing comma added.
            let doc = Doc::parse(split_bom(&done).1).unwrap_or_else(|e| panic!("{e}: {done}"));
            assert!(matches!(doc.root, Some(Value::Object(_))), "{done}");
            let strict = |s: &str| {
                serde_json::from_str::<serde_json::Value>(s.trim_start_matches('\u{feff}')).is_ok()
            };
            if dialect == STRICT && strict(shape) {
                assert!(strict(&done), "strict JSON expected:\n{done}");
            }
        }
    }
}

/// Setup on an `original` with an object on one line: what it writes, and what `remove` leaves
/// (the same value, the object opened); from that file on, the round trip is exact.
fn opened(dialect: Dialect, original: &str, wanted: &[Wanted], expected: &str, left: &str) {
    let done = setup(Some(original), dialect, wanted, &own()).unwrap();
    assert_eq!(done.text, expected, "from:\n{original}");
    let undone = remove(&done.text, dialect, &own()).unwrap();
    assert_eq!(undone.text, left, "from:\n{}", done.text);
    let value = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    assert_eq!(value(left), value(original), "the same value");
    assert_eq!(round_trip(dialect, left, wanted), expected);
}

#[test]
fn an_object_on_one_line_is_opened_as_a_person_would() {
    let servers = "\"agent_servers\": {\n    \"Codex (metered)\": {\n      \
                   \"command\": \"acp-usage\",\n      \"args\": [\"--\", \"codex-acp\"]\n    }\n  },";
    let expected = format!("{{\n  {servers}\n  \"a\":1\n}}");
    opened(STRICT, "{\"a\":1}", &two()[1..], &expected, "{\n  \"a\":1\n}");
    // The spaces inside the braces give way to the line breaks; the rest of the line stays.
    let expected = format!("{{\n  {servers}\n  \"a\": 1, \"b\": [1, 2]\n}}\n");
    let left = "{\n  \"a\": 1, \"b\": [1, 2]\n}\n";
    opened(STRICT, "{ \"a\": 1, \"b\": [1, 2] }\n", &two()[1..], &expected, left);
    // The user's own entry on the `agent_servers` line: each entry on its own line, the `}` too.
    let original = "{\n  \"agent_servers\": {\"x\": {\"command\": \"x\"}}\n}\n";
    let expected = "{\n  \"agent_servers\": {\n    \"Codex (metered)\": {\n      \
                    \"type\": \"custom\",\n      \"command\": \"acp-usage\",\n      \
                    \"args\": [\"--\", \"codex-acp\"]\n    },\n    \
                    \"x\": {\"command\": \"x\"}\n  }\n}\n";
    let left = "{\n  \"agent_servers\": {\n    \"x\": {\"command\": \"x\"}\n  }\n}\n";
    opened(ZED, original, &two()[1..], expected, left);
}

#[test]
fn a_removed_entry_leaves_no_stray_space() {
    // An entry of setup's the user moved onto one line with their own.
    let cases = [
        (
            "{\"agent_servers\": {\"Codex (metered)\": CODEX, \"x\": 1}}",
            "{\"agent_servers\": {\"x\": 1}}",
        ),
        (
            "{\"agent_servers\": { \"Codex (metered)\": CODEX, \"x\": 1 }}",
            "{\"agent_servers\": { \"x\": 1 }}",
        ),
        (
            "{\"agent_servers\": {\"x\": 1, \"Codex (metered)\": CODEX}}",
            "{\"agent_servers\": {\"x\": 1}}",
        ),
        (
            "{\"agent_servers\": {\n  \"Codex (metered)\": CODEX, \"x\": 1\n}}",
            "{\"agent_servers\": {\n  \"x\": 1\n}}",
        ),
    ];
    let codex = "{\"command\": \"acp-usage\", \"args\": [\"--\", \"codex-acp\"]}";
    for (text, left) in cases {
        let text = text.replace("CODEX", codex);
        assert_eq!(remove(&text, ZED, &own()).unwrap().text, left, "from {text}");
    }
}

#[test]
fn an_empty_object_gets_its_closing_brace_on_a_line_of_its_own_in_zed() {
    let done = round_trip(ZED, "{\"agent_servers\": {}}", &two()[1..]);
    assert_eq!(
        done,
        "{\"agent_servers\": {\n  \"Codex (metered)\": {\n    \"type\": \"custom\",\n    \
         \"command\": \"acp-usage\",\n    \"args\": [\"--\", \"codex-acp\"]\n  },\n}}"
    );
    // Strict JSON has no trailing comma to mark it with, so the brace stays where it was.
    let strict = round_trip(STRICT, "{\"agent_servers\": {}}", &two()[1..]);
    assert!(strict.ends_with("\"args\": [\"--\", \"codex-acp\"]\n  }}}"), "{strict}");
}

#[test]
fn a_moved_agent_updates_command_and_args_only() {
    let first = setup(Some("{\n  \"a\": 1\n}\n"), ZED, &two(), &own()).unwrap().text;
    // The user added an env var to the entry; then Codex moved.
    let edited = first.replace(
        "\"args\": [\"--\", \"codex-acp\"]",
        "\"args\": [\"--\", \"codex-acp\"],\n      \"env\": {\"X\": \"1\"}",
    );
    let mut moved = two();
    moved[1].command = "npx".into();
    moved[1].args =
        ["-y", "acp-usage@1.2.3", "--", "/opt/codex/bin/codex-acp"].map(String::from).to_vec();
    let done = setup(Some(&edited), ZED, &moved, &own()).unwrap();
    assert_eq!(done.outcomes, vec![Outcome::Unchanged, Outcome::Updated]);
    let expected = edited.replace(
        "\"command\": \"acp-usage\",\n      \"args\": [\"--\", \"codex-acp\"]",
        concat!(
            "\"command\": \"npx\",\n      ",
            "\"args\": [\"-y\", \"acp-usage@1.2.3\", \"--\", \"/opt/codex/bin/codex-acp\"]"
        ),
    );
    assert_eq!(done.text, expected);
    // Its npx form is still setup's own: removing gives back the original.
    assert_eq!(remove(&done.text, ZED, &own()).unwrap().text, "{\n  \"a\": 1\n}\n");
}

#[test]
fn an_agent_found_later_is_added_and_everything_still_comes_out() {
    let original = "{\n  \"agent_servers\": {\n    \"x\": {\"command\": \"x\"}\n  }\n}\n";
    let first = setup(Some(original), ZED, &two()[..1], &own()).unwrap().text;
    let second = setup(Some(&first), ZED, &two(), &own()).unwrap();
    assert_eq!(second.outcomes, vec![Outcome::Unchanged, Outcome::Added]);
    assert_eq!(remove(&second.text, ZED, &own()).unwrap().text, original);
    // From a file setup created, too.
    let created = setup(None, ZED, &two()[..1], &own()).unwrap().text;
    let more = setup(Some(&created), ZED, &two(), &own()).unwrap().text;
    assert_eq!(remove(&more, ZED, &own()).unwrap().text, "");
}

#[test]
fn entries_the_user_wrote_are_never_taken_over() {
    let original = r#"{
  "agent_servers": {
    "Claude (metered)": {"type": "custom", "command": "acp-usage", "args": ["--", "claude-agent-acp"]},
    "Codex (metered)": {"type": "custom", "command": "codex-acp"}
  }
}
"#;
    let done = setup(Some(original), ZED, &two(), &own()).unwrap();
    assert_eq!(
        done.outcomes,
        vec![Outcome::Covered("Claude (metered)".into()), Outcome::Taken],
        "the user's own wrapper covers Claude; a Codex entry without acp-usage keeps its name"
    );
    assert_eq!(done.text, original);
    // Neither is setup's: nothing to remove.
    let removal = remove(original, ZED, &own()).unwrap();
    assert_eq!((removal.text.as_str(), removal.removed.len()), (original, 0));
}

#[test]
fn npx_and_absolute_paths_are_recognised_as_acp_usage() {
    let parse = |s: &'static str| match Doc::parse(s).unwrap().root {
        Some(v) => wrapped_program(&v),
        None => None,
    };
    assert_eq!(
        parse(r#"{"command": "npx", "args": ["-y", "acp-usage@0.3.0", "--", "/x/bin/codex-acp"]}"#),
        Some("codex-acp".into())
    );
    assert_eq!(
        parse(r#"{"command": "/home/u/.cargo/bin/acp-usage", "args": ["--", "gemini", "--acp"]}"#),
        Some("gemini".into())
    );
    assert_eq!(parse(r#"{"command": "npx", "args": ["-y", "other", "--", "gemini"]}"#), None);
    assert_eq!(parse(r#"{"command": "acp-usage", "args": ["demo"]}"#), None);
}

#[test]
fn a_syntax_error_names_line_and_column() {
    let err = setup(Some("{\n  \"a\": 1\n  \"b\": 2\n}\n"), ZED, &two(), &own()).unwrap_err();
    let EditError::Syntax(e) = err else { panic!("{err:?}") };
    // Where the missing comma should have been.
    assert_eq!((e.line, e.column, e.message.as_str()), (2, 9, "Expected comma"));
    assert!(matches!(remove("{,}", ZED, &own()), Err(EditError::Syntax(_))));
    assert_eq!(
        setup(Some("[1]"), ZED, &two(), &own()).unwrap_err(),
        EditError::NotAnObject("the file's top-level value")
    );
    assert_eq!(
        setup(Some("{\"agent_servers\": []}"), ZED, &two(), &own()).unwrap_err(),
        EditError::NotAnObject("\"agent_servers\"")
    );
}

#[test]
fn strict_entries_have_no_type() {
    let done = setup(Some("{}\n"), STRICT, &two()[..1], &own()).unwrap().text;
    let value: serde_json::Value = serde_json::from_str(&done).unwrap();
    assert_eq!(
        value,
        serde_json::json!({"agent_servers": {"Claude Agent (metered)": {
            "command": "acp-usage", "args": ["--", "claude-agent-acp"]}}})
    );
}

#[test]
fn a_registry_agents_env_is_written_kept_and_updated() {
    let mut wanted = two();
    wanted[0].args = ["--", "npx", "-y", "@agentclientprotocol/claude-agent-acp@0.33.1"]
        .map(String::from)
        .to_vec();
    wanted[0].env = [("B".to_owned(), "2".to_owned()), ("A".to_owned(), "1".to_owned())].into();
    let original = "{\n  \"agent_servers\": {}\n}\n";
    let text = round_trip(ZED, original, &wanted);
    // Only the entry with variables gets `env`, after its args, keys in order.
    assert!(
        text.contains(concat!(
            "\"args\": [\"--\", \"npx\", \"-y\", \"@agentclientprotocol/claude-agent-acp@0.33.1\"],\n",
            "      \"env\": {\"A\": \"1\", \"B\": \"2\"}\n    },"
        )),
        "{text}"
    );
    assert_eq!(text.matches("\"env\"").count(), 1, "{text}");

    // The user changed the variable in Zed's registry entry: the metered entry follows.
    let mut changed = wanted.clone();
    changed[0].env.insert("A".into(), "3".into());
    let done = setup(Some(&text), ZED, &changed, &own()).unwrap();
    assert_eq!(done.outcomes, vec![Outcome::Updated, Outcome::Unchanged]);
    assert_eq!(
        done.text,
        text.replace("{\"A\": \"1\", \"B\": \"2\"}", "{\"A\": \"3\", \"B\": \"2\"}")
    );

    // An entry of setup's from before, without `env`, gets it after its args.
    let plain = setup(Some(original), ZED, &two(), &own()).unwrap().text;
    let done = setup(Some(&plain), ZED, &wanted, &own()).unwrap();
    assert_eq!(done.outcomes, vec![Outcome::Updated, Outcome::Unchanged]);
    assert_eq!(done.text, text);
    assert_eq!(remove(&done.text, ZED, &own()).unwrap().text, original);

    // No variables to give: an `env` the user put in setup's entry stays.
    let theirs = plain.replace(
        "\"args\": [\"--\", \"claude-agent-acp\"]",
        "\"args\": [\"--\", \"claude-agent-acp\"], \"env\": {\"MINE\": \"x\"}",
    );
    let again = setup(Some(&theirs), ZED, &two(), &own()).unwrap();
    assert_eq!(again.outcomes, vec![Outcome::Unchanged, Outcome::Unchanged]);
    assert_eq!(again.text, theirs);
}
