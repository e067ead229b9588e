//! Doctor's findings about one agent: the programs found and the profile each gets, its
//! transcripts, and the tap (what it can point, what defeats it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Finding, Inputs, Status};
use crate::agents::installed::{Found, Note, Place, Search};
use crate::agents::{self, Profile};
use crate::sources::tap::point::Env;
use crate::sources::transcripts::{Format, Store};

/// Every finding about `profile`, whose programs are `found`.
pub(super) fn check(
    profile: Profile,
    found: &[&Found],
    inputs: &Inputs,
    tap_on: bool,
    out: &mut Vec<Finding>,
) {
    for f in found {
        out.push(program(profile, f));
    }
    out.push(transcripts(profile, inputs));
    out.extend(tap(profile, inputs, tap_on));
}

/// The program found, where, and the profile its command line gets.
fn program(profile: Profile, f: &Found) -> Finding {
    let command = f.command();
    let detected = Profile::detect_before_start(&command);
    let mut message = match &f.registry {
        // No env values: they may hold keys.
        Some(r) => format!(
            "{} {} ({}), run as `{}`",
            r.id,
            f.place.describe(),
            r.distribution.name(),
            command.join(" ")
        ),
        None => format!("{} {} ({})", f.launch.program, f.place.describe(), f.path.display()),
    };
    let status = if detected == profile {
        message.push_str(&format!(": profile {}", profile.name()));
        Status::Ok
    } else {
        // Until `initialize` names the agent, its command line is all acp-usage has to go by,
        // and the tap is pointed by it before the agent starts.
        message.push_str(&format!(
            ": its command line reads as profile {} until the agent names itself; \
             `acp-usage --profile {} -- ...` fixes it",
            detected.name(),
            profile.name()
        ));
        Status::Warn
    };
    if f.place != Place::Path && f.registry.is_none() {
        message.push_str("; not on PATH, so the editor must be given its full path");
    }
    Finding::new(Some(profile.name()), "found", status, message).at(&f.path)
}

/// Where the agent's transcripts are, and whether they are there.
fn transcripts(profile: Profile, inputs: &Inputs) -> Finding {
    let name = Some(profile.name());
    let env = |var: &str| (inputs.env)(var).map(OsString::from);
    let Some(format) = profile.import_format() else {
        return Finding::new(
            name,
            "transcripts",
            Status::Info,
            "none: acp-usage reads what the agent reports over ACP".into(),
        );
    };
    let live = profile.transcripts().is_some();
    let Some(path) = (format.location)(&env) else {
        return Finding::new(
            name,
            "transcripts",
            Status::Warn,
            "no location: HOME is not set, so neither the agent nor acp-usage knows where they \
             are"
            .into(),
        );
    };
    let (status, state) = location_state(format, &path);
    let (status, message) = if !live {
        // qwen-code: the relay takes its per-call ACP reports; only `import` reads the files.
        let message = format!(
            "the relay reads its per-call ACP reports; `import` reads {}: {state}",
            path.display()
        );
        (status.min(Status::Info), message)
    } else if status == Status::Ok {
        (status, format!("{} ({state})", path.display()))
    } else {
        let message =
            format!("{} {state}: figures come from what the agent reports", path.display());
        (status, message)
    };
    Finding::new(name, "transcripts", status, message).at(path)
}

/// Whether a format's location holds its records: a directory of files, or a database file.
fn location_state(format: &Format, path: &Path) -> (Status, String) {
    let database = matches!(format.store, Store::OpencodeDb);
    match std::fs::metadata(path) {
        Ok(m) if database && m.is_file() => {
            (Status::Ok, format!("found, a database of {}", super::show::size(m.len())))
        }
        Ok(m) if !database && m.is_dir() => match std::fs::read_dir(path) {
            Ok(_) => (Status::Ok, "found".into()),
            Err(err) => (Status::Warn, format!("cannot be read: {err}")),
        },
        Ok(_) => (Status::Warn, format!("not a {}", if database { "file" } else { "directory" })),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            (Status::Warn, "not found (no session yet, or the agent writes elsewhere)".into())
        }
        Err(err) => (Status::Warn, format!("cannot be read: {err}")),
    }
}

