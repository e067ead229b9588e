//! Zed's plan-usage meter in its settings: `"agent": {"show_usage_status": true}` (Zed's
//! `agent.show_usage_status`, off by default), which draws the 5-hour and 7-day windows
//! acp-usage sends in `_meta["_claude/rateLimit"]`.
//!
//! Setup turns it on with the same kind of splice as its entries ([`super`]): the setting (or
//! the whole `agent` object, when there is none) goes first in its object, on a line of its
//! own, below a comment line of setup's, [`MARKER`]. The comment is how `--remove` knows the
//! setting is setup's and not the user's own `true`: it takes out only a setting right below
//! that comment, with the comment, and so gives back the file as it was. A setting the user
//! wrote is never changed: `false` stays off (the command says so), anything else is reported.

use super::{Dialect, Doc, EditError, Object, Tok, Value, splice, split_bom};

/// The comment line above what setup adds.
pub const MARKER: &str = "// Zed's plan-usage meter, turned on by `acp-usage setup zed`";

/// The object and the setting, in Zed's settings.
const AGENT: &str = "agent";
const SETTING: &str = "show_usage_status";

/// Where Zed's meter stands in a settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// `agent.show_usage_status` is `true`.
    On,
    /// The user set it to `false`.
    Off,
    /// Not set: Zed's default, off.
    Unset,
    /// Set to something that is not a boolean, or `agent` is not an object: Zed's reading of it
    /// is not setup's to guess.
    Unusual,
}

/// What turning the meter on did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The setting was added.
    Added,
    /// It was on already.
    AlreadyOn,
    /// The user turned it off: left off.
    LeftOff,
    /// Set to something setup does not change (or no settings object to put it in).
    LeftAlone,
}

/// The meter's state in `text`.
pub fn state(text: &str) -> Result<State, EditError> {
    let doc = Doc::parse(split_bom(text).1)?;
    Ok(match &doc.root {
        Some(Value::Object(root)) => match root.get(AGENT).map(|p| &p.value) {
            None => State::Unset,
            Some(Value::Object(agent)) => match agent.get(SETTING).map(|p| &p.value) {
                None => State::Unset,
                Some(Value::BooleanLit(b)) if b.value => State::On,
                Some(Value::BooleanLit(_)) => State::Off,
                Some(_) => State::Unusual,
            },
            Some(_) => State::Unusual,
        },
        None => State::Unset,
        Some(_) => State::Unusual,
    })
}

/// `text` with the meter turned on, unless the user set it.
pub fn turn_on(text: &str, dialect: Dialect) -> Result<(String, Outcome), EditError> {
    let (bom, body) = split_bom(text);
    let doc = Doc::parse(body)?;
    let unchanged = |outcome| Ok((text.to_owned(), outcome));
    let Some(Value::Object(root)) = &doc.root else { return unchanged(Outcome::LeftAlone) };
    let nl = doc.newline();
    let unit = doc.unit(root);
    let (obj, item) = match root.get(AGENT).map(|p| &p.value) {
        None => {
            // A new `agent` object, written over lines like the rest of the file.
            let ind = doc.prop_indent(root, &unit);
            (root, format!("\"{AGENT}\": {{{nl}{ind}{unit}\"{SETTING}\": true{nl}{ind}}}"))
        }
        Some(Value::Object(agent)) => match agent.get(SETTING).map(|p| &p.value) {
            None => (agent, format!("\"{SETTING}\": true")),
            Some(Value::BooleanLit(b)) if b.value => return unchanged(Outcome::AlreadyOn),
            Some(Value::BooleanLit(_)) => return unchanged(Outcome::LeftOff),
            Some(_) => return unchanged(Outcome::LeftAlone),
        },
        Some(_) => return unchanged(Outcome::LeftAlone),
    };
    let ind = doc.prop_indent(obj, &unit);
    let item = format!("{MARKER}{nl}{ind}{item}");
    let insertion = doc.insert_props(obj, &[item], &ind, dialect);
    Ok((format!("{bom}{}", splice(body, insertion)), Outcome::Added))
}

