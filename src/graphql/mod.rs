//! The GraphQL schema: types, resolvers, dataloaders. Resolvers call the store; they never build
//! SQL.

pub mod connection;
pub mod error;
pub mod loaders;
pub mod metrics;
mod mutation;
pub mod prefetch;
mod query;
pub mod scalars;
pub mod types;

use async_graphql::dataloader::{DataLoader, HashMapCache};
use async_graphql::{Context, EmptySubscription, Request, Response, Schema};

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

pub fn build_schema(store: Store, limits: &Limits) -> AppSchema {
    let builder = Schema::build(QueryRoot, MutationRoot::default(), EmptySubscription)
        .data(store)
        .extension(metrics::OperationMetrics)
        .limit_depth(limits.max_depth)
        .limit_complexity(limits.max_complexity);
    if limits.introspection {
        builder.finish()
    } else {
        builder.disable_introspection().finish()
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
