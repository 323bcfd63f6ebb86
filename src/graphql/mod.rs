//! The GraphQL schema: types, resolvers, dataloaders. Resolvers call the store; they never build
//! SQL.

pub mod connection;
pub mod error;
pub mod guard;
pub mod loaders;
pub mod metrics;
mod mutation;
pub mod prefetch;
mod query;
pub mod scalars;
pub mod subscription;
pub mod types;

use std::sync::Arc;
use std::time::Instant;

use async_graphql::dataloader::{DataLoader, HashMapCache};
use async_graphql::futures_util::stream::{self, BoxStream, StreamExt};
use async_graphql::parser::types::OperationType;
use async_graphql::{Context, Data, Request, Response, Schema};

use crate::auth::{Auth, AuthError, Caller};
use crate::store::Store;
use crate::store::events::EventBus;
use error::ApiResult;
use loaders::Loaders;
pub use mutation::MutationRoot;
pub use query::QueryRoot;
pub use subscription::SubscriptionRoot;

pub type AppSchema = Schema<QueryRoot, MutationRoot, SubscriptionRoot>;

/// Limits that keep one request from monopolising the server.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
    pub introspection: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 16,
            max_complexity: 20_000,
            introspection: true,
        }
    }
}

/// A schema with auth off (every request is an admin) and no event bus (subscriptions answer
/// with an error).
pub fn build_schema(store: Store, limits: &Limits) -> AppSchema {
    build_schema_with(store, limits, Auth::disabled(), None)
}

/// A schema whose fields are guarded by `auth` ([`guard`]).
pub fn build_schema_with_auth(store: Store, limits: &Limits, auth: Auth) -> AppSchema {
    build_schema_with(store, limits, auth, None)
}

/// A schema with auth off whose subscriptions are fed by `events`.
pub fn build_schema_with_events(
    store: Store,
    limits: &Limits,
    events: Option<EventBus>,
) -> AppSchema {
    build_schema_with(store, limits, Auth::disabled(), events)
}

/// A schema guarded by `auth` whose subscriptions are fed by `events` (the process's one LISTEN
/// connection).
pub fn build_schema_with(
    store: Store,
    limits: &Limits,
    auth: Auth,
    events: Option<EventBus>,
) -> AppSchema {
    // The backstop that refuses a guarded field resolved without its check is a schema extension,
    // and any extension puts every field on async-graphql's slower path (20-30% of the CPU of a
    // request with many fields; bench/README.md). With auth off every check passes, so there it
    // would guard nothing: it is installed only with auth on (where the auth tests run).
    let enforce = auth.enabled();
    let mut builder = Schema::build(QueryRoot, MutationRoot::default(), SubscriptionRoot)
        .data(store)
        .data(auth)
        .limit_depth(limits.max_depth)
        .limit_complexity(limits.max_complexity);
    if enforce {
        builder = builder.extension(guard::Enforce::default());
    }
    if let Some(bus) = events {
        builder = builder.data(bus);
    }
    if limits.introspection {
        builder.finish()
    } else {
        builder.disable_introspection().finish()
    }
}

/// Authenticates a request's `Authorization` header (None when absent) with the schema's auth
/// settings; the result goes into the request's data ([`Request::data`]) for the guards.
pub fn authenticate(schema: &AppSchema, authorization: Option<&str>) -> Caller {
    match schema.data::<Auth>() {
        Some(auth) => auth.authenticate(authorization),
        None => Caller(Err(AuthError::Missing)),
    }
}

/// Authenticates a WebSocket `connection_init` payload (`{"Authorization": "Bearer <key>"}`) with
/// the schema's auth settings; the result goes into the connection's data, where the guards of
/// every operation on the connection find it.
pub fn authenticate_connection_init(schema: &AppSchema, payload: &serde_json::Value) -> Caller {
    match schema.data::<Auth>() {
        Some(auth) => auth.authenticate_connection_init(payload),
        None => Caller(Err(AuthError::Missing)),
    }
}

/// The SDL of the schema, as committed in `schema.graphql`.
pub fn sdl() -> String {
    Schema::build(QueryRoot, MutationRoot::default(), SubscriptionRoot)
        .finish()
        .sdl()
}

pub(crate) fn store<'a>(ctx: &Context<'a>) -> ApiResult<&'a Store> {
    Ok(ctx.data::<Store>()?)
}

/// The loader of one request. Its cache lives as long as the request, so a row looked up twice in
/// one query is fetched once, and prefetched rows are there for the item resolvers.
pub type RequestLoader = DataLoader<Loaders, HashMapCache>;

pub(crate) fn loader<'a>(ctx: &Context<'a>) -> ApiResult<&'a RequestLoader> {
    Ok(ctx.data::<RequestLoader>()?)
}

/// Executes one request with its own loader. Every entry point (HTTP, tests) goes through here.
pub async fn execute(schema: &AppSchema, request: Request) -> Response {
    let store = match schema.data::<Store>() {
        Some(store) => store.clone(),
        None => {
            return Response::from_errors(vec![async_graphql::ServerError::new(
                "schema built without a store",
                None,
            )]);
        }
    };
    let loader = DataLoader::with_cache(Loaders::new(store), tokio::spawn, HashMapCache::default());
    // Named by `operationName` when the client sends one (no second parse of the document).
    let name = match &request.operation_name {
        Some(name) => Some(name.clone()),
        None => metrics::operation(&request).and_then(|(name, _)| name),
    };
    let started = Instant::now();
    let mut response = schema.execute(request.data(loader)).await;
    metrics::observe(name.as_deref(), response.is_ok(), started.elapsed());
    error::code_request_errors(&mut response.errors);
    response
}

/// Executes one operation as a stream (a subscription yields a response per event; a query or
/// mutation yields one) with its own loader, as [`execute`] does for single responses.
/// `session_data` is the WebSocket connection's data ([`subscription::ConnectionInit`]).
pub fn execute_stream(
    schema: &AppSchema,
    request: Request,
    session_data: Option<Arc<Data>>,
) -> BoxStream<'static, Response> {
    let Some(store) = schema.data::<Store>() else {
        let err = async_graphql::ServerError::new("schema built without a store", None);
        return stream::once(async move { Response::from_errors(vec![err]) }).boxed();
    };
    let loader = DataLoader::with_cache(
        Loaders::new(store.clone()),
        tokio::spawn,
        HashMapCache::default(),
    );
    // A query or mutation over the WebSocket answers once and is counted like one over HTTP;
    // subscription events are not operations.
    let mut timed = match metrics::operation(&request) {
        Some((name, ty)) if ty != OperationType::Subscription => Some((name, Instant::now())),
        _ => None,
    };
    schema
        .execute_stream_with_session_data(request.data(loader), session_data.unwrap_or_default())
        .map(move |mut response| {
            if let Some((name, started)) = timed.take() {
                metrics::observe(name.as_deref(), response.is_ok(), started.elapsed());
            }
            error::code_request_errors(&mut response.errors);
            response
        })
        .boxed()
}