/// `text` without the setting setup added (the one below its [`MARKER`]); whether there was one.
pub fn turn_off(text: &str, dialect: Dialect) -> Result<(String, bool), EditError> {
    let (bom, body) = split_bom(text);
    let doc = Doc::parse(body)?;
    let unchanged = Ok((text.to_owned(), false));
    let Some(Value::Object(root)) = &doc.root else { return unchanged };
    let Some(at) = root.properties.iter().position(|p| p.name.as_str() == AGENT) else {
        return unchanged;
    };
    let agent = &root.properties[at];
    let cuts = match (&agent.value, doc.marker_before(agent.range.start)) {
        // The `agent` object setup wrote, as it wrote it: it goes whole.
        (Value::Object(obj), Some(marker)) if is_only_the_setting(&doc, obj) => {
            doc.cuts_below(root, at, &marker, dialect)
        }
        // Setup wrote it, and the user added to it since: the setting and the comment go.
        (Value::Object(obj), Some(marker)) => {
            let Some(i) = setting_on(obj) else { return unchanged };
            let mut cuts = doc.cuts(obj, &[i], dialect);
            cuts.push(doc.lead_start(marker.start)..marker.end);
            cuts
        }
        (Value::Object(obj), None) => {
            let Some(i) = setting_on(obj) else { return unchanged };
            let Some(marker) = doc.marker_before(obj.properties[i].range.start) else {
                return unchanged;
            };
            doc.cuts_below(obj, i, &marker, dialect)
        }
        _ => return unchanged,
    };
    let out = splice(body, cuts.into_iter().map(|r| (r, String::new())).collect());
    Ok((format!("{bom}{out}"), true))
}

/// The index of the setting in `obj` when it is `true` (one the user turned to `false` since is
/// theirs now).
fn setting_on(obj: &Object) -> Option<usize> {
    obj.properties.iter().position(|p| {
        p.name.as_str() == SETTING && matches!(p.value, Value::BooleanLit(ref b) if b.value)
    })
}

/// Whether `obj` holds nothing but `"show_usage_status": true`.
fn is_only_the_setting(doc: &Doc<'_>, obj: &Object) -> bool {
    let inner = obj.range.start + 1..obj.range.end - 1;
    obj.properties.len() == 1
        && obj.properties[0].name.as_str() == SETTING
        && matches!(obj.properties[0].value, Value::BooleanLit(ref b) if b.value)
        && !doc.has_comment(inner)
}

