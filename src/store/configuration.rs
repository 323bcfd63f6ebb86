//! The settings that turn the deriver's work on and off, resolved in one place: the server's
//! defaults, then the workspace's `configuration`, then the session's, then (for `reasoning`
//! only) the message's, each level overriding the fields it sets (Honcho v3.0.12's
//! `WorkspaceConfiguration`, `SessionConfiguration` and `MessageConfiguration`):
//!
//! ```json
//! {"reasoning": {"enabled": true, "custom_instructions": "..."},
//!  "peer_card": {"use": true, "create": true},
//!  "summary": {"enabled": true, "messages_per_short_summary": 20, "messages_per_long_summary": 60},
//!  "dream": {"enabled": true}}
//! ```
//!
//! A field that is absent or null leaves the level below in force. Other keys are kept as they
//! are and ignored. The legacy `deriver.enabled` and `skip_deriver: true` of older Honcho clients
//! are read as `reasoning.enabled` when `reasoning.enabled` is not set.

use serde_json::Value;

use super::{StoreError, StoreResult, stmt};
use sea_orm::ConnectionTrait;

/// The smallest message counts of a summary's period (Honcho v3.0.12's bounds).
pub const MIN_MESSAGES_PER_SHORT_SUMMARY: i64 = 10;
pub const MIN_MESSAGES_PER_LONG_SUMMARY: i64 = 20;
/// The largest message count of either period: larger would let a session's first summary
/// wait for thousands of messages.
pub const MAX_MESSAGES_PER_SUMMARY: i64 = 1000;
/// Longest `custom_instructions` (tokens, as Honcho v3.0.12 counts them).
pub const MAX_CUSTOM_INSTRUCTIONS_TOKENS: i32 = 2000;

/// The server's settings, below every workspace's (the deriver's flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    pub reasoning: bool,
    pub peer_card: bool,
    pub summary: bool,
    pub messages_per_short_summary: i64,
    pub messages_per_long_summary: i64,
    pub dream: bool,
}

impl Default for Defaults {
    /// Honcho v3.0.12's: everything on, summaries every 20 and 60 messages.
    fn default() -> Self {
        Defaults {
            reasoning: true,
            peer_card: true,
            summary: true,
            messages_per_short_summary: 20,
            messages_per_long_summary: 60,
            dream: true,
        }
    }
}

/// The settings in force for one message, or for a session's work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Messages are queued for the deriver's conclusions (and its cards).
    pub reasoning: bool,
    /// Added to the deriver's instructions.
    pub custom_instructions: Option<String>,
    /// The deriver shows the current card to the model.
    pub peer_card_use: bool,
    /// The deriver writes card entries. Off whenever reasoning is.
    pub peer_card_create: bool,
    pub summary: bool,
    pub messages_per_short_summary: i64,
    pub messages_per_long_summary: i64,
    /// Off whenever reasoning is.
    pub dream: bool,
}

impl Resolved {
    /// `defaults` overridden by each level of `layers` in turn (workspace, then session). A
    /// message's configuration is applied with [`Resolved::for_message`].
    pub fn resolve(defaults: &Defaults, layers: &[&Value]) -> Resolved {
        let mut r = Resolved {
            reasoning: defaults.reasoning,
            custom_instructions: None,
            peer_card_use: defaults.peer_card,
            peer_card_create: defaults.peer_card,
            summary: defaults.summary,
            messages_per_short_summary: defaults.messages_per_short_summary,
            messages_per_long_summary: defaults.messages_per_long_summary,
            dream: defaults.dream,
        };
        for layer in layers {
            r.apply_reasoning(layer);
            let card = &layer["peer_card"];
            set_bool(&mut r.peer_card_use, &card["use"]);
            set_bool(&mut r.peer_card_create, &card["create"]);
            let summary = &layer["summary"];
            set_bool(&mut r.summary, &summary["enabled"]);
            set_int(
                &mut r.messages_per_short_summary,
                &summary["messages_per_short_summary"],
            );
            set_int(
                &mut r.messages_per_long_summary,
                &summary["messages_per_long_summary"],
            );
            set_bool(&mut r.dream, &layer["dream"]["enabled"]);
        }
        r.settle()
    }

