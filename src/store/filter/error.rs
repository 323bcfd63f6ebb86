//! Filter errors: what is wrong and where (the key path inside `filters`).

use serde_json::Value;

/// A rejected filter. `Display` gives `path: reason`, e.g.
/// `filters.AND[1].seqInSession.gte: expected an integer, got "abc"`; the message is meant for
/// the client (a BAD_USER_INPUT error) and never contains SQL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {kind}")]
pub struct FilterError {
    /// Where in the filter JSON, starting at `filters`: `filters.AND[1].seqInSession.gte`.
    pub path: String,
    pub kind: FilterErrorKind,
}

/// Why a filter was rejected. Keys and operators in messages are JSON-quoted (`"foo"`), so odd
/// characters stay visible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterErrorKind {
    #[error("a filter must be a JSON object, got {got}")]
    NotAnObject { got: String },
    #[error("{op} takes a list of filter objects, got {got}")]
    NotAList { op: &'static str, got: String },
    #[error("filter nesting exceeds maximum depth of {max}")]
    TooDeep { max: usize },
    #[error("filter too large: more than {max} values")]
    TooLarge { max: usize },
    #[error("a string in a filter may be at most {max} characters long (got {got})")]
    ValueTooLong { max: usize, got: usize },
    #[error(
        "unknown filter key {key}; allowed keys: {allowed} (snake_case spellings are accepted too)"
    )]
    UnknownKey { key: String, allowed: String },
    #[error(
        "unknown operator {op}; operators are eq, gt, gte, lt, lte, ne, in, contains, icontains"
    )]
    UnknownOperator { op: String },
    #[error("an operator object cannot also hold the non-operator key {key}")]
    MixedOperators { key: String },
    #[error(
        "an operator object needs at least one operator (eq, gt, gte, lt, lte, ne, in, contains, icontains)"
    )]
    EmptyOperators,
    #[error("operator {op} is not supported on {on}")]
    UnsupportedOperator { op: &'static str, on: &'static str },
    #[error("null is only accepted with ne (meaning IS NOT NULL)")]
    NullOperand,
    #[error("text cannot contain NUL (\\u0000) characters")]
    NulCharacter,
    #[error("expected {expected}, got {got}")]
    InvalidValue { expected: &'static str, got: String },
    #[error(
        "invalid datetime {got}: expected RFC 3339 (\"2024-01-01T12:00:00Z\") or a date (\"2024-01-01\")"
    )]
    InvalidDatetime { got: String },
    #[error("unknown level {got}; levels are explicit, deductive, inductive, contradiction")]
    UnknownLevel { got: String },
    #[error(
        "on the whole metadata value only contains (with an object or a list), eq: null and ne: null are supported; \
         to compare a key use {{\"metadata\": {{\"key\": {{\"{op}\": ...}}}}}}"
    )]
    WholeMetadataOperator { op: &'static str },
}

impl FilterError {
    /// The limit this error is about, named for clients (`extensions.limit`), and its value.
    pub fn limit(&self) -> Option<(&'static str, usize)> {
        match self.kind {
            FilterErrorKind::TooDeep { max } => Some(("filterDepth", max)),
            FilterErrorKind::TooLarge { max } => Some(("filterValues", max)),
            FilterErrorKind::ValueTooLong { max, .. } => Some(("filterValueChars", max)),
            _ => None,
        }
    }

    pub(crate) fn new(path: &str, kind: FilterErrorKind) -> Self {
        FilterError {
            path: path.to_owned(),
            kind,
        }
    }
}

/// A JSON value shown in an error: compact, and cut short when long.
pub(crate) fn show(v: &Value) -> String {
    const MAX: usize = 80;
    let s = v.to_string();
    if s.chars().count() <= MAX {
        s
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// `path.key`, or `path["odd key"]` when the key is not a plain identifier.
pub(crate) fn key_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::String(key.to_owned()))
    }
}

/// `path[i]`.
pub(crate) fn index_path(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn display_names_the_path() {
        let e = FilterError::new(
            "filters.AND[1].seqInSession.gte",
            FilterErrorKind::InvalidValue {
                expected: "an integer",
                got: show(&json!("abc")),
            },
        );
        assert_eq!(
            e.to_string(),
            r#"filters.AND[1].seqInSession.gte: expected an integer, got "abc""#
        );
    }

    #[test]
    fn odd_keys_are_quoted() {
        assert_eq!(key_path("filters", "peerId"), "filters.peerId");
        assert_eq!(
            key_path("filters.metadata", "a b.c"),
            r#"filters.metadata["a b.c"]"#
        );
        assert_eq!(key_path("filters.metadata", ""), r#"filters.metadata[""]"#);
        assert_eq!(index_path("filters.OR", 3), "filters.OR[3]");
    }

    #[test]
    fn long_values_are_cut() {
        let long = json!("é".repeat(200));
        let s = show(&long);
        assert_eq!(s.chars().count(), 81);
        assert!(s.ends_with('…'));
    }
}
