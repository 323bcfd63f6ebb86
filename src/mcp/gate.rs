//! One tool call's way through the rules: its caller (the HTTP request's `Authorization: Bearer`
//! key, or over stdio the key the process was started with) and its loader, over the schema's
//! sealed store. Every tool names the [`RULES`](crate::graphql::guard::RULES) row of the GraphQL
//! field it does the work of, as the REST routes do: one rule table for the three APIs.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::error::{ToolError, ToolResult};
use crate::auth::{Caller, Principal};
use crate::dialectic::Dialectic;
use crate::graphql::error::Code;
use crate::graphql::guard::{self, Access, Field, On, Sealed};
use crate::graphql::{AppSchema, RequestLoader};
use crate::store::Store;

/// Honcho's MCP header naming the workspace a connection works in, when a tool call names none.
pub const WORKSPACE_HEADER: &str = "x-honcho-workspace-id";

pub struct Gate {
    schema: AppSchema,
    caller: Caller,
    loader: Sealed<RequestLoader>,
    /// The workspace of calls that name none: the connection's header (or, over stdio,
    /// HONCHO_WORKSPACE_ID), else the key's own workspace.
    workspace: Option<String>,
}

impl Gate {
    /// The gate of a call whose key is `authorization` (`Bearer <key>`).
    pub fn new(schema: &AppSchema, authorization: Option<&str>, workspace: Option<String>) -> Self {
        let store = schema
            .data::<Sealed<Store>>()
            .expect("the schema holds the store");
        let caller = crate::graphql::authenticate(schema, authorization);
        let workspace = workspace.or_else(|| match caller.principal() {
            Ok(
                Principal::Workspace(w)
                | Principal::Peer { workspace: w, .. }
                | Principal::Session { workspace: w, .. },
            ) => Some(w),
            _ => None,
        });
        Gate {
            schema: schema.clone(),
            caller,
            loader: guard::request_loader(store),
            workspace,
        }
    }

    /// The gate of an HTTP request's call.
    pub fn from_headers(schema: &AppSchema, headers: &HeaderMap) -> Self {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let workspace = text(WORKSPACE_HEADER)
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(str::to_owned);
        Gate::new(schema, text(AUTHORIZATION.as_str()), workspace)
    }

    /// Checks `field`'s rule (a `RULES` row, `rule!(Type.field)`) on `on`.
    pub async fn require(&self, field: Field, on: On<'_>) -> ToolResult<Access<'_>> {
        let store = self
            .schema
            .data::<Sealed<Store>>()
            .ok_or_else(|| ToolError::new(Code::Internal, "no store"))?;
        Ok(guard::require_route(store, &self.loader, &self.caller, field, on).await?)
    }

    /// The caller's principal (after [`Gate::require`] passed, for what the store decides by key).
    pub fn principal(&self) -> ToolResult<Principal> {
        self.caller
            .principal()
            .map_err(|e| ToolError::new(Code::Unauthenticated, e.to_string()))
    }

    /// The workspace a call works in: the one it names, else the connection's.
    pub fn workspace(&self, named: Option<&str>) -> ToolResult<String> {
        named
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .or_else(|| self.workspace.clone())
            .ok_or_else(|| {
                ToolError::invalid(
                    "workspace_id is missing: pass it, or set the X-Honcho-Workspace-ID header \
                     on the connection (a scoped key works in its own workspace)",
                )
            })
    }

    /// The dialectic, when an LLM is configured.
    pub fn dialectic(&self) -> Option<&Dialectic> {
        self.schema.data::<Dialectic>()
    }
}