    /// These settings with a message's configuration over them: only its `reasoning` counts
    /// (as Honcho v3.0.12's `MessageConfiguration` has only that).
    pub fn for_message(&self, message: Option<&Value>) -> Resolved {
        let mut r = self.clone();
        if let Some(m) = message {
            r.apply_reasoning(m);
        }
        r.settle()
    }

    fn apply_reasoning(&mut self, layer: &Value) {
        let reasoning = &layer["reasoning"];
        match reasoning["enabled"].as_bool() {
            Some(on) => self.reasoning = on,
            None => {
                if let Some(on) = layer["deriver"]["enabled"].as_bool() {
                    self.reasoning = on;
                } else if layer["skip_deriver"].as_bool() == Some(true) {
                    self.reasoning = false;
                }
            }
        }
        if let Some(text) = reasoning["custom_instructions"].as_str() {
            self.custom_instructions = (!text.trim().is_empty()).then(|| text.to_owned());
        }
    }

    /// What depends on reasoning follows it.
    fn settle(mut self) -> Resolved {
        if !self.reasoning {
            self.peer_card_create = false;
            self.dream = false;
        }
        self
    }
}

fn set_bool(field: &mut bool, v: &Value) {
    if let Some(b) = v.as_bool() {
        *field = b;
    }
}

fn set_int(field: &mut i64, v: &Value) {
    if let Some(n) = v.as_i64() {
        *field = n;
    }
}

/// Refuses a workspace's or session's configuration whose known sections have values of the
/// wrong type or out of bounds; other keys are free.
pub fn check(config: Option<&Value>) -> StoreResult<()> {
    let Some(config) = config else {
        return Ok(());
    };
    let section = |name: &str| -> StoreResult<Option<&serde_json::Map<String, Value>>> {
        match config.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(StoreError::invalid(format!(
                "configuration.{name} must be an object"
            ))),
        }
    };
    let boolean = |m: &serde_json::Map<String, Value>, s: &str, k: &str| -> StoreResult<()> {
        match m.get(k) {
            None | Some(Value::Null | Value::Bool(_)) => Ok(()),
            Some(_) => Err(StoreError::invalid(format!(
                "configuration.{s}.{k} must be true, false or null"
            ))),
        }
    };
    if let Some(m) = section("reasoning")? {
        boolean(m, "reasoning", "enabled")?;
        custom_instructions(m.get("custom_instructions"))?;
    }
    if let Some(m) = section("peer_card")? {
        boolean(m, "peer_card", "use")?;
        boolean(m, "peer_card", "create")?;
    }
    if let Some(m) = section("dream")? {
        boolean(m, "dream", "enabled")?;
    }
    if let Some(m) = section("summary")? {
        boolean(m, "summary", "enabled")?;
        let count = |k: &str, min: i64| -> StoreResult<Option<i64>> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_i64() {
                    Some(n) if (min..=MAX_MESSAGES_PER_SUMMARY).contains(&n) => Ok(Some(n)),
                    _ => Err(StoreError::invalid(format!(
                        "configuration.summary.{k} must be an integer from {min} to \
                         {MAX_MESSAGES_PER_SUMMARY}"
                    ))),
                },
            }
        };
        let short = count("messages_per_short_summary", MIN_MESSAGES_PER_SHORT_SUMMARY)?;
        let long = count("messages_per_long_summary", MIN_MESSAGES_PER_LONG_SUMMARY)?;
        if let (Some(s), Some(l)) = (short, long)
            && s >= l
        {
            return Err(StoreError::invalid(
                "configuration.summary.messages_per_short_summary must be less than \
                 messages_per_long_summary",
            ));
        }
    }
    Ok(())
}

/// A message's configuration: only `reasoning` is read, and checked as a workspace's is.
pub fn check_message(index: usize, config: Option<&Value>) -> StoreResult<()> {
    let Some(config) = config else {
        return Ok(());
    };
    if !config.is_object() {
        return Err(StoreError::invalid(format!(
            "messages[{index}].configuration must be a JSON object"
        )));
    }
    let reasoning = serde_json::json!({"reasoning": config.get("reasoning")});
    check(Some(&reasoning)).map_err(|e| match e {
        StoreError::InvalidInput(m) => StoreError::invalid(format!("messages[{index}].{m}")),
        other => other,
    })
}

