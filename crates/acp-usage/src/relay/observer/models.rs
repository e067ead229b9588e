//! Which model a session runs: the selected option resolved through the agent's profile, and the
//! windows the agent reports per model.

use super::*;

impl Observer {
    /// Reads the selected model from `configOptions` (category `model`) or legacy
    /// `models.currentModelId`; true when it changed.
    pub(super) fn read_models(&mut self, id: &str, v: &Value) -> bool {
        let option = v.get("configOptions").and_then(Value::as_array).and_then(|opts| {
            // The option named `model` first: cline also files its provider under the `model`
            // category.
            let named = |o: &&Value| o.get("id").and_then(Value::as_str) == Some("model");
            let model_category =
                |o: &&Value| o.get("category").and_then(Value::as_str) == Some("model");
            opts.iter().find(named).or_else(|| opts.iter().find(model_category))
        });
        let from_options = option.and_then(|o| o.get("currentValue")).and_then(Value::as_str);
        let legacy = v.pointer("/models/currentModelId").and_then(Value::as_str);
        let windows = self.profile.reported_windows(v);
        if !windows.is_empty() {
            self.session(id, Account::restored).model_windows.extend(windows);
        }
        match (from_options, legacy) {
            (Some(model), _) => {
                let (model, option) = (model.to_string(), option.cloned());
                self.select_model_from(id, &model, option.as_ref())
            }
            (None, Some(model)) => {
                let model = model.to_string();
                self.select_model(id, &model)
            }
            (None, None) => false,
        }
    }

    pub(super) fn select_model(&mut self, id: &str, value: &str) -> bool {
        self.select_model_from(id, value, None)
    }

    /// Selects `value`, read from `option` (the model option with its list of entries) when
    /// the agent sent one.
    pub(super) fn select_model_from(
        &mut self,
        id: &str,
        value: &str,
        option: Option<&Value>,
    ) -> bool {
        let (model, window) = match option {
            Some(option) => self.profile.resolve_option(value, option),
            None => self.profile.resolve_model(value),
        };
        let s = self.session(id, Account::restored);
        if s.model_value.as_deref() == Some(value) {
            return false;
        }
        tracing::debug!(session = id, value, ?model, ?window, "model selected");
        s.model_value = Some(value.to_string());
        s.family = None;
        s.account.select_model(model, window);
        if let Some(&reported) = s.model_windows.get(value) {
            s.account.reported_window(reported);
        }
        true
    }
}
