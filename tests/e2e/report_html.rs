//! `acp-usage report --html` rendered by a real browser: a ledger seeded with several days, three
//! models and exact, estimated and unpriced calls; the page written by the binary, then loaded
//! by headless Chromium (`/usr/bin/chromium`, from `.ci/install-browser.sh`), whose DOM is read
//! back.
//!
//! Guarantees checked:
//! - the page is self-contained: no script, no external reference (nothing to fetch);
//! - each chart has one day group per day of the range (a day without calls included) and one
//!   bar per priced model (cost), token kind (tokens) or exact/estimated part (exactness);
//! - every figure the DOM carries (per day, per model and day, per session, the totals) equals
//!   what `report --json` says for the same range, to a billionth of a dollar;
//! - a session title with `<b>`, `&`, `"` and a `<script>` comes through as text, with no
//!   element injected;
//! - Chromium's screenshot of the page (kept as `target/test-artifacts/report-html.png`) is a
//!   real PNG of a drawn page.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acp_usage::sinks::ledger::{Origin, SessionInfo, SessionRef, Settled, Store};
use acp_usage_core::{AccountedCall, Role, Source, TokenRecord};
use acp_usage_tests::relay::{relay_binary, target_dir};
use acp_usage_tests::scratch::Scratch;
use serde_json::Value;

const CHROMIUM: &str = "/usr/bin/chromium";
/// 2026-11-16T00:00:00Z, a Monday.
const NOV_16: i64 = 1_794_787_200_000;
const DAY: i64 = 86_400_000;
const HOUR: i64 = 3_600_000;
/// The title no page may turn into markup.
const TITLE: &str = "Fix <b>bold</b> & \"quotes\" <script>alert(1)</script>";

/// One call of `model` at `at`: `input` prompt tokens of which a fifth cache reads and a tenth
/// cache writes, `output` generated.
fn call(model: &str, input: u64, output: u64, cost: Option<f64>, source: Source) -> AccountedCall {
    AccountedCall {
        record: TokenRecord {
            input,
            cache_read: input / 5,
            cache_write_5m: input / 10,
            cache_write_1h: 0,
            output,
            thought: 0,
            model: Some(model.to_owned()),
            stated_cost: None,
            modifiers: Default::default(),
        },
        calls: 1,
        role: Role::Main,
        provider: None,
        source,
        cost,
        cost_stated: false,
        modifiers_unpriced: false,
        key: None,
        in_turn: true,
    }
}

/// Three sessions over 2026-11-16..21 (none on the 19th): Sonnet from transcripts (exact),
/// gpt-5.2 from the tap (exact) and estimated, and kimi-k9, which no catalog prices.
fn seed(ledger: &Path) {
    let mut store = Store::open(ledger).expect("a new ledger");
    let sessions = [
        ("s-claude", "claude", "/home/me/src/<alpha>", Some(TITLE)),
        ("s-codex", "codex", "/home/me/src/beta", None),
        ("s-kimi", "opencode", "/home/me/src/gamma", Some("Try the new model")),
    ];
    for (id, agent, project, title) in sessions {
        let info = SessionInfo {
            project: Some(project.to_owned()),
            title: title.map(str::to_owned),
            ..SessionInfo::default()
        };
        let s = SessionRef { id: id.to_owned(), agent: agent.to_owned() };
        store.session(&s, &info, None, NOV_16).expect("session");
    }
    let sonnet = "claude-sonnet-4-5";
    let gpt = "gpt-5.2";
    let kimi = "kimi-k9";
    let at = |day: i64, hour: i64| NOV_16 + day * DAY + hour * HOUR;
    let calls: [(&str, &str, i64, AccountedCall); 12] = [
        (
            "s-claude",
            "claude",
            at(0, 9),
            call(sonnet, 120_000, 4_000, Some(0.4125), Source::Transcript),
        ),
        (
            "s-claude",
            "claude",
            at(0, 10),
            call(sonnet, 240_000, 9_000, Some(0.8175), Source::Transcript),
        ),
        ("s-codex", "codex", at(0, 14), call(gpt, 60_000, 2_500, Some(0.1), Source::Tap)),
        (
            "s-claude",
            "claude",
            at(1, 11),
            call(sonnet, 800_000, 21_000, Some(2.715), Source::Transcript),
        ),
        ("s-codex", "codex", at(1, 15), call(gpt, 300_000, 12_000, Some(0.49), Source::Estimate)),
        ("s-kimi", "opencode", at(1, 16), call(kimi, 90_000, 3_000, None, Source::Agent)),
        ("s-codex", "codex", at(2, 8), call(gpt, 150_000, 6_000, Some(0.2475), Source::Tap)),
        ("s-kimi", "opencode", at(2, 17), call(kimi, 40_000, 1_000, None, Source::Agent)),
        (
            "s-claude",
            "claude",
            at(4, 10),
            call(sonnet, 500_000, 15_000, Some(1.73), Source::Transcript),
        ),
        ("s-codex", "codex", at(4, 12), call(gpt, 220_000, 8_000, Some(0.33), Source::Estimate)),
        ("s-codex", "codex", at(5, 9), call(gpt, 640_000, 30_000, Some(1.11), Source::Tap)),
        (
            "s-claude",
            "claude",
            at(5, 23),
            call(sonnet, 90_000, 2_000, Some(0.2985), Source::Estimate),
        ),
    ];
    for (id, agent, at, c) in calls {
        let s = SessionRef { id: id.to_owned(), agent: agent.to_owned() };
        store
            .calls(
                &s,
                Settled { calls: &[c], times: Some(&[at]), ..Default::default() },
                Origin::Import,
                at,
            )
            .expect("calls");
    }
}

