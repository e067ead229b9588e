//! `acp-usage setup zed|jetbrains [--settings FILE] [--dry-run] [--remove] [--no-meter] [--yes]`:
//! adds to an editor's agent settings one entry per agent installed here, named after the agent
//! with "(metered)", that runs the agent through acp-usage, and in Zed turns on its plan-usage
//! meter (`agent.show_usage_status`, [`edit::meter`]) unless `--no-meter`; `--remove` takes
//! them out again.
//!
//! Planning is pure (the file's text and the agents found in, the new text and a report out) and
//! the edits are splices that keep every other byte ([`edit`]), so a second run changes nothing
//! and `--remove` gives back the file as it was. Reading, asking and writing are the command's:
//! it asks only on a terminal, and writes through a temporary file renamed over the old one.

pub mod diff;
pub mod edit;
pub mod editors;

use std::io::{self, BufRead as _, IsTerminal as _, Write};
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};

use self::edit::{EditError, Outcome, Wanted};
pub use self::editors::Editor;
use self::editors::{Launcher, entry_key};
use crate::agents::Profile;
use crate::agents::installed::{self, Found, Place, Search};

/// What `setup` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The editor whose settings to change.
    pub editor: Editor,
    /// The settings file (default: the editor's).
    pub settings: Option<PathBuf>,
    /// Print the change, write nothing.
    pub dry_run: bool,
    /// Take setup's entries out instead.
    pub remove: bool,
    /// Apply without asking, even on a terminal.
    pub yes: bool,
    /// Turn Zed's plan-usage meter on (or, with `remove`, off again); false: `--no-meter`, the
    /// setting is left as it is.
    pub meter: bool,
}

/// An agent setup will add: its entry, and where it was found.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Its entry.
    pub wanted: Wanted,
    /// Where it was found, for people.
    pub found: String,
}

impl Agent {
    /// The entry `editor` gets for `found`, started through `launcher`.
    pub fn new(editor: Editor, found: &Found, launcher: &Launcher) -> Agent {
        let program = found.launch.program;
        let found_at = match (&found.place, &found.registry) {
            (place, Some(registered)) => format!(
                "{} {} ({})",
                registered.id,
                place.describe(),
                registered.distribution.name()
            ),
            (Place::Path, None) => format!("{program} {}", found.place.describe()),
            (place, None) => format!("{} {}", found.path.display(), place.describe()),
        };
        Agent { wanted: editor.wanted(found, launcher), found: found_at }
    }
}

/// A change to the settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The file's text after it; `None` when the file goes (all that was left of one setup
    /// created).
    pub after: Option<String>,
    /// One line per entry: what happens to it.
    pub report: Vec<String>,
    /// Set when `--remove` would not give back this exact file afterwards.
    pub warning: Option<String>,
}

/// The names setup gives entries: one per launch of every profile.
pub fn own_keys() -> Vec<String> {
    let mut keys: Vec<String> =
        Profile::all().flat_map(|p| p.launches().iter().map(|l| entry_key(l.title))).collect();
    keys.dedup();
    keys
}

/// Setup's change to `before` (`None`: no file yet) for `agents`; with `meter`, Zed's
/// plan-usage meter is turned on too.
pub fn plan_setup(
    editor: Editor,
    before: Option<&str>,
    agents: &[Agent],
    meter: bool,
) -> Result<Plan, EditError> {
    let own = own_keys();
    let wanted: Vec<Wanted> = agents.iter().map(|a| a.wanted.clone()).collect();
    let mut done = edit::setup(before, editor.dialect(), &wanted, &own)?;
    let mut report: Vec<String> = agents
        .iter()
        .zip(&done.outcomes)
        .map(|(a, outcome)| {
            let key = &a.wanted.key;
            match outcome {
                Outcome::Added => format!("added      {key}: {}", a.found),
                Outcome::Updated => format!("updated    {key}: {}", a.found),
                Outcome::Unchanged => format!("unchanged  {key}: {}", a.found),
                Outcome::Covered(by) => format!(
                    "skipped    {key}: your entry \"{by}\" already runs {} through acp-usage",
                    a.wanted.program
                ),
                Outcome::Taken => format!(
                    "skipped    {key}: an entry of that name that does not run acp-usage is there"
                ),
            }
        })
        .collect();
    let dialect = editor.dialect();
    // The meter goes in after the entries, so that `--remove` takes it out first and finds the
    // entries as setup left them.
    if meter && editor == Editor::Zed && !done.text.is_empty() {
        let (text, outcome) = edit::meter::turn_on(&done.text, dialect)?;
        done.text = text;
        report.push(meter_line(outcome));
    }
    // What the change adds must come out again: the file without setup's entries is the same
    // before and after it.
    let stripped = |text: &str| {
        let text = match editor {
            Editor::Zed => edit::meter::turn_off(text, dialect)?.0,
            Editor::JetBrains => text.to_owned(),
        };
        edit::remove(&text, dialect, &own).map(|r| r.text)
    };
    let warning = (stripped(&done.text)? != stripped(before.unwrap_or(""))?).then(|| {
        "note: the file's layout is one `setup --remove` cannot restore byte for byte".to_owned()
    });
    // No file and nothing to put in it: still no file.
    let after = (before.is_some() || !done.text.is_empty()).then_some(done.text);
    Ok(Plan { after, report, warning })
}

