//! HTTP surface: Honcho's REST API under `/v3` ([`crate::rest`]), `/graphql` (POST and GET),
//! `/graphql/ws` (subscriptions over WebSocket, both graphql-transport-ws and the legacy
//! graphql-ws protocol), `/health`, `/ready`, `/metrics`, and
//! the playground at `/`. Every request gets an `x-request-id` (kept when the client sends one)
//! that its log lines carry; a panic in a handler becomes a 500 instead of a dropped connection.
//!
//! `/graphql` reads the caller's key from `Authorization: Bearer <key>` into the request's data,
//! `/graphql/ws` from the `connection_init` payload (`{"Authorization": "Bearer <key>"}`) into the
//! connection's data; the guards decide per field (a missing or bad key with auth on makes every
//! guarded field answer UNAUTHENTICATED). `/health`, `/ready`, `/metrics` and the playground are
//! open.
//!
//! One file per concern: the router and its layers here, GraphQL over HTTP in [`graphql`], the
//! WebSocket in [`ws`], error bodies and the edge checks in [`errors`], `/health`, `/ready` and
//! `/metrics` in [`probes`].

mod connections;
mod errors;
mod graphql;
mod hosts;
pub mod listener;
mod origins;
pub mod persisted;
mod playground;
mod probes;
mod sockets;
pub mod transport;
mod ws;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::graphql::AppSchema;
use crate::graphql::subscription::OpenPerKey;
use crate::store::Store;
pub use connections::{ConnectionTimeouts, serve};
use errors::{ErrorLimits, edge_checks, error_bodies};
pub use graphql::READ_AFTER_HEADER;
pub use hosts::{Hosts, HostsError};
pub use origins::{Origins, OriginsError};
pub use persisted::Persisted;
pub use playground::Playground;
pub use sockets::DEFAULT_MAX_PER_ADDRESS as DEFAULT_MAX_WEBSOCKETS_PER_ADDRESS;
use sockets::Sockets;

/// What the HTTP layer needs besides the schema and the store.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Largest request body (413 above).
    pub max_body_bytes: usize,
    /// A request running longer is answered 503 (None: no limit).
    pub request_timeout: Option<Duration>,
    /// Browser origins allowed besides the server's own (CORS, WebSocket upgrades, POSTs).
    pub origins: Origins,
    /// `Host` names answered besides IP literals and `localhost`.
    pub hosts: Hosts,
    /// Most WebSockets open at once from one client address (0: no cap).
    pub max_websockets_per_address: usize,
    /// What `/` serves.
    pub playground: Playground,
    /// Persisted documents (APQ) and, in strict mode, the trusted ones.
    pub persisted: Arc<Persisted>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_body_bytes: 16 * 1024 * 1024,
            request_timeout: None,
            origins: Origins::None,
            hosts: Hosts::default(),
            max_websockets_per_address: DEFAULT_MAX_WEBSOCKETS_PER_ADDRESS,
            playground: Playground::Missing,
            persisted: Arc::default(),
        }
    }
}

#[derive(Clone)]
struct AppState {
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
    origins: Origins,
    persisted: Arc<Persisted>,
    sockets: Arc<Sockets>,
    /// The subscriptions open per key on this router's sockets ([`OpenPerKey`]).
    open_per_key: OpenPerKey,
}

pub fn router(schema: AppSchema, store: Store, max_body_bytes: usize) -> Router {
    router_with(
        schema,
        store,
        HttpOptions {
            max_body_bytes,
            ..HttpOptions::default()
        },
    )
}

/// As [`router`], and with a built playground directory, `/` serves it: its files, and its
/// index.html for any other GET path (client-side routes). Without one, `/` says how to build it.
pub fn router_with_playground(
    schema: AppSchema,
    store: Store,
    max_body_bytes: usize,
    playground: Option<&Path>,
) -> Router {
    router_with(
        schema,
        store,
        HttpOptions {
            max_body_bytes,
            playground: match playground {
                Some(dir) => Playground::Dir(dir.to_path_buf()),
                None => Playground::Missing,
            },
            ..HttpOptions::default()
        },
    )
}

pub fn router_with(schema: AppSchema, store: Store, options: HttpOptions) -> Router {
    let api = Router::new()
        .route("/graphql", get(graphql::graphql).post(graphql::graphql))
        .route("/graphql/ws", get(ws::graphql_ws))
        .route("/health", get(probes::health))
        .route("/ready", get(probes::ready))
        .route("/metrics", get(probes::metrics));
    let app = options.playground.route(api);
    let services = rest_state(&schema, &store);
    let rest = crate::rest::router(services.clone())
        .merge(crate::mcp::router(services, options.max_body_bytes));
    let app = app.with_state(AppState {
        schema,
        store,
        max_body_bytes: options.max_body_bytes,
        origins: options.origins.clone(),
        persisted: options.persisted.clone(),
        sockets: Sockets::new(options.max_websockets_per_address),
        open_per_key: OpenPerKey::default(),
    });
    layers(app.merge(rest), &options)
}

/// REST's and MCP's services from what the GraphQL schema was built with: the same sealed store,
/// keys and dialectic, so the three APIs serve one store under one rule table.
pub fn rest_state(schema: &AppSchema, store: &Store) -> crate::access::Services {
    crate::access::Services::new(
        schema
            .data::<crate::access::Sealed<Store>>()
            .cloned()
            .unwrap_or_else(|| crate::access::Sealed::new(store.clone())),
        schema.data::<crate::access::Auth>().cloned(),
        schema.data::<crate::dialectic::Dialectic>().cloned(),
    )
}

/// The layers around every route, innermost first: body limit, panics caught, request timeout,
/// error bodies, CORS, the `Host` and cross-site checks ([`edge_checks`]), request ids and
/// tracing.
fn layers(app: Router, options: &HttpOptions) -> Router {
    let mut app = app
        .layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .layer(CatchPanicLayer::new());
    // A request that outlives this is answered 503; its statements are cut by statement_timeout.
    // (A WebSocket upgrade is answered at once; the socket then lives on its own task.)
    if let Some(timeout) = options.request_timeout {
        app = app.layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ));
    }
    let limits = ErrorLimits {
        max_body_bytes: options.max_body_bytes,
        timeout: options.request_timeout,
    };
    app = app.layer(axum::middleware::from_fn(move |req, next| {
        error_bodies(limits, req, next)
    }));
    // Outside the error bodies, so that a page on an allowed origin can read its errors too.
    if let Some(cors) = options.origins.cors() {
        app = app.layer(cors);
    }
    let edge = Arc::new((options.hosts.clone(), options.origins.clone()));
    app = app.layer(axum::middleware::from_fn(move |req, next| {
        edge_checks(edge.clone(), req, next)
    }));
    app.layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                let uri = req.uri().to_string();
                tracing::info_span!(
                    "request",
                    method = %req.method(),
                    uri = crate::telemetry::clip(&uri),
                    request_id = crate::telemetry::clip(id),
                )
            }),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}