/// Runs `acp-usage report` on `ledger` as seeded (`--no-import`), with an empty HOME.
fn report(home: &Path, ledger: &Path, args: &[&str]) -> std::process::Output {
    Command::new(relay_binary().expect("binary"))
        .arg("report")
        .args(args)
        .args([
            "--no-import",
            "--utc",
            "--since",
            "2026-11-16",
            "--until",
            "2026-11-21",
            "--ledger",
        ])
        .arg(ledger)
        .env("HOME", home)
        .env_remove("ACP_USAGE_LEDGER")
        .env_remove("XDG_DATA_HOME")
        .output()
        .expect("acp-usage report runs")
}

/// Runs Chromium headless on `page` with `args`, its stdout into `stdout`, for at most a minute.
fn chromium(scratch: &Scratch, page: &Path, args: &[&str], stdout: &Path) {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let profile = scratch.path(&format!("chromium-profile-{n}"));
    let stderr = scratch.path(&format!("chromium-{n}.stderr"));
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", scratch.home())
        .stdin(Stdio::null())
        .stdout(File::create(stdout).expect("stdout file"))
        .stderr(File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium {args:?} did not finish in 60 s; its stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "chromium {args:?} failed ({status}); its stderr:\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
}

/// The elements named `tag` in `html` whose opening tag has all `with` attributes (`class="day"`):
/// each one's attributes.
fn elements(html: &str, tag: &str, with: &[&str]) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let end = after.find('>').expect("an opening tag ends");
        let attrs_text = &after[..end];
        if with.iter().all(|w| attrs_text.contains(w)) {
            found.push(attributes(attrs_text));
        }
        rest = &after[end..];
    }
    found
}

/// `name="value"` pairs, values unescaped as Chromium serialises them.
fn attributes(text: &str) -> BTreeMap<String, String> {
    let mut attrs = BTreeMap::new();
    let mut rest = text.trim();
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].trim().to_owned();
        let value_start = &rest[eq + 2..];
        let close = value_start.find('"').expect("a closing quote");
        let value = value_start[..close]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        attrs.insert(name, value);
        rest = value_start[close + 1..].trim_start();
    }
    attrs
}

/// The part of `dom` inside `<section id="{id}" ...>`.
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<section id=\"{id}\""))
        .unwrap_or_else(|| panic!("no section #{id} in the DOM"));
    let end = dom[start..].find("</section>").expect("the section ends") + start;
    &dom[start..end]
}