/// The tap's findings: settings that defeat it, calls it cannot see, and what it points.
fn tap(profile: Profile, inputs: &Inputs, tap_on: bool) -> Vec<Finding> {
    let finding = |status, message| Finding::new(Some(profile.name()), "tap", status, message);
    let mut out = Vec::new();
    let pointing = agents::point(profile, inputs.env, inputs.read_file);
    for warning in &pointing.warnings {
        // A setting of the user's that sends the calls past the variables the tap points:
        // counts that look exact but miss those calls. The agents' warnings start with the
        // file that holds it ("<file> sets ...").
        let path = warning
            .split_once(" sets ")
            .map(|(file, _)| PathBuf::from(file))
            .filter(|p| p.is_absolute());
        // A failure with the tap off too: the tap is on by default for profiled agents, and
        // then only a log line, which editors seldom show, would say so.
        let off = if tap_on { "" } else { "; the tap is off here, this stands in its way once on" };
        let fail = finding(
            Status::Fail,
            format!(
                "{warning} (a base URL set in the environment instead is one the tap forwards \
                 to){off}"
            ),
        );
        out.push(match path {
            Some(path) => fail.at(path),
            None => fail,
        });
    }
    let env = Env { var: inputs.env, read_file: inputs.read_file };
    for untapped in profile.untapped(&env) {
        let (status, then) = if untapped.recorded {
            (Status::Info, "its own records count those calls exactly")
        } else {
            (Status::Warn, "the calls its own records miss go uncounted")
        };
        out.push(finding(status, format!("cannot see its calls: {}; {then}", untapped.why)));
    }
    let state = if tap_on {
        "on here"
    } else {
        "off here (turned off by --tap off, ACP_USAGE_TAP=0 or `tap = false`)"
    };
    if !pointing.routes.is_empty() {
        let routes: Vec<String> = pointing
            .routes
            .iter()
            .map(|r| format!("{} → {}", r.name, super::show::url(&r.upstream)))
            .collect();
        out.push(finding(Status::Ok, format!("can point it ({}); {state}", routes.join(", "))));
    } else if out.is_empty() {
        out.push(finding(Status::Info, "its profile knows no setting that points it".into()));
    }
    out
}

/// A registry entry that could not be made into a command, or a file that could not be read:
/// neutral, as the agent (if any) still runs in the editor as it did.
pub(super) fn note(note: &Note) -> Finding {
    let finding = Finding::new(
        note.profile.map(|p| p.name()),
        "registry",
        Status::Info,
        note.message.clone(),
    );
    match &note.path {
        Some(path) => finding.at(path),
        None => finding,
    }
}

/// No agent found: where they were looked for.
pub(super) fn none_found(search: &Search) -> Finding {
    let mut places = Vec::new();
    match &search.path {
        Some(path) => {
            places.push(format!("PATH ({} directories)", std::env::split_paths(path).count()))
        }
        None => places.push("no PATH".into()),
    }
    match &search.npm_prefix {
        Some(prefix) => places.push(format!("npm's global prefix {}", prefix.display())),
        None => places.push("npm's global prefix: unknown".into()),
    }
    if let Some(home) = &search.home {
        places.push(home.join(".local").join("bin").display().to_string());
    }
    for (editor, dir) in &search.editor_dirs {
        places.push(format!("{editor}'s agents in {}", dir.display()));
    }
    if let Some(zed) = &search.zed {
        places.push(format!("the ACP registry agents added in {}", zed.settings.display()));
    }
    let programs: Vec<&str> = Profile::all()
        .flat_map(|p| p.launches().iter().map(|l| l.program))
        .fold(Vec::new(), |mut v, p| {
            if !v.contains(&p) {
                v.push(p);
            }
            v
        });
    Finding::new(
        None,
        "agents",
        Status::Warn,
        format!("no agent found; looked for {} in {}", programs.join(", "), places.join(", ")),
    )
}