impl Doc<'_> {
    /// The range of setup's [`MARKER`] comment when it is alone on the line right above `pos`.
    fn marker_before(&self, pos: usize) -> Option<std::ops::Range<usize>> {
        let i = self.tokens.partition_point(|(r, _)| r.start < pos);
        let (r, t) = self.tokens[..i].last()?;
        let between = &self.text[r.end..pos];
        let one_break = between.trim_matches([' ', '\t']);
        (*t == Tok::Comment
            && &self.text[r.clone()] == MARKER
            && self.starts_line(r.start)
            && (one_break == "\n" || one_break == "\r\n"))
            .then(|| r.clone())
    }

    /// The cuts that take property `i` of `obj` out with the comment above it.
    fn cuts_below(
        &self,
        obj: &Object,
        i: usize,
        marker: &std::ops::Range<usize>,
        dialect: Dialect,
    ) -> Vec<std::ops::Range<usize>> {
        let start = self.lead_start(obj.properties[i].range.start);
        let mut cuts = self.cuts(obj, &[i], dialect);
        if let Some(cut) = cuts.iter_mut().find(|c| c.start == start) {
            cut.start = self.lead_start(marker.start);
        }
        cuts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZED: Dialect = Dialect { entry_type: Some("custom"), trailing_commas: true };

    /// Turns the meter on in `original`: a second time changes nothing, `turn_off` restores it.
    fn round_trip(original: &str) -> String {
        let (on, outcome) = turn_on(original, ZED).unwrap();
        assert_eq!(outcome, Outcome::Added, "{original}");
        assert_eq!(state(&on).unwrap(), State::On, "{on}");
        assert_eq!(turn_on(&on, ZED).unwrap(), (on.clone(), Outcome::AlreadyOn));
        assert_eq!(turn_off(&on, ZED).unwrap(), (original.to_owned(), true), "from:\n{on}");
        on
    }

    #[test]
    fn a_new_agent_object_first_in_the_file_and_out_again() {
        let on = round_trip("{\n  \"theme\": \"One Dark\", // mine\n}\n");
        assert_eq!(
            on,
            format!(
                "{{\n  {MARKER}\n  \"agent\": {{\n    \"show_usage_status\": true\n  }},\n  \"theme\": \"One Dark\", // mine\n}}\n"
            )
        );
        round_trip("{}");
        round_trip("\u{feff}// settings\r\n{ // top\r\n\t\"a\": 1\r\n}\r\n");
    }

    #[test]
    fn the_setting_goes_into_the_users_agent_object() {
        let original = "{\n  \"agent\": {\n    \"default_width\": 640,\n  },\n}\n";
        let on = round_trip(original);
        assert_eq!(
            on,
            format!(
                "{{\n  \"agent\": {{\n    {MARKER}\n    \"show_usage_status\": true,\n    \"default_width\": 640,\n  }},\n}}\n"
            )
        );
        round_trip("{\"agent\": {}}");
        round_trip("{\n  \"agent\": {\n  },\n  \"x\": [1,\n 2]\n}");
    }

    #[test]
    fn the_users_own_setting_is_never_changed_or_removed() {
        let off = "{\"agent\": {\"show_usage_status\": false}}";
        assert_eq!(turn_on(off, ZED).unwrap(), (off.to_owned(), Outcome::LeftOff));
        assert_eq!(state(off).unwrap(), State::Off);
        let on = "{\n  \"agent\": {\n    \"show_usage_status\": true\n  }\n}";
        assert_eq!(turn_on(on, ZED).unwrap(), (on.to_owned(), Outcome::AlreadyOn));
        assert_eq!(turn_off(on, ZED).unwrap(), (on.to_owned(), false));
        for odd in ["{\"agent\": true}", "{\"agent\": {\"show_usage_status\": \"yes\"}}"] {
            assert_eq!(turn_on(odd, ZED).unwrap(), (odd.to_owned(), Outcome::LeftAlone));
            assert_eq!(state(odd).unwrap(), State::Unusual);
        }
        assert_eq!(state("// nothing yet\n").unwrap(), State::Unset);
        assert!(turn_on("{\"agent\": ", ZED).is_err());
    }

    #[test]
    fn an_agent_object_on_one_line_is_opened_for_the_setting() {
        // The case: the setting used to share a line with the user's key and `}`.
        let original = "{\n  \"agent\": { \"default_model\": {\"provider\": \"zed.dev\"} },\n}\n";
        let (on, outcome) = turn_on(original, ZED).unwrap();
        assert_eq!(outcome, Outcome::Added);
        assert_eq!(
            on,
            format!(
                "{{\n  \"agent\": {{\n    {MARKER}\n    \"show_usage_status\": true,\n    \
                 \"default_model\": {{\"provider\": \"zed.dev\"}}\n  }},\n}}\n"
            )
        );
        // Off again, the object stays open; from there the round trip is exact.
        let opened =
            "{\n  \"agent\": {\n    \"default_model\": {\"provider\": \"zed.dev\"}\n  },\n}\n";
        assert_eq!(turn_off(&on, ZED).unwrap(), (opened.to_owned(), true));
        assert_eq!(round_trip(opened), on);
    }

    #[test]
    fn what_the_user_added_to_setups_agent_object_stays() {
        let (on, _) = turn_on("{\n  \"a\": 1\n}\n", ZED).unwrap();
        let edited = on.replace(
            "\"show_usage_status\": true\n",
            "\"show_usage_status\": true,\n    \"default_width\": 640\n",
        );
        let (off, removed) = turn_off(&edited, ZED).unwrap();
        assert!(removed);
        assert_eq!(off, "{\n  \"agent\": {\n    \"default_width\": 640\n  },\n  \"a\": 1\n}\n");
        // Added on the setting's line, the user's key leaves no stray space behind.
        let same_line = on.replace(
            "\"show_usage_status\": true\n",
            "\"show_usage_status\": true, \"default_width\": 640\n",
        );
        let (off, _) = turn_off(&same_line, ZED).unwrap();
        assert_eq!(off, "{\n  \"agent\": {\n    \"default_width\": 640\n  },\n  \"a\": 1\n}\n");
        // Turned off by hand since: the user's now, left as it is.
        let flipped = on.replace("true", "false");
        assert_eq!(turn_off(&flipped, ZED).unwrap(), (flipped.clone(), false));
        assert_eq!(turn_on(&flipped, ZED).unwrap(), (flipped, Outcome::LeftOff));
    }
}
