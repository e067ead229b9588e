//! The reports benchmark: a generated history with a known bill ([`crate::history`]), then
//! acp-usage's `import` (first and again), `report daily` and `status`, and ccusage's
//! `daily --offline` on the same files when it can be installed from npm, each timed with its
//! peak memory, and each tool's cost held against the truth.
//!
//! Both tools run as a user runs them: separate processes, `HOME` at the history, `TZ=UTC` (the
//! history's days are UTC days). Peak memory is the child's `ru_maxrss` from `wait4`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use crate::history::{self, Spec, Truth};
use crate::stats::median;

/// ccusage's newest release that runs on linux-x64 (its Rust build, from npm).
pub const CCUSAGE: &str = "ccusage@20.0.24";

/// What to run.
#[derive(Debug, Clone)]
pub struct ReportsOptions {
    /// The acp-usage binary.
    pub acp_usage: PathBuf,
    /// Where the history and ledger go (removed afterwards unless `keep`).
    pub work: PathBuf,
    /// Where ccusage is installed (`<tools>/ccusage`).
    pub tools: PathBuf,
    /// About this many MB of history.
    pub mb: u64,
    pub seed: u64,
    /// Runs of each command; the table shows medians.
    pub runs: usize,
    pub keep: bool,
}

/// One command's figures over the runs.
#[derive(Debug, Clone, Default)]
struct Figures {
    times: Vec<f64>,
    peak_kib: u64,
}

impl Figures {
    fn add(&mut self, t: &Timed) {
        self.times.push(t.wall.as_secs_f64());
        self.peak_kib = self.peak_kib.max(t.peak_kib);
    }
}

/// One finished child.
struct Timed {
    wall: Duration,
    peak_kib: u64,
    stdout: Vec<u8>,
}

/// Runs `cmd` to the end with its stdout captured, stderr dropped; its wall time and peak RSS.
fn timed(mut cmd: Command) -> anyhow::Result<Timed> {
    let what = format!("{:?}", cmd.get_program());
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut buf);
        buf
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; the pid is our own child's.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    anyhow::ensure!(waited == pid, "waiting for {what}: {}", std::io::Error::last_os_error());
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    anyhow::ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{what} failed ({status}): {}",
        String::from_utf8_lossy(&stderr).lines().last().unwrap_or("")
    );
    Ok(Timed { wall, peak_kib: usage.ru_maxrss as u64, stdout })
}

/// The cost a tool reported: in all, per day, per model (where it says).
#[derive(Debug, Default)]
struct Reported {
    total: f64,
    by_day: BTreeMap<String, f64>,
    by_model: BTreeMap<String, f64>,
    /// Its own word on how much of it is exact, when it has one.
    exact_share: Option<f64>,
}

/// Runs the benchmark and returns its table; false when acp-usage's bill is off the truth by
/// more than $1e-6 anywhere (a regression the bench should not hide).
pub fn run(opts: &ReportsOptions) -> anyhow::Result<(String, bool)> {
    let home = opts.work.join("home");
    let _ = std::fs::remove_dir_all(&opts.work);
    std::fs::create_dir_all(&home)?;
    let spec = Spec::sized(opts.seed, opts.mb * 1_000_000);
    eprintln!("reports: generating ~{} MB of history (seed {})", opts.mb, opts.seed);
    let started = Instant::now();
    let truth = history::generate(&home, &spec)?;
    eprintln!(
        "reports: {} files, {:.0} MB, {} calls, true bill ${:.2}, in {:.1} s",
        truth.files,
        truth.bytes as f64 / 1e6,
        truth.total().calls,
        truth.total().cost,
        started.elapsed().as_secs_f64()
    );
    let ledger = opts.work.join("ledger.db");
    let acp = |args: &[&str]| {
        let mut c = Command::new(&opts.acp_usage);
        c.args(args).arg("--ledger").arg(&ledger);
        user_env(&mut c, &home);
        c
    };
    let mut first = Figures::default();
    let mut again = Figures::default();
    let mut daily = Figures::default();
    let mut status = Figures::default();
    let mut report = Vec::new();
    let mut models = Vec::new();
    for run in 0..opts.runs {
        let _ = std::fs::remove_file(&ledger);
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(ledger.with_extension(format!("db{suffix}")));
        }
        eprintln!("reports: run {}/{}", run + 1, opts.runs);
        first.add(&timed(acp(&["import"]))?);
        again.add(&timed(acp(&["import"]))?);
        let d = timed(acp(&["report", "daily", "--json"]))?;
        daily.add(&d);
        report = d.stdout;
        status.add(&timed(acp(&["status"]))?);
        models = timed(acp(&["report", "model", "--json"]))?.stdout;
    }
    let ours = acp_usage_reported(&report, &models)?;
    let ccusage = match ccusage(&opts.tools) {
        Ok(bin) => {
            let mut figures = Figures::default();
            let mut out = Vec::new();
            for _ in 0..opts.runs {
                let mut c = Command::new(&bin);
                c.args(["daily", "--offline", "--json"]);
                user_env(&mut c, &home);
                let t = timed(c)?;
                figures.add(&t);
                out = t.stdout;
            }
            Some((figures, ccusage_reported(&out)?))
        }
        Err(why) => {
            eprintln!("note: ccusage not measured: {why:#}");
            None
        }
    };
    let (table, ok) =
        table(&truth, &spec, [&first, &again, &daily, &status], &ours, ccusage.as_ref());
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&opts.work);
    } else {
        eprintln!("reports: history kept in {}", home.display());
    }
    Ok((table, ok))
}

