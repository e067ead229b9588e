//! Data-driven tests of the per-session's account: event scripts in, usage/size/cost tables out.
//!
//! Each script line is one event the relay would feed (see `check`); `end` prints the resolved
//! turn, `snap` prints the session snapshot. Expectations are snapshots: run with
//! `UPDATE_EXPECT=1` to bless a deliberate change, then read the diff.

use acp_usage_core::account::{Account, Context, Role, TurnReport};
use acp_usage_core::{Catalog, Source, TokenRecord};
use expect_test::{Expect, expect};

fn n(it: &mut std::str::SplitWhitespace<'_>) -> u64 {
    it.next().expect("a number").parse().expect("a number")
}

fn record(it: &mut std::str::SplitWhitespace<'_>) -> TokenRecord {
    let conv = it.next().expect("a convention");
    let mut rec = match conv {
        "anthropic" => {
            let (i, cr, cw5, cw1, o) = (n(it), n(it), n(it), n(it), n(it));
            TokenRecord::from_anthropic(i, cr, cw5, cw1, o)
        }
        "openai" => {
            let (i, c, o, r) = (n(it), n(it), n(it), n(it));
            TokenRecord::from_openai(i, c, o, r)
        }
        "gemini" => {
            let (p, c, o, t) = (n(it), n(it), n(it), n(it));
            TokenRecord::from_gemini(p, c, o, t)
        }
        other => panic!("unknown convention {other}"),
    };
    rec.model = it.next().map(str::to_string);
    rec
}

fn usd(c: Option<f64>) -> String {
    c.map_or("-".to_string(), |c| format!("{c:.6}"))
}

#[track_caller]
fn check(window_percent: u64, script: &str, expect: Expect) {
    expect.assert_eq(&run(window_percent, script));
}

/// What `script` prints (see the module's documentation).
fn run(window_percent: u64, script: &str) -> String {
    let catalog = Catalog::embedded();
    let cx = Context { catalog, default_window: 200_000, window_percent, remembered_size: None };
    let mut account = Account::new();
    let mut out = String::new();
    // Transcript calls gathered for `tturn`/`thistory`.
    let mut tcalls: Vec<(TokenRecord, bool)> = Vec::new();
    // The agent's per-model counts gathered for `models`.
    let mut models: Vec<TokenRecord> = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut it = line.split_whitespace();
        let cmd = it.next().unwrap();
        match cmd {
            "restored" => account = Account::restored(),
            // A new process reopens the session with what this one would save.
            "reopen" => account = Account::carried_over(account.carry(&cx)),
            "select" => {
                let model = it.next().map(str::to_string).filter(|m| m != "-");
                let window = it.next().map(|w| w.parse().unwrap());
                account.select_model(model, window);
            }
            "seen" => account.model_seen(it.next().unwrap()),
            "turn" => account.begin_turn(),
            "prompt" => account.prompt_tokens(n(&mut it)),
            "out" => account.output_tokens(n(&mut it), false),
            "thought" => account.output_tokens(n(&mut it), true),
            "tool" => account.tool_call(n(&mut it)),
            "toolout" => account.tool_output(n(&mut it)),
            "user" => account.user_message_in_turn(),
            "replayed" => account.replayed(n(&mut it)),
            "call" => account.record_call(record(&mut it), Source::Tap, &cx),
            "agent_used" => {
                let used = n(&mut it);
                account.agent_used(used, it.next() != Some("inexact"))
            }
            "tap" => {
                let role = match it.next() {
                    Some("main") => Role::Main,
                    Some("subagent") => Role::Subagent,
                    _ => Role::Side,
                };
                account.tap_call(record(&mut it), None, role, &cx)
            }
            "follow" => account.follow_transcript(),
            "tcall" => {
                let main = it.next() == Some("main");
                tcalls.push((record(&mut it), main));
            }
            "tturn" => account.transcript_turn(std::mem::take(&mut tcalls)),
            "thistory" => account.transcript_history(&std::mem::take(&mut tcalls), &cx),
            "outside" => {
                let main = it.next() == Some("main");
                account.record_outside_turn(record(&mut it), Source::Transcript, main, &cx)
            }
            "baseline" => account.set_baseline(n(&mut it)),
            "agent_window" => account.agent_window(n(&mut it)),
            "reported_window" => account.reported_window(n(&mut it)),
            "agent_model" => models.push(record(&mut it)),
            "models" => account.agent_turn_models(std::mem::take(&mut models)),
            "agent_cost" => account.agent_cost(it.next().unwrap().parse().unwrap()),
            "agent_cost_floor" => account.agent_cost_floor(it.next().unwrap().parse().unwrap()),
            "agent_turn" => account.agent_turn(record(&mut it), TurnReport::Complete, None),
            "agent_quota" => {
                account.agent_turn(record(&mut it), TurnReport::WithoutCacheAndThoughts, None)
            }
            "end" => {
                let t = account.end_turn(&cx).expect("a turn was open");
                if let Some(b) = account.take_learned_baseline() {
                    out += &format!("learned baseline={b}\n");
                }
                let x = &t.totals;
                for (role, r) in &t.roles.roles {
                    out += &format!("  {}: in={} out={}\n", role.as_str(), r.input, r.output);
                }
                out += &format!(
                    "turn: in={} cr={} cw={} out={} th={} total={} calls={:?} src={} cache={} cost={}\n",
                    x.input,
                    x.cache_read,
                    x.cache_write,
                    x.output,
                    x.thought,
                    x.total(),
                    t.calls,
                    t.source.as_str(),
                    t.cache_known,
                    usd(t.cost),
                );
            }
            "snap" => {
                let s = account.snapshot(&cx);
                let unpriced = match s.unpriced_calls {
                    0 => String::new(),
                    k => format!(" unpriced={k}"),
                };
                let unpriced = match s.cost_floor {
                    Some(floor) => format!("{unpriced} floor={floor}"),
                    None => unpriced,
                };
                out += &format!(
                    "snap: used={} ({}{}) split={:?} size={} ({}) cost={} ({}{}{}) model={:?} total={} exact={}\n",
                    s.used,
                    s.used_source.as_str(),
                    if s.used_exact { "" } else { " inexact" },
                    s.used_split,
                    s.size,
                    s.size_source.as_str(),
                    usd(s.cost),
                    s.cost_source.as_str(),
                    if s.cost_partial { " partial" } else { "" },
                    unpriced,
                    s.model,
                    s.totals.total(),
                    s.totals_exact,
                );
            }
            other => panic!("unknown command {other}"),
        }
    }
    out
}

