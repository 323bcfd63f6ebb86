//! Input rules shared by every write (names, metadata, content). Violations are user errors, raised before any
//! statement runs.

use serde_json::{Map, Value};

use super::error::{StoreError, StoreResult};

pub const MAX_NAME_LEN: usize = 512;
pub const MAX_METADATA_KEYS: usize = 100;
pub const MAX_METADATA_DEPTH: usize = 5;
pub const MAX_MESSAGE_CHARS: usize = 25_000;
pub const MAX_CONCLUSION_CHARS: usize = 65_535;
pub const MAX_BATCH: usize = 100;

/// Workspace, peer and session ids: 1..512 chars of `[A-Za-z0-9_-]`.
pub fn name(kind: &str, value: &str) -> StoreResult<()> {
    let len = value.chars().count();
    if len == 0 || len > MAX_NAME_LEN {
        return Err(StoreError::invalid(format!(
            "{kind} id must be 1 to {MAX_NAME_LEN} characters long (got {len})"
        )));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(StoreError::invalid(format!(
            "{kind} id {value:?} may only contain letters, digits, '_' and '-'"
        )));
    }
    Ok(())
}

/// A metadata object: at most 100 top-level keys, objects nested at most 5 deep, NUL bytes removed
/// from every string and key. Returns the sanitised value.
pub fn metadata(field: &str, value: Value) -> StoreResult<Value> {
    let Value::Object(map) = value else {
        return Err(StoreError::invalid(format!(
            "{field} must be a JSON object"
        )));
    };
    if map.len() > MAX_METADATA_KEYS {
        return Err(StoreError::invalid(format!(
            "{field} may have at most {MAX_METADATA_KEYS} top-level keys (got {})",
            map.len()
        )));
    }
    if object_depth(&map) > MAX_METADATA_DEPTH {
        return Err(StoreError::invalid(format!(
            "{field} may nest objects at most {MAX_METADATA_DEPTH} levels deep"
        )));
    }
    Ok(strip_nul(Value::Object(map)))
}

/// The optional metadata and configuration of a create or update, each checked when given.
pub fn attributes(
    meta: Option<Value>,
    config: Option<Value>,
) -> StoreResult<(Option<Value>, Option<Value>)> {
    Ok((
        optional_metadata(meta)?,
        config
            .map(|c| configuration("configuration", c))
            .transpose()?,
    ))
}

/// [`metadata`] of a field named `metadata`, when given.
pub fn optional_metadata(value: Option<Value>) -> StoreResult<Option<Value>> {
    value.map(|m| metadata("metadata", m)).transpose()
}

/// A free-form configuration object (workspace, peer, session).
pub fn configuration(field: &str, value: Value) -> StoreResult<Value> {
    match value {
        Value::Object(map) => Ok(strip_nul(Value::Object(map))),
        _ => Err(StoreError::invalid(format!(
            "{field} must be a JSON object"
        ))),
    }
}

/// Message content: at most 25,000 characters, checked before NUL bytes are stripped (as Honcho v3.0.12).
pub fn message_content(index: usize, content: &str) -> StoreResult<String> {
    let len = content.chars().count();
    if len > MAX_MESSAGE_CHARS {
        return Err(StoreError::invalid(format!(
            "messages[{index}].content is {len} characters; the limit is {MAX_MESSAGE_CHARS}"
        )));
    }
    Ok(content.replace('\0', ""))
}

pub fn batch_len(field: &str, len: usize) -> StoreResult<()> {
    if len == 0 || len > MAX_BATCH {
        return Err(StoreError::invalid(format!(
            "{field} must hold 1 to {MAX_BATCH} items (got {len})"
        )));
    }
    Ok(())
}

/// Depth counting only objects, top level = 1 (Honcho v3.0.12 does not descend into lists).
fn object_depth(map: &Map<String, Value>) -> usize {
    1 + map
        .values()
        .filter_map(|v| v.as_object().map(object_depth))
        .max()
        .unwrap_or(0)
}

fn strip_nul(value: Value) -> Value {
    match value {
        Value::String(s) if s.contains('\0') => Value::String(s.replace('\0', "")),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nul).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.replace('\0', ""), strip_nul(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_honchos_pattern() {
        assert!(name("peer", "alice_01-x").is_ok());
        assert!(name("peer", "").is_err());
        assert!(name("peer", "has space").is_err());
        assert!(name("peer", &"a".repeat(513)).is_err());
        assert!(name("peer", &"a".repeat(512)).is_ok());
    }

    #[test]
    fn metadata_limits_keys_depth_and_strips_nul() {
        let many: Map<String, Value> = (0..101).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(metadata("metadata", Value::Object(many)).is_err());
        let deep = json!({"a":{"b":{"c":{"d":{"e":1}}}}});
        assert!(metadata("metadata", deep).is_ok());
        let too_deep = json!({"a":{"b":{"c":{"d":{"e":{"f":1}}}}}});
        assert!(metadata("metadata", too_deep).is_err());
        let lists_are_not_counted = json!({"a":[{"b":{"c":{"d":{"e":{"f":1}}}}}]});
        assert!(metadata("metadata", lists_are_not_counted).is_ok());
        let cleaned = metadata("metadata", json!({"k\u{0}": ["x\u{0}y"]})).unwrap();
        assert_eq!(cleaned, json!({"k": ["xy"]}));
        assert!(metadata("metadata", json!([1])).is_err());
    }

    #[test]
    fn content_length_is_checked_before_nul_stripping() {
        assert!(message_content(0, &"a".repeat(25_000)).is_ok());
        assert!(message_content(0, &format!("{}\0", "a".repeat(25_000))).is_err());
        assert_eq!(message_content(0, "a\0b").unwrap(), "ab");
    }
}
