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
pub mod types;

use async_graphql::dataloader::{DataLoader, HashMapCache};
use async_graphql::{Context, EmptySubscription, Request, Response, Schema};

use crate::auth::{Auth, AuthError, Caller};
use crate::store::Store;
use error::ApiResult;
use loaders::Loaders;
pub use mutation::MutationRoot;
pub use query::QueryRoot;

pub type AppSchema = Schema<QueryRoot, MutationRoot, EmptySubscription>;

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

/// A schema with auth off: every request is an admin.
pub fn build_schema(store: Store, limits: &Limits) -> AppSchema {
    build_schema_with_auth(store, limits, Auth::disabled())
}

/// A schema whose fields are guarded by `auth` ([`guard`]).
pub fn build_schema_with_auth(store: Store, limits: &Limits, auth: Auth) -> AppSchema {
    let builder = Schema::build(QueryRoot, MutationRoot::default(), EmptySubscription)
        .data(store)
        .data(auth)
        .extension(guard::Enforce::default())
        .extension(metrics::OperationMetrics)
        .limit_depth(limits.max_depth)
        .limit_complexity(limits.max_complexity);
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
    Schema::build(QueryRoot, MutationRoot::default(), EmptySubscription)
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
    let mut response = schema.execute(request.data(loader)).await;
    error::code_request_errors(&mut response.errors);
    response
}
