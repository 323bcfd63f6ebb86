//! PLACEHOLDER until the filter DSL lands: accepts only an empty filter.
use sea_orm::sea_query::Condition;
use serde_json::Value;

#[derive(Debug, Clone, Copy)]
pub enum Resource {
    Workspace,
    Peer,
    Session,
    Message,
    Conclusion,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct FilterError {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct Filter;

pub fn parse(_resource: Resource, json: &Value) -> Result<Filter, FilterError> {
    match json {
        Value::Null => Ok(Filter),
        Value::Object(m) if m.is_empty() => Ok(Filter),
        _ => Err(FilterError {
            path: "filters".into(),
            reason: "not supported yet".into(),
        }),
    }
}

impl Filter {
    pub fn condition(&self, _table: &str) -> Condition {
        Condition::all()
    }
    pub fn is_empty(&self) -> bool {
        true
    }
}
