//! One tool call's way through the rules: its caller (the HTTP request's `Authorization: Bearer`
//! key, or over stdio the key the process was started with) and the access layer's
//! [`access::Gate`] over the sealed store. Every tool names the [`RULES`](crate::access::RULES)
//! row of the GraphQL field it does the work of, as the REST routes do: one rule table for the
//! three APIs.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::args::SessionArgs;
use super::error::{ToolError, ToolResult};
use crate::access::{self, Access, Field, On, Principal, Services};
use crate::dialectic::Dialectic;
use crate::store::search_keys::SearchKeys;

/// Honcho's MCP header naming the workspace a connection works in, when a tool call names none.
pub const WORKSPACE_HEADER: &str = "x-honcho-workspace-id";

pub struct Gate {
    services: Services,
    gate: access::Gate,
    /// The workspace of calls that name none: the connection's header (or, over stdio,
    /// HONCHO_WORKSPACE_ID), else the key's own workspace.
    workspace: Option<String>,
}

impl Gate {
    /// The gate of a call whose key is `authorization` (`Bearer <key>`).
    pub fn new(
        services: &Services,
        authorization: Option<&str>,
        workspace: Option<String>,
    ) -> Self {
        let caller = services.authenticate(authorization);
        let workspace = workspace.or_else(|| match caller.principal() {
            Ok(
                Principal::Workspace(w)
                | Principal::Peer { workspace: w, .. }
                | Principal::Session { workspace: w, .. }
                | Principal::Scope { workspace: w, .. },
            ) => Some(w),
            _ => None,
        });
        Gate {
            services: services.clone(),
            gate: services.gate(caller),
            workspace,
        }
    }

    /// The gate of an HTTP request's call.
    pub fn from_headers(services: &Services, headers: &HeaderMap) -> Self {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let workspace = text(WORKSPACE_HEADER)
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(str::to_owned);
        Gate::new(services, text(AUTHORIZATION.as_str()), workspace)
    }

    /// Checks `field`'s rule (a `RULES` row, `rule!(Type.field)`) on `on`.
    pub async fn require(&self, field: Field, on: On<'_>) -> ToolResult<Access<'_>> {
        Ok(self.gate.require(field, on).await?)
    }

    /// The workspace a session tool works in, and `field`'s rule checked on the session it names.
    pub async fn session(&self, field: Field, a: &SessionArgs) -> ToolResult<(String, Access<'_>)> {
        let ws = self.workspace(a.ws.workspace_id.as_deref())?;
        let access = self.require(field, On::session(&ws, &a.session_id)).await?;
        Ok((ws, access))
    }

    /// The caller's principal (after [`Gate::require`] passed, for what the store decides by key).
    pub fn principal(&self) -> ToolResult<Principal> {
        Ok(self.gate.principal()?)
    }

    /// What the caller's message searches of `workspace` may rank by.
    pub async fn search_keys(&self, workspace: &str) -> SearchKeys {
        self.gate.search_keys(workspace).await
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
        self.services.dialectic()
    }
}