/// What the report says of the meter.
fn meter_line(outcome: edit::meter::Outcome) -> String {
    use edit::meter::Outcome;
    match outcome {
        Outcome::Added => "added      agent.show_usage_status: true (Zed's plan-usage meter: the \
                           5-hour and 7-day limits; --no-meter leaves it alone)"
            .to_owned(),
        Outcome::AlreadyOn => {
            "unchanged  agent.show_usage_status: Zed's plan-usage meter is on".to_owned()
        }
        Outcome::LeftOff => "skipped    agent.show_usage_status: you set it to false, so Zed's \
                             plan-usage meter stays off (set it to true to see your 5-hour and \
                             7-day limits)"
            .to_owned(),
        Outcome::LeftAlone => "skipped    agent.show_usage_status: your settings give it a value \
                               setup does not change; Zed's plan-usage meter needs `\"agent\": \
                               {\"show_usage_status\": true}`"
            .to_owned(),
    }
}

/// `--remove`'s change to `before`; with `meter`, the meter setup turned on goes off again.
pub fn plan_remove(editor: Editor, before: Option<&str>, meter: bool) -> Result<Plan, EditError> {
    let Some(before) = before else {
        return Ok(Plan { after: None, report: Vec::new(), warning: None });
    };
    let mut report = Vec::new();
    let mut text = before.to_owned();
    if meter && editor == Editor::Zed {
        let (off, removed) = edit::meter::turn_off(before, editor.dialect())?;
        if removed {
            report.push("removed    agent.show_usage_status (Zed's plan-usage meter)".to_owned());
        }
        text = off;
    }
    let removal = edit::remove(&text, editor.dialect(), &own_keys())?;
    report.extend(removal.removed.iter().map(|k| format!("removed    {k}")));
    // A file setup created, with nothing else in it now, goes (an empty file setup never
    // touched stays).
    let after = (removal.removed.is_empty() || !removal.text.is_empty()).then_some(removal.text);
    Ok(Plan { after, report, warning: None })
}