fn num(attrs: &BTreeMap<String, String>, name: &str) -> f64 {
    attrs
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {attrs:?}"))
        .parse()
        .unwrap_or_else(|err| panic!("{name} in {attrs:?}: {err}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A `--json` cost (`null`: nothing priced, drawn as 0).
fn cost(v: &Value) -> f64 {
    v["cost"].as_f64().unwrap_or(0.0)
}

fn tokens(v: &Value, key: &str) -> f64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}")) as f64
}

#[test]
fn report_html_in_headless_chromium() {
    assert!(
        Command::new(CHROMIUM).arg("--version").output().is_ok_and(|o| o.status.success()),
        "{CHROMIUM} is missing or does not run: run .ci/install-browser.sh (it installs Debian's \
         chromium package; .ci/install-agents.sh runs it too)"
    );
    let started = Instant::now();
    let scratch = Scratch::new("report-html").expect("scratch");
    let ledger = scratch.path("ledger.db");
    seed(&ledger);
    let page = scratch.path("page.html");

    let out = report(&scratch.home(), &ledger, &["--html", page.to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "report --html failed: {stderr}");
    assert!(out.stdout.is_empty(), "report --html printed on stdout");
    let html = std::fs::read_to_string(&page).expect("the page was written");
    // Self-contained: nothing to run, nothing to fetch.
    for bad in ["<script", "http:", "https:", "src=", "url(", "@import", "<link"] {
        assert!(!html.contains(bad), "the page holds `{bad}`");
    }

    let out = report(&scratch.home(), &ledger, &["--json", "--breakdown"]);
    assert!(out.status.success(), "report --json failed");
    let json: Value = serde_json::from_slice(&out.stdout).expect("report --json parses");
    let rows: BTreeMap<String, &Value> = json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["date"].as_str().expect("a date").to_owned(), r))
        .collect();
    assert_eq!(rows.len(), 5, "the seeded days with calls: {json}");

    let dumped = scratch.path("dom.html");
    chromium(&scratch, &page, &["--dump-dom"], &dumped);
    let dom = std::fs::read_to_string(&dumped).expect("the dumped DOM");
    assert!(dom.contains("</html>"), "Chromium dumped no page:\n{dom}");

    // No element came out of the title; its text did.
    assert!(!dom.contains("<b>") && !dom.contains("<script"), "an injected element:\n{dom}");
    assert!(
        dom.contains(
            "Fix &lt;b&gt;bold&lt;/b&gt; &amp; \"quotes\" &lt;script&gt;alert(1)&lt;/script&gt;"
        ),
        "the title's text is not in the DOM as text"
    );

    let days = ["2026-11-16", "2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"];
    let mut failures = Vec::new();

    // Cost per day, one bar per priced model.
    let cost_days = elements(section(&dom, "cost-per-day"), "g", &["class=\"day\""]);
    assert_eq!(
        cost_days.iter().map(|g| g["data-day"].as_str()).collect::<Vec<_>>(),
        days,
        "one group per day of the range, the 19th (no calls) included"
    );
    let cost_section = section(&dom, "cost-per-day");
    for day in days {
        let g = cost_days.iter().find(|g| g["data-day"] == day).expect("the day");
        let row = rows.get(day);
        let want = row.map_or(0.0, |r| cost(r));
        if !close(num(g, "data-cost"), want) {
            failures.push(format!("cost of {day}: DOM {} vs --json {want}", g["data-cost"]));
        }
        // This day's bars: between its group's opening tag and the next group's.
        let start = cost_section.find(&format!("data-day=\"{day}\"")).expect("the group");
        let end = cost_section[start..].find("</g>").expect("the group ends") + start;
        let bars = elements(&cost_section[start..end], "rect", &["class=\"bar\""]);
        let priced: Vec<&Value> = row
            .map(|r| r["models"].as_array().expect("models").iter().collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|m| cost(m) > 0.0)
            .collect();
        if bars.len() != priced.len() {
            failures.push(format!("{day}: {} bars for {} priced models", bars.len(), priced.len()));
        }
        for m in &priced {
            let name = m["model"].as_str().expect("a model");
            match bars.iter().find(|b| b["data-model"] == name) {
                Some(b) if close(num(b, "data-cost"), cost(m)) => {}
                other => failures.push(format!("{day} {name}: bar {other:?} vs --json {m}")),
            }
        }
        let stacked: f64 = bars.iter().map(|b| num(b, "data-cost")).sum();
        if (stacked - want).abs() > 1e-6 {
            failures.push(format!("{day}: bars add up to {stacked}, the day to {want}"));
        }
    }

    // Tokens per day, by kind.
    let token_days = elements(section(&dom, "tokens-per-day"), "g", &["class=\"day\""]);
    assert_eq!(token_days.len(), days.len(), "token chart groups");
    let token_bars = elements(section(&dom, "tokens-per-day"), "rect", &["class=\"bar\""]);
    assert_eq!(token_bars.len(), 5 * 4, "four kinds on each of the five days with calls");
    for g in &token_days {
        let day = &g["data-day"];
        let Some(r) = rows.get(day) else {
            assert_eq!(num(g, "data-tokens"), 0.0, "{day} has no calls");
            continue;
        };
        let input = num(g, "data-uncached-tokens")
            + num(g, "data-cache-read-tokens")
            + num(g, "data-cache-write-tokens");
        let got = [
            input,
            num(g, "data-cache-read-tokens"),
            num(g, "data-cache-write-tokens"),
            num(g, "data-output-tokens"),
        ];
        let want = [
            tokens(r, "inputTokens"),
            tokens(r, "cachedReadTokens"),
            tokens(r, "cachedWriteTokens"),
            tokens(r, "outputTokens"),
        ];
        if got != want {
            failures.push(format!("tokens of {day}: DOM {got:?} vs --json {want:?}"));
        }
    }

    // Exactness per day.
    let exact_days = elements(section(&dom, "exactness-per-day"), "g", &["class=\"day\""]);
    assert_eq!(exact_days.len(), days.len(), "exactness chart groups");
    for g in &exact_days {
        let day = &g["data-day"];
        let (c, exact, unpriced, unpriced_tokens) = match rows.get(day) {
            Some(r) => (
                cost(r),
                r["exactCost"].as_f64().expect("exactCost"),
                tokens(r, "unpricedCalls"),
                tokens(r, "unpricedTokens"),
            ),
            None => (0.0, 0.0, 0.0, 0.0),
        };
        let got = (num(g, "data-cost"), num(g, "data-exact-cost"), num(g, "data-estimated-cost"));
        if !(close(got.0, c) && close(got.1, exact) && close(got.2, c - exact)) {
            failures.push(format!("exactness of {day}: DOM {got:?} vs --json {c} ({exact} exact)"));
        }
        if (num(g, "data-unpriced-calls"), num(g, "data-unpriced-tokens"))
            != (unpriced, unpriced_tokens)
        {
            failures.push(format!("unpriced on {day}: DOM {g:?} vs --json {unpriced} calls"));
        }
    }
    // The seed has all three kinds: exact, estimated and unpriced.
    let t = &json["totals"];
    assert!(t["unpricedCalls"].as_u64() == Some(2), "two unpriced calls: {t}");
    assert!(t["exactCost"].as_f64() < t["cost"].as_f64(), "some cost estimated: {t}");

    // Totals.
    let totals = &elements(&dom, "section", &["id=\"totals\""])[0];
    let pairs = [
        ("data-total-cost", cost(t)),
        ("data-exact-cost", t["exactCost"].as_f64().expect("exactCost")),
        ("data-calls", tokens(t, "calls")),
        ("data-total-tokens", tokens(t, "totalTokens")),
        ("data-cache-read-tokens", tokens(t, "cachedReadTokens")),
        ("data-cache-write-tokens", tokens(t, "cachedWriteTokens")),
        ("data-output-tokens", tokens(t, "outputTokens")),
        ("data-unpriced-calls", tokens(t, "unpricedCalls")),
        ("data-unpriced-tokens", tokens(t, "unpricedTokens")),
    ];
    for (name, want) in pairs {
        if !close(num(totals, name), want) {
            failures.push(format!("totals {name}: DOM {} vs --json {want}", totals[name]));
        }
    }
    let input = num(totals, "data-uncached-tokens")
        + num(totals, "data-cache-read-tokens")
        + num(totals, "data-cache-write-tokens");
    if input != tokens(t, "inputTokens") {
        failures.push(format!("total input: DOM {input} vs --json {}", t["inputTokens"]));
    }

    // The costliest sessions, dearest first, against the per-session report.
    let out = report(&scratch.home(), &ledger, &["session", "--json"]);
    let by_session: Value = serde_json::from_slice(&out.stdout).expect("session --json");
    let mut want: Vec<&Value> = by_session["rows"].as_array().expect("rows").iter().collect();
    want.sort_by(|a, b| cost(b).total_cmp(&cost(a)));
    let got = elements(section(&dom, "sessions"), "tr", &["data-session="]);
    assert_eq!(got.len(), 3, "three sessions");
    for (g, w) in got.iter().zip(&want) {
        let same = g["data-session"] == w["session"].as_str().expect("id")
            && close(num(g, "data-cost"), cost(w))
            && num(g, "data-calls") == tokens(w, "calls")
            && num(g, "data-tokens") == tokens(w, "totalTokens");
        if !same {
            failures.push(format!("session row {g:?} vs --json {w}"));
        }
    }
    assert!(failures.is_empty(), "the DOM disagrees with report --json:\n{}", failures.join("\n"));

    // A picture of it, kept for people to look at.
    let artifacts = target_dir().join("test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("target/test-artifacts");
    let png: PathBuf = artifacts.join("report-html.png");
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    chromium(&scratch, &page, &[&shot, "--window-size=1280,2000"], &scratch.path("shot.out"));
    let bytes = std::fs::read(&png).expect("Chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is not a PNG");
    assert!(bytes.len() > 20_000, "the screenshot is {} bytes: a blank page?", bytes.len());
    std::fs::copy(&page, artifacts.join("report-html.html")).expect("keep the page");
    eprintln!(
        "report --html: screenshot {} ({} bytes), page {}; {:.1} s",
        png.display(),
        bytes.len(),
        artifacts.join("report-html.html").display(),
        started.elapsed().as_secs_f64()
    );
}
