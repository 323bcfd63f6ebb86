//! A refused or failed tool call: the access layer's stable code (GraphQL's `extensions.code`)
//! and its message,
//! answered as an MCP tool error (`isError: true`) that the agent can read and act on.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

use crate::access::{AccessError, Code, Failure};
use crate::dialectic::DialecticError;
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

impl From<Failure> for ToolError {
    fn from(f: Failure) -> Self {
        ToolError::new(f.code, f.message)
    }
}

impl From<AccessError> for ToolError {
    fn from(e: AccessError) -> Self {
        Failure::from(e).into()
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> Self {
        Failure::from(e).into()
    }
}

impl From<DialecticError> for ToolError {
    fn from(e: DialecticError) -> Self {
        Failure::from(e).into()
    }
}
