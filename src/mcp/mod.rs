//! The Model Context Protocol server (docs/mcp.md): agents reach this memory through MCP tools,
//! resources and a prompt, on the same store, keys and rule table as `/graphql` and `/v3`.
//!
//! - **Streamable HTTP at `/mcp`**, merged into the server's router, so it sits behind the same
//!   layers as `/graphql` (body limit, timeout, CORS, request ids, tracing). Stateless: every
//!   request carries its key and, from revision 2026-07-28 on, its protocol version, so any
//!   instance answers any request. Without a valid key (auth on) the request is refused 401 with
//!   `WWW-Authenticate` naming the protected-resource metadata (RFC 9728).
//! - **stdio** (`honcho-graphql mcp`, [`stdio`]), the key from `HONCHO_API_KEY`.
//!
//! A tool names the `RULES` row of the GraphQL field it does the work of ([`gate::Gate`]), so a
//! key reaches through MCP exactly what it reaches over GraphQL.

pub mod args;
pub mod conclusions;
pub mod error;
pub mod gate;
pub mod memory;
pub mod messages;
pub mod metadata;
pub mod pages;
pub mod peers;
pub mod prompt;
pub mod reply;
pub mod resources;
pub mod search;
pub mod server;
pub mod sessions;
pub mod stdio;
pub mod workspaces;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use crate::access::Services;
use crate::auth::{Auth, AuthError};
pub use server::{Keys, Memory, PROTOCOL_VERSIONS};

/// Where the protected-resource metadata is served (RFC 9728, the path-suffixed form too).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// `/mcp` and the protected-resource metadata, over `services`' store and auth. Request bodies are
/// cut at `max_body_bytes`, as the server's body limit cuts them.
pub fn router(services: Services, max_body_bytes: usize) -> axum::Router {
    let memory = Memory::new(services.clone(), Keys::Http);
    // Hosts and origins are the server's layers' business, as for /graphql.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service = StreamableHttpService::new(
        move || Ok(memory.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(
            services.clone(),
            require_key,
        ))
        .route(METADATA_PATH, get(metadata))
        .route(&format!("{METADATA_PATH}/mcp"), get(metadata))
        .with_state(services)
}

/// The most of an unauthenticated request's body read before it is refused (a larger one costs
/// the client its connection instead).
const UNAUTHENTICATED_BODY_READ: usize = 64 * 1024;

/// Refuses a request without a valid key (auth on) before MCP reads it: 401, with the challenge
/// that tells a client where to learn how to authenticate.
async fn require_key(State(services): State<Services>, req: Request, next: Next) -> Response {
    if services.auth().is_none_or(Auth::enabled) {
        let header = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(e) = services.authenticate(header).principal() {
            // The body is read before the refusal: hyper closes a connection whose request body
            // was left unread, and a client that already sent its next request on that
            // connection (an SDK falling back from one protocol revision to the next) sees a
            // disconnect where it should see this 401.
            let (parts, body) = req.into_parts();
            let _ = axum::body::to_bytes(body, UNAUTHENTICATED_BODY_READ).await;
            return unauthorized(&parts.headers, &e);
        }
    }
    next.run(req).await
}

fn unauthorized(headers: &HeaderMap, e: &AuthError) -> Response {
    let mut challenge = format!(
        "Bearer realm=\"honcho-graphql\", resource_metadata=\"{}{METADATA_PATH}/mcp\"",
        base_url(headers)
    );
    // RFC 6750: no error code when the request carried no credentials.
    if !matches!(e, AuthError::Missing) {
        challenge.push_str(", error=\"invalid_token\"");
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": format!("UNAUTHENTICATED: {e}")},
    });
    let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// This server's origin as the client addressed it (`X-Forwarded-Proto` behind a proxy).
fn base_url(headers: &HeaderMap) -> String {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let scheme = text("x-forwarded-proto").unwrap_or("http");
    let host = text(HOST.as_str()).unwrap_or("localhost");
    format!("{scheme}://{host}")
}

/// The protected-resource metadata (RFC 9728): the resource is `/mcp`, keys go in the
/// `Authorization` header. Keys are minted by `honcho-graphql key` (or an admin's `createKey`),
/// not by an authorization server, so none is named.
async fn metadata(headers: HeaderMap) -> Json<serde_json::Value> {
    Json(json!({
        "resource": format!("{}/mcp", base_url(&headers)),
        "bearer_methods_supported": ["header"],
        "resource_name": "honcho-graphql memory (MCP)",
    }))
}