fn custom_instructions(v: Option<&Value>) -> StoreResult<()> {
    match v {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) => {
            let n = super::tokens::count(s);
            if n > MAX_CUSTOM_INSTRUCTIONS_TOKENS {
                return Err(StoreError::invalid(format!(
                    "configuration.reasoning.custom_instructions is {n} tokens; the limit is \
                     {MAX_CUSTOM_INSTRUCTIONS_TOKENS}"
                )));
            }
            Ok(())
        }
        Some(_) => Err(StoreError::invalid(
            "configuration.reasoning.custom_instructions must be a string or null",
        )),
    }
}

/// The workspace's and the session's configurations (`{}` for what does not exist).
pub(crate) async fn layers<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
) -> StoreResult<(Value, Value)> {
    let row = db
        .query_one_raw(stmt(
            "SELECT (SELECT configuration FROM workspaces WHERE name = $1) AS w, \
                    (SELECT configuration FROM sessions \
                     WHERE workspace_name = $1 AND name = $2) AS s",
            [workspace.into(), session.into()],
        ))
        .await?;
    let get = |col: &str| -> StoreResult<Value> {
        Ok(row
            .as_ref()
            .map(|r| r.try_get::<Option<Value>>("", col))
            .transpose()?
            .flatten()
            .unwrap_or(Value::Null))
    };
    Ok((get("w")?, get("s")?))
}

impl super::Store {
    /// The settings in force for the session's work (workspace, then session, over the
    /// server's defaults).
    pub async fn resolved_configuration(
        &self,
        workspace: &str,
        session: &str,
    ) -> StoreResult<Resolved> {
        let (w, s) = layers(self.db(), workspace, session).await?;
        Ok(Resolved::resolve(&self.configuration_defaults(), &[&w, &s]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(w: Value, s: Value) -> Resolved {
        Resolved::resolve(&Defaults::default(), &[&w, &s])
    }

    #[test]
    fn each_level_overrides_the_fields_it_sets() {
        let r = resolve(
            json!({"summary": {"enabled": false, "messages_per_short_summary": 12}}),
            json!({"summary": {"enabled": true}, "peer_card": {"create": false}}),
        );
        assert!(r.summary);
        assert_eq!(r.messages_per_short_summary, 12);
        assert_eq!(r.messages_per_long_summary, 60);
        assert!(r.peer_card_use && !r.peer_card_create);
        let m = r.for_message(Some(&json!({"reasoning": {"enabled": false}})));
        assert!(!m.reasoning && !m.peer_card_create && !m.dream);
        assert!(r.for_message(None).reasoning);
    }

    #[test]
    fn nulls_and_absent_fields_leave_the_level_below() {
        let r = resolve(
            json!({"reasoning": {"enabled": false}}),
            json!({"reasoning": {"enabled": null}, "summary": null}),
        );
        assert!(!r.reasoning);
        assert!(r.summary);
    }

    #[test]
    fn legacy_deriver_keys_are_read_as_reasoning() {
        assert!(!resolve(json!({"deriver": {"enabled": false}}), json!({})).reasoning);
        assert!(!resolve(json!({}), json!({"skip_deriver": true})).reasoning);
        let explicit = json!({"skip_deriver": true, "reasoning": {"enabled": true}});
        assert!(resolve(json!({}), explicit).reasoning);
    }

    #[test]
    fn bad_sections_are_refused_with_the_field_named() {
        let bad = [
            json!({"summary": {"messages_per_short_summary": 5}}),
            json!({"summary": {"messages_per_long_summary": 10}}),
            json!({"summary": {"messages_per_short_summary": 30, "messages_per_long_summary": 30}}),
            json!({"summary": {"enabled": "yes"}}),
            json!({"peer_card": true}),
            json!({"reasoning": {"custom_instructions": 3}}),
        ];
        for b in bad {
            let e = check(Some(&b)).unwrap_err();
            assert!(e.to_string().contains("configuration."), "{e}");
        }
        let good = json!({"summary": {"messages_per_short_summary": 10,
            "messages_per_long_summary": 20}, "anything": {"else": 1}, "reasoning": null});
        check(Some(&good)).unwrap();
    }
}