/// The environment both tools see: the history as home, UTC days, no config of the user's.
fn user_env(c: &mut Command, home: &Path) {
    c.env_clear()
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"));
}

/// ccusage's binary under `tools`, installed with npm when missing.
fn ccusage(tools: &Path) -> anyhow::Result<PathBuf> {
    let prefix = tools.join("ccusage");
    let bin = prefix.join("node_modules/.bin/ccusage");
    let version = CCUSAGE.rsplit('@').next().unwrap_or_default();
    let installed = std::fs::read_to_string(prefix.join("node_modules/ccusage/package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|p| p["version"] == version);
    if !installed {
        eprintln!("reports: installing {CCUSAGE} with npm into {}", prefix.display());
        let status = Command::new("npm")
            .args(["install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"])
            .arg("--prefix")
            .arg(&prefix)
            .arg(CCUSAGE)
            .status()
            .context("running npm (ccusage comes from the npm registry)")?;
        anyhow::ensure!(status.success(), "npm install {CCUSAGE} failed");
    }
    anyhow::ensure!(bin.is_file(), "{} missing after the install", bin.display());
    Ok(bin)
}

/// acp-usage's `report daily --json` and `report model --json`.
fn acp_usage_reported(daily: &[u8], models: &[u8]) -> anyhow::Result<Reported> {
    let daily: Value = serde_json::from_slice(daily).context("report daily --json")?;
    let models: Value = serde_json::from_slice(models).context("report model --json")?;
    let mut r = Reported::default();
    let rows = |v: &Value| v["rows"].as_array().cloned().unwrap_or_default();
    for row in rows(&daily) {
        let day = row["date"].as_str().unwrap_or_default().to_owned();
        r.by_day.insert(day, row["cost"].as_f64().unwrap_or(0.0));
    }
    for row in rows(&models) {
        let model = row["model"].as_str().unwrap_or_default().to_owned();
        r.by_model.insert(model, row["cost"].as_f64().unwrap_or(0.0));
    }
    r.total = daily["totals"]["cost"].as_f64().unwrap_or(0.0);
    r.exact_share = daily["totals"]["exactCost"]
        .as_f64()
        .map(|exact| if r.total > 0.0 { exact / r.total } else { 1.0 });
    Ok(r)
}

/// ccusage's `daily --json`.
fn ccusage_reported(out: &[u8]) -> anyhow::Result<Reported> {
    let v: Value = serde_json::from_slice(out).context("ccusage daily --json")?;
    let mut r = Reported::default();
    for day in v["daily"].as_array().cloned().unwrap_or_default() {
        let date = day["date"].as_str().or(day["period"].as_str()).unwrap_or_default();
        *r.by_day.entry(date.to_owned()).or_default() += day["totalCost"].as_f64().unwrap_or(0.0);
        for m in day["modelBreakdowns"].as_array().cloned().unwrap_or_default() {
            let name = m["modelName"].as_str().unwrap_or_default().to_owned();
            *r.by_model.entry(name).or_default() += m["cost"].as_f64().unwrap_or(0.0);
        }
    }
    r.total = v["totals"]["totalCost"].as_f64().unwrap_or_else(|| r.by_day.values().sum());
    Ok(r)
}

/// The largest difference of a per-key cost from the truth's, over every key of either.
fn worst(reported: &BTreeMap<String, f64>, truth: &BTreeMap<String, f64>) -> f64 {
    truth
        .keys()
        .chain(reported.keys())
        .map(|k| {
            let want = truth.get(k).copied().unwrap_or(0.0);
            (reported.get(k).copied().unwrap_or(0.0) - want).abs()
        })
        .fold(0.0, f64::max)
}

fn table(
    truth: &Truth,
    spec: &Spec,
    ours: [&Figures; 4],
    reported: &Reported,
    ccusage: Option<&(Figures, Reported)>,
) -> (String, bool) {
    let total = truth.total();
    let by_day: BTreeMap<String, f64> =
        truth.by_day().into_iter().map(|(d, b)| (d, b.cost)).collect();
    let by_model: BTreeMap<String, f64> =
        truth.by_model().into_iter().map(|(m, b)| (m, b.cost)).collect();
    let mut s = String::new();
    s.push_str(&format!(
        "# reports: {} files, {:.0} MB ({} sessions over {} days, seed {}), {} calls\n\n",
        truth.files,
        truth.bytes as f64 / 1e6,
        spec.sessions,
        spec.days,
        spec.seed,
        total.calls
    ));
    s.push_str(&format!(
        "true bill ${:.2}: fast mode +${:.2}, long context +${:.2}, 1-hour cache writes +${:.2}\n\n",
        total.cost, truth.fast_extra, truth.long_context_extra, truth.one_hour_extra
    ));
    s.push_str("| tool | command | time (median) | peak memory | cost | error | worst day | worst model |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    let err = |r: &Reported| 100.0 * (r.total - total.cost) / total.cost;
    let secs = |f: &Figures| median(&f.times).unwrap_or(f64::NAN);
    let mb = |f: &Figures| f.peak_kib as f64 / 1024.0;
    let worst_day = worst(&reported.by_day, &by_day);
    let worst_model = worst(&canonical(&reported.by_model), &canonical(&by_model));
    let names = ["import (first)", "import (again)", "report daily", "status"];
    for (i, (name, f)) in names.iter().zip(ours).enumerate() {
        let bill = if i == 2 {
            format!(
                "${:.2} | {:+.4}% | ${:.6} | ${:.6}",
                reported.total,
                err(reported),
                worst_day,
                worst_model
            )
        } else {
            "| | |".to_owned()
        };
        s.push_str(&format!(
            "| acp-usage | {name} | {:.3} s | {:.0} MB | {bill} |\n",
            secs(f),
            mb(f)
        ));
    }
    match ccusage {
        Some((f, r)) => s.push_str(&format!(
            "| ccusage {} | daily --offline | {:.3} s | {:.0} MB | ${:.2} | {:+.4}% | ${:.6} | ${:.6} |\n",
            CCUSAGE.rsplit('@').next().unwrap_or_default(),
            secs(f),
            mb(f),
            r.total,
            err(r),
            worst(&r.by_day, &by_day),
            worst(&canonical(&r.by_model), &canonical(&by_model)),
        )),
        None => s.push_str("| ccusage | daily --offline | not measured (see the note above) | | | | | |\n"),
    }
    if let (Some((first, _)), Some(ours_first)) = (ccusage, ours.first()) {
        s.push_str(&format!(
            "\nacp-usage's first import takes {:.2}x ccusage's scan; again, {:.3}x.\n",
            secs(ours_first) / secs(first),
            secs(ours[1]) / secs(first)
        ));
    }
    s.push_str("\n| model | true bill | acp-usage | ccusage |\n|---|---|---|---|\n");
    let ours_models = canonical(&reported.by_model);
    let theirs = ccusage.map(|(_, r)| canonical(&r.by_model));
    for (model, want) in canonical(&by_model) {
        let cell = |m: Option<&BTreeMap<String, f64>>| {
            m.map_or("-".to_owned(), |m| {
                let got = m.get(&model).copied().unwrap_or(0.0);
                format!("${got:.2} ({:+.2}%)", 100.0 * (got - want) / want)
            })
        };
        s.push_str(&format!(
            "| {model} | ${want:.2} | {} | {} |\n",
            cell(Some(&ours_models)),
            cell(theirs.as_ref())
        ));
    }
    let exact = reported.exact_share.map_or("-".to_owned(), |e| format!("{:.1}%", 100.0 * e));
    s.push_str(&format!("acp-usage marks {exact} of its cost exact.\n"));
    let ok =
        (reported.total - total.cost).abs() <= 1e-6 && worst_day <= 1e-6 && worst_model <= 1e-6;
    if !ok {
        s.push_str("FAILED: acp-usage's bill is off the truth by more than $0.000001\n");
    }
    (s, ok)
}

/// Model ids without a date suffix, so `claude-haiku-4-5` and `claude-haiku-4-5-20251001`
/// are one model whichever a tool reports; ccusage's `-fast` names (fast mode as a model of its
/// own) folded into their model.
fn canonical(by_model: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (m, cost) in by_model {
        let m = m.strip_suffix("-fast").unwrap_or(m);
        let base = match m.rsplit_once('-') {
            Some((head, tail)) if tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_digit()) => {
                head
            }
            _ => m,
        };
        *out.entry(base.to_owned()).or_insert(0.0) += cost;
    }
    out
}

/// The work directory for a run: `<target>/bench-history/<pid>`.
pub fn work_dir(target: &Path) -> PathBuf {
    target.join("bench-history").join(std::process::id().to_string())
}