/// Runs the command.
pub fn run(opts: &Options) -> anyhow::Result<ExitCode> {
    let env = |name: &str| std::env::var_os(name);
    let editor = opts.editor;
    let path = match &opts.settings {
        Some(p) => p.clone(),
        None => editor
            .settings_file(&env)
            .context("no home directory to find the settings in: give the file with --settings")?,
    };
    // A settings file linked from elsewhere (a dotfiles repository) is edited where it lives.
    let file = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let before = match std::fs::read(&file) {
        Ok(bytes) => Some(
            String::from_utf8(bytes)
                .map_err(|_| anyhow!("{}: not UTF-8 text; left as it is", path.display()))?,
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = io::stdout().lock();
    writeln!(out, "{} settings: {}", editor.name(), path.display())?;

    let plan = if opts.remove {
        plan_remove(editor, before.as_deref(), opts.meter)
    } else {
        let mut search = Search::from_env();
        search.editor_dirs = editor.agent_dirs(&env);
        // The registry agents the file being edited names (`--settings` included).
        search.zed = editor.registry_files(&env, &file);
        let findings = installed::find(&search);
        // What the registry entries lacked; a file's absence is nothing to report here.
        for note in findings.notes.iter().filter(|n| n.id.is_some()) {
            writeln!(out, "note: {}", note.message)?;
        }
        let found = installed::one_per_agent(&findings.found);
        if found.is_empty() {
            no_agents(&mut out, &search)?;
            return Ok(ExitCode::from(1));
        }
        let launcher = Launcher::find(editor, search.path.as_deref());
        if !launcher.args.is_empty() {
            writeln!(
                out,
                "acp-usage is not installed on PATH: the entries run it through `{} {}` (after \
                 `npm install -g acp-usage`, run setup again to use the installed one).",
                launcher.command,
                launcher.args.join(" ")
            )?;
        }
        let agents: Vec<Agent> = found.iter().map(|f| Agent::new(editor, f, &launcher)).collect();
        plan_setup(editor, before.as_deref(), &agents, opts.meter)
    }
    .map_err(|e| match e {
        EditError::Syntax(s) => anyhow!(
            "{}:{}:{}: {}; the file is left as it is",
            path.display(),
            s.line,
            s.column,
            s.message
        ),
        other => anyhow!("{}: {other}; the file is left as it is", path.display()),
    })?;

    let change = Change { before: before.as_deref(), plan: &plan };
    apply(opts, &mut out, &path, &file, change)
}

/// A settings file's text before setup, and what setup plans for it.
struct Change<'a> {
    before: Option<&'a str>,
    plan: &'a Plan,
}

/// Shows the planned change to the settings file and makes it: after a yes at a terminal,
/// straight away with `--yes` or off one, never with `--dry-run`. `path` is the file as named,
/// `file` where it lives.
fn apply(
    opts: &Options,
    out: &mut impl Write,
    path: &Path,
    file: &Path,
    change: Change<'_>,
) -> anyhow::Result<ExitCode> {
    let Change { before, plan } = change;
    for line in &plan.report {
        writeln!(out, "  {line}")?;
    }
    if plan.after.as_deref() == before {
        let what = if opts.remove { "no entry of setup's to remove" } else { "nothing to change" };
        writeln!(out, "{what}; {} left as it is.", path.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(warning) = &plan.warning {
        writeln!(out, "{warning}")?;
    }
    let name = path.display().to_string();
    let old_name = if before.is_some() { name.as_str() } else { "/dev/null" };
    let new_name = if plan.after.is_some() { name.as_str() } else { "/dev/null" };
    let shown = diff::unified(
        old_name,
        new_name,
        before.unwrap_or(""),
        plan.after.as_deref().unwrap_or(""),
    );
    if opts.dry_run {
        write!(out, "{shown}")?;
        writeln!(out, "Dry run: {} not changed.", path.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    // Off a terminal (a script, `npx acp-usage setup zed | tee`) there is no one to ask.
    if !opts.yes && io::stdin().is_terminal() && io::stdout().is_terminal() {
        write!(out, "{shown}Apply this change to {}? [y/N] ", path.display())?;
        out.flush()?;
        let mut answer = String::new();
        io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            writeln!(out, "Not changed.")?;
            return Ok(ExitCode::from(1));
        }
    }
    match &plan.after {
        Some(text) => {
            write_atomically(file, text).with_context(|| format!("writing {}", path.display()))?;
            writeln!(out, "Wrote {}.", path.display())?;
        }
        None => {
            std::fs::remove_file(file).with_context(|| format!("removing {}", path.display()))?;
            writeln!(
                out,
                "Removed {}: setup had created it and nothing else is in it.",
                path.display()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Says what was searched, when no agent was found.
fn no_agents(out: &mut impl Write, search: &Search) -> io::Result<()> {
    let mut programs: Vec<&str> =
        Profile::all().flat_map(|p| p.launches().iter().map(|l| l.program)).collect();
    programs.dedup();
    let mut places = vec!["PATH".to_owned()];
    if let Some(prefix) = &search.npm_prefix {
        places.push(format!("npm's global prefix ({})", prefix.display()));
    }
    if let Some(home) = &search.home {
        places.push(home.join(".local").join("bin").display().to_string());
    }
    places.extend(search.editor_dirs.iter().map(|(_, d)| d.display().to_string()));
    if let Some(zed) = &search.zed {
        places.push(format!("the ACP registry agents added in {}", zed.settings.display()));
    }
    writeln!(out, "No agents found; nothing changed.")?;
    writeln!(out, "Looked for {} in {}.", programs.join(", "), places.join(", "))?;
    writeln!(
        out,
        "Install an agent (e.g. `npm install -g @agentclientprotocol/claude-agent-acp`) and run \
         setup again."
    )
}

/// Writes `text` to `file` through a temporary file in the same directory, renamed over it, so
/// the editor never reads half a file; the old file's permissions are kept.
fn write_atomically(file: &Path, text: &str) -> io::Result<()> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let permissions = std::fs::metadata(file).ok().map(|m| m.permissions());
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.acp-usage-{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if let Some(p) = permissions {
            std::fs::set_permissions(&tmp, p)?;
        }
        std::fs::rename(&tmp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests;
