//! A refused or failed tool call: GraphQL's stable code (`extensions.code`) and its message,
//! answered as an MCP tool error (`isError: true`) that the agent can read and act on.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

use crate::dialectic::DialecticError;
use crate::graphql::error::{ApiError, Code};
use crate::store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// GraphQL's `extensions.code`: FORBIDDEN, NOT_FOUND, BAD_USER_INPUT, ...
    pub code: String,
    pub message: String,
}

pub type ToolResult<T> = Result<T, ToolError>;

impl ToolError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ToolError {
            code: code.as_str().to_owned(),
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError::new(Code::BadUserInput, message)
    }

    /// The tool result an MCP client shows the agent: the code and message as text, and as
    /// structured content `{"code", "message"}`.
    pub fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.to_string())]);
        result.structured_content = Some(json!({"code": self.code, "message": self.message}));
        result
    }
}

impl From<ApiError> for ToolError {
    fn from(e: ApiError) -> Self {
        let code =
            e.0.extensions
                .as_ref()
                .and_then(|x| match x.get("code") {
                    Some(async_graphql::Value::String(code)) => Some(code.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| Code::Internal.as_str().to_owned());
        ToolError {
            code,
            message: e.0.message,
        }
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<DialecticError> for ToolError {
    fn from(e: DialecticError) -> Self {
        ApiError::from(e).into()
    }
}