#[test]
fn new_session_knows_only_the_window() {
    check(
        100,
        "select claude-sonnet-4-5
         snap",
        expect![[r#"
            snap: used=0 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate) model=Some("claude-sonnet-4-5") total=0 exact=true
        "#]],
    );
}

#[test]
fn unknown_model_falls_back_to_the_default_window_and_no_cost() {
    check(
        100,
        "select mystery-model-9
         turn
         prompt 100
         out 50
         end
         snap",
        expect![[r#"
            turn: in=100 cr=0 cw=0 out=50 th=0 total=150 calls=Some(1) src=estimate cache=false cost=-
            snap: used=150 (estimate inexact) split=Some((100, 50)) size=200000 (default) cost=- (estimate unpriced=1) model=Some("mystery-model-9") total=150 exact=false
        "#]],
    );
}

#[test]
fn exact_calls_sum_per_turn_and_used_is_the_last_call() {
    // Two Anthropic calls of a tool-use turn (the research mock's numbers), priced as Sonnet 4.5.
    check(
        100,
        "select claude-sonnet-4-5
         turn
         prompt 5
         call anthropic 12 9000 3000 0 61 claude-sonnet-4-5
         tool 20
         toolout 300
         call anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         end
         snap",
        expect![[r#"
            learned baseline=12007
              main: in=24024 out=68
            turn: in=24024 cr=18000 cw=6000 out=68 th=0 total=24092 calls=Some(2) src=tap cache=true cost=0.028992
            snap: used=12019 (tap) split=Some((12012, 7)) size=200000 (catalog) cost=0.028992 (catalog) model=Some("claude-sonnet-4-5") total=24092 exact=true
        "#]],
    );
}

#[test]
fn claude_reports_turn_usage_and_stated_cost() {
    check(
        100,
        "select - 200000
         turn
         prompt 5
         agent_used 12013
         agent_used 12019
         agent_cost 0.023485
         agent_window 1000000
         agent_turn anthropic 12 9000 3000 0 7
         end
         turn
         agent_used 12019
         agent_cost 0.04697
         agent_turn anthropic 12 9000 3000 0 7
         end
         snap",
        expect![[r#"
            learned baseline=12007
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=None src=agent cache=true cost=0.023485
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=None src=agent cache=true cost=0.023485
            snap: used=12019 (agent) split=None size=1000000 (agent) cost=0.046970 (agent) model=None total=24038 exact=true
        "#]],
    );
}

#[test]
fn codex_reports_used_per_call_and_the_split_is_estimated() {
    check(
        95,
        "select gpt-5.2-codex
         snap
         turn
         prompt 10
         out 30
         tool 10
         agent_used 5040 inexact
         agent_window 258400
         toolout 200
         out 30
         agent_used 5040 inexact
         end
         snap",
        expect![[r#"
            snap: used=0 (estimate inexact) split=None size=258400 (catalog) cost=- (estimate) model=Some("gpt-5.2-codex") total=0 exact=true
            learned baseline=4990
            turn: in=10010 cr=5010 cw=0 out=70 th=0 total=10080 calls=Some(2) src=estimate cache=false cost=0.010607
            snap: used=5040 (agent inexact) split=None size=258400 (agent) cost=0.010607 (estimate) model=Some("gpt-5.2-codex") total=10080 exact=false
        "#]],
    );
}

#[test]
fn gemini_quota_gives_input_and_thoughts_are_estimated() {
    check(
        100,
        "select gemini-2.5-pro 1048576
         turn
         prompt 5
         thought 24
         out 9
         agent_quota gemini 8000 0 9 0 gemini-2.5-pro
         end
         snap",
        expect![[r#"
            learned baseline=7995
            turn: in=8000 cr=0 cw=0 out=33 th=24 total=8033 calls=Some(1) src=estimate cache=false cost=0.010330
            snap: used=8009 (estimate inexact) split=Some((8000, 9)) size=1048576 (catalog) cost=0.010330 (estimate) model=Some("gemini-2.5-pro") total=8033 exact=false
        "#]],
    );
}

#[test]
fn gemini_tool_turn_scales_the_estimated_calls_to_the_reported_input() {
    // Two calls: the second carries the tool result; `used` is the scaled last call.
    check(
        100,
        "select gemini-2.5-pro 1048576
         turn
         prompt 100
         out 10
         tool 10
         toolout 880
         out 20
         agent_quota gemini 17000 0 30 0 gemini-2.5-pro
         end
         snap",
        expect![[r#"
            turn: in=17000 cr=1854 cw=0 out=30 th=0 total=17030 calls=Some(2) src=estimate cache=false cost=0.019464
            snap: used=15469 (estimate inexact) split=Some((15454, 15)) size=1048576 (catalog) cost=0.019464 (estimate) model=Some("gemini-2.5-pro") total=17030 exact=false
        "#]],
    );
}

#[test]
fn a_first_turn_teaches_the_hidden_baseline_and_the_next_session_starts_from_it() {
    // The agent reported 12,012 prompt tokens for a 5-token prompt: 12,007 were hidden context.
    check(
        100,
        "select claude-sonnet-4-5
         turn
         prompt 5
         out 7
         agent_turn anthropic 12 9000 3000 0 7
         end
         turn
         prompt 5
         agent_turn anthropic 12 9000 3000 0 7
         end",
        expect![[r#"
            learned baseline=12007
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=None src=agent cache=true cost=0.014091
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=None src=agent cache=true cost=0.014091
        "#]],
    );
    check(
        100,
        "restored
         baseline 12007
         select claude-sonnet-4-5
         snap
         replayed 40
         snap",
        expect![[r#"
            snap: used=12007 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate partial) model=Some("claude-sonnet-4-5") total=0 exact=true
            snap: used=12047 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate partial) model=Some("claude-sonnet-4-5") total=0 exact=true
        "#]],
    );
}

#[test]
fn a_late_replay_inside_a_turn_does_not_split_it_into_calls() {
    // gemini-cli streams most of a load replay after answering `session/load`: a replayed tool
    // call must not make the live one-call turn look like two calls.
    check(
        100,
        "select gemini-2.5-pro 1048576
         turn
         prompt 5
         user
         out 40
         tool 10
         toolout 300
         user
         out 9
         agent_quota gemini 9000 0 5 0 gemini-2.5-pro
         end
         snap",
        expect![[r#"
            learned baseline=8995
            turn: in=9000 cr=0 cw=0 out=5 th=0 total=9005 calls=Some(1) src=estimate cache=false cost=0.011300
            snap: used=9005 (estimate inexact) split=Some((9000, 5)) size=1048576 (catalog) cost=0.011300 (estimate) model=Some("gemini-2.5-pro") total=9005 exact=false
        "#]],
    );
}

#[test]
fn replayed_history_is_context_not_usage() {
    check(
        100,
        "restored
         select claude-sonnet-4-5
         replayed 4000
         snap
         turn
         prompt 10
         out 20
         end
         snap",
        expect![[r#"
            snap: used=4000 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate partial) model=Some("claude-sonnet-4-5") total=0 exact=true
            turn: in=4010 cr=4000 cw=0 out=20 th=0 total=4030 calls=Some(1) src=estimate cache=false cost=0.001530
            snap: used=4030 (estimate inexact) split=Some((4010, 20)) size=200000 (catalog) cost=0.001530 (estimate partial) model=Some("claude-sonnet-4-5") total=4030 exact=false
        "#]],
    );
}

#[test]
fn long_context_tier_is_per_request() {
    // Gemini 2.5 Pro: above 200k prompt tokens the whole request is billed at tier prices.
    check(
        100,
        "select gemini-2.5-pro
         turn
         call gemini 250000 0 1000 0 gemini-2.5-pro
         end
         turn
         call gemini 150000 0 1000 0 gemini-2.5-pro
         end",
        expect![[r#"
            learned baseline=250000
              main: in=250000 out=1000
            turn: in=250000 cr=0 cw=0 out=1000 th=0 total=251000 calls=Some(1) src=tap cache=true cost=0.640000
              main: in=150000 out=1000
            turn: in=150000 cr=0 cw=0 out=1000 th=0 total=151000 calls=Some(1) src=tap cache=true cost=0.197500
        "#]],
    );
}

#[test]
fn transcript_calls_make_every_figure_exact() {
    // A claude turn with a subagent call between the main agent's two calls; the agent's stated
    // cost, lower than the transcript's, does not count once the transcript is followed; a title
    // call after the result counts at once; a reload's history replaces whatever was accounted.
    check(
        100,
        "select claude-sonnet-4-5
         agent_cost 0.001
         follow
         turn
         prompt 10
         tcall main anthropic 12 9000 3000 0 61 claude-sonnet-4-5
         tcall sub anthropic 500 0 2000 0 40 claude-haiku-4-5
         tcall main anthropic 80 12000 0 0 7 claude-sonnet-4-5
         tturn
         end
         snap
         outside sub anthropic 150 0 0 0 12 claude-haiku-4-5
         snap
         restored
         tcall main anthropic 12 9000 3000 0 61 claude-sonnet-4-5
         tcall main anthropic 80 12000 0 0 7 claude-sonnet-4-5
         thistory
         snap",
        expect![[r#"
            learned baseline=12002
              main: in=24092 out=68
              subagent: in=2500 out=40
            turn: in=26592 cr=21000 cw=5000 out=108 th=0 total=26700 calls=Some(3) src=transcript cache=true cost=0.022046
            snap: used=12087 (transcript) split=Some((12080, 7)) size=200000 (catalog) cost=0.022046 (catalog) model=Some("claude-sonnet-4-5") total=26700 exact=true
            snap: used=12087 (transcript) split=Some((12080, 7)) size=200000 (catalog) cost=0.022256 (catalog) model=Some("claude-sonnet-4-5") total=26862 exact=true
            snap: used=12087 (transcript) split=Some((12080, 7)) size=200000 (catalog) cost=0.018846 (catalog) model=Some("claude-sonnet-4-5") total=24160 exact=true
        "#]],
    );
}

#[test]
fn side_calls_from_the_agents_per_model_counts_and_its_cost_as_a_floor() {
    // claude-agent-acp 0.101: the transcript has the turn's two main calls; the turn's
    // `modelUsage` increment has 150 input and 12 output more (the session title), which count
    // as a side call. Then the agent states a cost above acp-usage's: it becomes the cost,
    // marked partial, and a later, lower statement does not lower it (a session's cost never
    // goes down).
    check(
        100,
        "select claude-opus-5-5
         follow
         turn
         prompt 10
         tcall main anthropic 12 9000 3000 0 61 claude-opus-5-5
         tcall main anthropic 80 12000 0 0 7 claude-opus-5-5
         agent_model anthropic 242 21000 3000 0 80 claude-opus-5-5
         models
         tturn
         end
         snap
         agent_cost 0.05
         snap
         agent_cost 0.001
         snap",
        expect![[r#"
            learned baseline=12002
              main: in=24092 out=68
              side: in=150 out=12
            turn: in=24242 cr=21000 cw=3000 out=80 th=0 total=24322 calls=Some(3) src=transcript cache=true cost=0.021768
            snap: used=12087 (transcript) split=Some((12080, 7)) size=1000000 (catalog) cost=0.021768 (catalog) model=Some("claude-opus-5-5") total=24322 exact=true
            snap: used=12087 (transcript) split=Some((12080, 7)) size=1000000 (catalog) cost=0.050000 (agent partial floor=0.05) model=Some("claude-opus-5-5") total=24322 exact=true
            snap: used=12087 (transcript) split=Some((12080, 7)) size=1000000 (catalog) cost=0.050000 (agent partial floor=0.05) model=Some("claude-opus-5-5") total=24322 exact=true
        "#]],
    );
}

#[test]
fn a_window_the_agent_reports_beats_every_guess_but_not_the_models_catalog_entry() {
    // Nothing known: the default. An alias rule guesses 200,000; the agent reports 1,000,000:
    // the report wins. A call shows the concrete model: its catalog window wins; a window the
    // agent enforces wins over everything.
    check(
        100,
        "snap
         select - 200000
         snap
         reported_window 1000000
         snap
         seen claude-sonnet-4-5
         snap
         agent_window 180000
         snap",
        expect![[r#"
            snap: used=0 (estimate inexact) split=None size=200000 (default) cost=- (estimate) model=None total=0 exact=true
            snap: used=0 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate) model=None total=0 exact=true
            snap: used=0 (estimate inexact) split=None size=1000000 (agent) cost=- (estimate) model=None total=0 exact=true
            snap: used=0 (estimate inexact) split=None size=200000 (catalog) cost=- (estimate) model=Some("claude-sonnet-4-5") total=0 exact=true
            snap: used=0 (estimate inexact) split=None size=180000 (agent) cost=- (estimate) model=Some("claude-sonnet-4-5") total=0 exact=true
        "#]],
    );
}

#[test]
fn tap_calls_merge_with_the_transcripts_and_side_calls_count_without_a_floor() {
    // Claude Code: the tap sees the main call, the title (no tools: side) and a prompt
    // suggestion that declares the main tools (the tap alone would call it main). The
    // transcript records only the main call: the suggestion becomes a side call, `used` stays
    // the main call's, and the agent's stated cost (its own table) no longer sets a floor.
    check(
        100,
        "select claude-sonnet-4-5
         follow
         turn
         prompt 5
         tap main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         tap side anthropic 150 0 0 0 12 claude-haiku-4-5
         tap main anthropic 40 12000 0 0 30 claude-sonnet-4-5
         tcall main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         tturn
         agent_cost 9.99
         end
         tap side anthropic 200 0 0 0 20 claude-haiku-4-5
         snap",
        expect![[r#"
            learned baseline=12007
              main: in=12012 out=7
              side: in=12190 out=42
            turn: in=24202 cr=21000 cw=3000 out=49 th=0 total=24251 calls=Some(3) src=tap cache=true cost=0.018471
            snap: used=12019 (tap) split=Some((12012, 7)) size=200000 (catalog) cost=0.018771 (catalog) model=Some("claude-sonnet-4-5") total=24471 exact=true
        "#]],
    );
}

#[test]
fn with_the_tap_the_agents_per_model_counts_add_no_side_calls() {
    // Claude Code's title call ended after turn 1's result (the tap counted it between turns);
    // turn 2's `modelUsage` increment includes it. It must not count twice.
    check(
        100,
        "select claude-sonnet-4-5
         turn
         prompt 5
         tap main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         end
         tap side anthropic 150 0 0 0 12 claude-haiku-4-5
         turn
         prompt 5
         tap main anthropic 40 12000 0 0 30 claude-sonnet-4-5
         agent_model anthropic 40 12000 0 0 30 claude-sonnet-4-5
         agent_model anthropic 150 0 0 0 12 claude-haiku-4-5
         models
         end
         snap",
        expect![[r#"
            learned baseline=12007
              main: in=12012 out=7
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=Some(1) src=tap cache=true cost=0.014091
              main: in=12040 out=30
            turn: in=12040 cr=12000 cw=0 out=30 th=0 total=12070 calls=Some(1) src=tap cache=true cost=0.004170
            snap: used=12070 (tap) split=Some((12040, 30)) size=200000 (catalog) cost=0.018471 (catalog) model=Some("claude-sonnet-4-5") total=24251 exact=true
        "#]],
    );
}

#[test]
fn a_reopened_session_keeps_the_side_calls_an_earlier_tapped_run_counted() {
    // The first run counted a title the transcript does not hold; reloaded in a new process,
    // the transcript's history would drop it. Then the session goes on outside acp-usage and
    // its transcript holds more than was carried: the transcript wins.
    check(
        100,
        "select claude-sonnet-4-5
         turn
         prompt 5
         tap main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         tap side anthropic 150 0 0 0 12 claude-haiku-4-5
         end
         snap
         reopen
         tcall main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         thistory
         snap
         reopen
         tcall main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         tcall main anthropic 40 12000 0 0 30 claude-sonnet-4-5
         thistory
         snap",
        expect![[r#"
            learned baseline=12007
              main: in=12012 out=7
              side: in=150 out=12
            turn: in=12162 cr=9000 cw=3000 out=19 th=0 total=12181 calls=Some(2) src=tap cache=true cost=0.014301
            snap: used=12019 (tap) split=Some((12012, 7)) size=200000 (catalog) cost=0.014301 (catalog) model=Some("claude-sonnet-4-5") total=12181 exact=true
            snap: used=12019 (transcript) split=Some((12012, 7)) size=200000 (catalog) cost=0.014301 (catalog) model=Some("claude-sonnet-4-5") total=12181 exact=true
            snap: used=12070 (transcript) split=Some((12040, 30)) size=200000 (catalog) cost=0.018261 (catalog) model=Some("claude-sonnet-4-5") total=24089 exact=true
        "#]],
    );
}

#[test]
fn a_tapped_session_whose_history_no_run_saw_keeps_the_agents_cost_as_a_floor() {
    // Mistral Vibe loaded in a process that never saw the session: its stated cost covers the
    // history, which the tap did not see. The tap's first call must not drop the cost below it.
    check(
        100,
        "restored
         select claude-sonnet-4-5
         agent_cost_floor 0.015
         snap
         turn
         prompt 5
         tap main anthropic 12 9000 3000 0 7 claude-sonnet-4-5
         end
         agent_cost_floor 0.029
         snap",
        expect![[r#"
            snap: used=0 (estimate inexact) split=None size=200000 (catalog) cost=0.015000 (agent partial floor=0.015) model=Some("claude-sonnet-4-5") total=0 exact=true
              main: in=12012 out=7
            turn: in=12012 cr=9000 cw=3000 out=7 th=0 total=12019 calls=Some(1) src=tap cache=true cost=0.014091
            snap: used=12019 (tap) split=Some((12012, 7)) size=200000 (catalog) cost=0.029000 (agent partial floor=0.029) model=Some("claude-sonnet-4-5") total=12019 exact=true
        "#]],
    );
}

#[test]
fn the_tap_wins_over_the_transcript_whichever_reports_the_turn_first() {
    // Codex: the tap and the rollout both saw the turn's two calls; the transcript worker may
    // read the rollout before or after the tap's reports reach the relay. Either way the turn
    // is the tap's, with the same figures, each call counted once.
    let tap = "tap main openai 9000 3000 120 40 gpt-5.2-codex
               tap main openai 9400 9000 80 0 gpt-5.2-codex";
    let transcript = "tcall main openai 9000 3000 120 40 gpt-5.2-codex
                      tcall main openai 9400 9000 80 0 gpt-5.2-codex
                      tturn";
    let script = |first: &str, second: &str| {
        format!("select gpt-5.2-codex\nfollow\nturn\nprompt 5\n{first}\n{second}\nend\nsnap")
    };
    let tap_first = run(95, &script(tap, transcript));
    let transcript_first = run(95, &script(transcript, tap));
    assert_eq!(tap_first, transcript_first);
    expect![[r#"
        learned baseline=8995
          main: in=18400 out=200
        turn: in=18400 cr=12000 cw=0 out=200 th=40 total=18600 calls=Some(2) src=tap cache=true cost=0.016100
        snap: used=9480 (tap) split=Some((9400, 80)) size=258400 (catalog) cost=0.016100 (catalog) model=Some("gpt-5.2-codex") total=18600 exact=true
    "#]]
    .assert_eq(&tap_first);
}
