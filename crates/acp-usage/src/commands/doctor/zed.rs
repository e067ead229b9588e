//! Zed's plan-usage meter: whether the Zed settings here turn on `agent.show_usage_status`, the
//! only way Zed shows the 5-hour and 7-day limits acp-usage sends (off by default).

use std::ffi::OsString;

use super::{Finding, Inputs, Status};
use crate::agents::zed_registry;
use crate::commands::setup::edit::meter::{self, State};

/// The fix, for `path`.
fn fix(path: &std::path::Path) -> String {
    format!(
        "`acp-usage setup zed` turns it on (or add \"agent\": {{\"show_usage_status\": true}} to {})",
        path.display()
    )
}

/// The meter's finding; none when there is no Zed settings file (Zed not used here).
pub(super) fn meter(inputs: &Inputs) -> Option<Finding> {
    let vars = |name: &str| (inputs.env)(name).map(OsString::from);
    let path = zed_registry::settings_file(&vars)?;
    let text = (inputs.read_file)(&path)?;
    let (status, message) = match meter::state(&text) {
        Ok(State::On) => (
            Status::Ok,
            "Zed's plan-usage meter is on (agent.show_usage_status): it shows the 5-hour and \
             7-day limits acp-usage sends"
                .to_owned(),
        ),
        Ok(State::Unset) => (
            Status::Info,
            format!(
                "Zed's plan-usage meter is off (agent.show_usage_status is not set; Zed's \
                 default is off), so Zed shows no 5-hour or 7-day limit: {}",
                fix(&path)
            ),
        ),
        Ok(State::Off) => (
            Status::Info,
            format!(
                "Zed's plan-usage meter is off: {} sets agent.show_usage_status to false; set it \
                 to true to see the 5-hour and 7-day limits acp-usage sends",
                path.display()
            ),
        ),
        Ok(State::Unusual) => (
            Status::Info,
            format!(
                "Zed's plan-usage meter: agent.show_usage_status is not true or false: {}",
                fix(&path)
            ),
        ),
        Err(e) => (
            Status::Info,
            format!("Zed's settings do not parse ({e}); Zed's plan-usage meter cannot be checked"),
        ),
    };
    Some(Finding::new(None, "zed", status, message).at(path))
}
