//! `DateTime`: RFC 3339 in, RFC 3339 in UTC with a `Z` suffix out (as Honcho v3.0.12 renders times).

use async_graphql::{InputValueError, InputValueResult, Scalar, ScalarType, Value};
use chrono::{SecondsFormat, Utc};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateTime(pub chrono::DateTime<Utc>);

/// A date and time, RFC 3339 (e.g. `2026-03-25T10:00:00Z`); returned in UTC.
#[Scalar(name = "DateTime")]
impl ScalarType for DateTime {
    fn parse(value: Value) -> InputValueResult<Self> {
        match &value {
            Value::String(s) => chrono::DateTime::parse_from_rfc3339(s.trim())
                .map(|t| DateTime(t.with_timezone(&Utc)))
                .map_err(|e| InputValueError::custom(format!("not an RFC 3339 date-time: {e}"))),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> Value {
        Value::String(self.0.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    }
}

impl From<chrono::DateTime<Utc>> for DateTime {
    fn from(t: chrono::DateTime<Utc>) -> Self {
        DateTime(t)
    }
}
