//! The GraphQL schema: types, resolvers, dataloaders. Resolvers call the store; they never build
//! SQL.

pub mod connection;
pub mod cost;
pub mod documents;
pub mod error;
pub mod guard;
pub mod limits;
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
use async_graphql::{Data, Request, Response, Schema};
use tracing::Instrument;

use crate::access::{Auth, AuthError, Caller, Sealed};
use crate::dialectic::Dialectic;
use crate::store::events::EventBus;
use crate::store::replicas::ReadAfter;
use crate::store::{Lsn, Store};
pub use limits::Limits;
use loaders::Loaders;
pub use mutation::MutationRoot;
pub use query::QueryRoot;
pub use subscription::SubscriptionRoot;

pub type AppSchema = Schema<QueryRoot, MutationRoot, SubscriptionRoot>;

/// A schema with auth off (every request is an admin) and no event bus (subscriptions answer
/// with an error).
pub fn build_schema(store: Store, limits: &Limits) -> AppSchema {
    build_schema_with(store, limits, Auth::disabled(), None, None)
}

/// A schema whose fields are guarded by `auth` ([`guard`]).
pub fn build_schema_with_auth(store: Store, limits: &Limits, auth: Auth) -> AppSchema {
    build_schema_with(store, limits, auth, None, None)
}

/// A schema with auth off whose subscriptions are fed by `events`.
pub fn build_schema_with_events(
    store: Store,
    limits: &Limits,
    events: Option<EventBus>,
) -> AppSchema {
    build_schema_with(store, limits, Auth::disabled(), events, None)
}

/// A schema guarded by `auth` whose subscriptions are fed by `events` (the process's one LISTEN
/// connection), and whose chats are answered by `dialectic` (none without an LLM).
pub fn build_schema_with(
    store: Store,
    limits: &Limits,
    auth: Auth,
    events: Option<EventBus>,
    dialectic: Option<Dialectic>,
) -> AppSchema {
    // No schema extension: with any, async-graphql resolves every field on a slower path (20-30%
    // of the CPU of a request with many fields). Access is checked by construction instead
    // ([`guard`]).
    let mut builder = Schema::build(QueryRoot, MutationRoot::default(), SubscriptionRoot)
        .data(Sealed::new(store))
        .data(auth)
        .data(limits.clone())
        .data(documents::Documents::default())
        // Complexity is [`cost`]'s, checked in [`admit`] before validation.
        .limit_depth(limits.max_depth);
    if let Some(bus) = events {
        builder = builder.data(bus);
    }
    if let Some(dialectic) = dialectic {
        builder = builder.data(dialectic);
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
    crate::access::authenticate(schema.data::<Auth>(), authorization)
}

/// Authenticates a WebSocket `connection_init` payload (`{"Authorization": "Bearer <key>"}`) with
/// the schema's auth settings; the result goes into the connection's data, where the guards of
/// every operation on the connection find it.
pub fn authenticate_connection_init(schema: &AppSchema, payload: &serde_json::Value) -> Caller {
    match schema.data::<Auth>() {
        Some(auth) => auth.authenticate_connection_init(payload),
        None => Caller::new(Err(AuthError::Missing)),
    }
}

/// The SDL of the schema, as committed in `schema.graphql`.
pub fn sdl() -> String {
    Schema::build(QueryRoot, MutationRoot::default(), SubscriptionRoot)
        .finish()
        .sdl()
}

/// The loader of one request. Its cache lives as long as the request, so a row looked up twice in
/// one query is fetched once, and prefetched rows are there for the item resolvers.
pub type RequestLoader = DataLoader<Loaders, HashMapCache>;

/// A request that passed [`limits::scan`] and parsed, with the operation it names (for metrics).
pub struct Admitted {
    request: Request,
    name: Option<String>,
    ty: Option<OperationType>,
}

impl Admitted {
    /// The type of the operation the request will run (None when the document does not parse
    /// or names no operation it has).
    pub fn operation_type(&self) -> Option<OperationType> {
        self.ty
    }
}

/// Checks a request's document against the pre-parse limits, then parses it once; async-graphql
/// reuses the parsed document instead of parsing again. A document seen recently was checked and
/// parsed then, and comes from [`documents::Documents`]. A syntax error is not refused here:
/// execution reports it like any other request error.
pub fn admit(schema: &AppSchema, mut request: Request) -> Result<Admitted, limits::Exceeded> {
    let defaults = Limits::default();
    let limits = schema.data::<Limits>().unwrap_or(&defaults);
    let documents = schema.data::<documents::Documents>();
    let kept = documents.and_then(|d| d.get(&request.query));
    let parsed = match kept {
        Some(doc) => Some(doc),
        None => {
            if let Err(exceeded) = limits::scan(&request.query, limits) {
                // Counted like a request refused at parsing, under the name the client gave.
                metrics::observe(request.operation_name.as_deref(), false, Default::default());
                return Err(exceeded);
            }
            let parsed = async_graphql::parser::parse_query(&request.query).ok();
            if let (Some(documents), Some(doc)) = (documents, &parsed) {
                documents.put(&request.query, doc);
            }
            parsed
        }
    };
    if let Some(doc) = parsed {
        request.set_parsed_query(doc);
    }
    let operation_name = request.operation_name.clone();
    let variables = std::mem::take(&mut request.variables);
    let checked = match request.parsed_query() {
        Ok(doc) => {
            let tally = cost::tally(doc, operation_name.as_deref(), &variables);
            let named = match metrics::operation(doc, operation_name.as_deref()) {
                Some((name, ty)) => (name, Some(ty)),
                None => (operation_name.clone(), None),
            };
            limits::check(&tally, limits).map(|()| named)
        }
        Err(_) => Ok((operation_name.clone(), None)),
    };
    request.variables = variables;
    match checked {
        Ok((name, ty)) => Ok(Admitted { request, name, ty }),
        Err(exceeded) => {
            metrics::observe(operation_name.as_deref(), false, Default::default());
            Err(exceeded)
        }
    }
}

/// The response to a refused request: one coded error, nothing executed.
pub fn refusal(exceeded: limits::Exceeded) -> Response {
    Response::from_errors(vec![exceeded.into_error()])
}

fn request_loader(store: &Store) -> RequestLoader {
    // A batch runs on a task of its own; it stays in the trace of the operation that asked.
    // No time window (async-graphql's default is 1 ms, on a timer thread of its own): the
    // resolvers of one level of a response all register their keys while the request's task is
    // being polled, and the batch's task cannot take them before that task yields. The window
    // only added its length to every level that loads: 2.0 ms instead of 0.7 for a message and
    // its author at one connection (bench/history/2026-12.md, "Reads: the dataloader's window").
    DataLoader::with_cache(
        Loaders::new(store.clone()),
        |batch| tokio::spawn(batch.in_current_span()),
        HashMapCache::default(),
    )
    .delay(std::time::Duration::ZERO)
}

/// Executes one request with its own loader. Every entry point (HTTP, tests) goes through here.
pub async fn execute(schema: &AppSchema, request: Request) -> Response {
    match admit(schema, request) {
        Ok(admitted) => execute_admitted(schema, admitted).await,
        Err(exceeded) => refusal(exceeded),
    }
}

/// The id of the HTTP request a GraphQL request came in (`x-request-id`), put in its data by the
/// transport so the operation's trace span carries it.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

impl Admitted {
    /// The operation's trace span ([`crate::telemetry`]): built only when a trace layer is
    /// installed, otherwise a disabled span that costs nothing to enter.
    fn span(&self) -> tracing::Span {
        let ty = match self.ty {
            Some(OperationType::Query) => "query",
            Some(OperationType::Mutation) => "mutation",
            Some(OperationType::Subscription) => "subscription",
            None => "unknown",
        };
        // Both come from the client: clipped, so a span queued for export stays small.
        let name = crate::telemetry::clip(self.name.as_deref().unwrap_or("anonymous"));
        let request_id = crate::telemetry::clip(
            self.request
                .data
                .get(&std::any::TypeId::of::<RequestId>())
                .and_then(|d| d.downcast_ref::<RequestId>())
                .map_or("-", |id| id.0.as_str()),
        );
        tracing::debug_span!(
            "graphql.operation",
            otel.name = %format!("{ty} {name}"),
            graphql.operation.type = ty,
            graphql.operation.name = name,
            request_id = request_id,
        )
    }
}

/// Executes a request [`admit`] let through, inside its operation's span.
pub async fn execute_admitted(schema: &AppSchema, admitted: Admitted) -> Response {
    let span = admitted.span();
    execute_traced(schema, admitted).instrument(span).await
}

async fn execute_traced(schema: &AppSchema, admitted: Admitted) -> Response {
    let Some(store) = schema.data::<Sealed<Store>>() else {
        return Response::from_errors(vec![async_graphql::ServerError::new(
            "schema built without a store",
            None,
        )]);
    };
    let Admitted { request, name, ty } = admitted;
    let started = Instant::now();
    // A query's reads may go to a replica (the request's own store, in its data, shadows the
    // schema's); mutations, and what they return, read the primary.
    let routed = match ty {
        Some(OperationType::Query) => store.routed(read_after(&request)).await,
        _ => None,
    };
    let loader = guard::request_loader(routed.as_ref().unwrap_or(store));
    let request = match routed {
        Some(routed) => request.data(routed),
        None => request,
    };
    let mut response = schema.execute(request.data(loader)).await;
    if ty == Some(OperationType::Mutation) {
        add_consistency_token(store, &mut response).await;
    }
    metrics::observe(name.as_deref(), response.is_ok(), started.elapsed());
    error::code_request_errors(&mut response.errors);
    response
}

/// The key of a mutation response's `extensions` that holds the consistency token.
pub const CONSISTENCY_TOKEN: &str = "consistencyToken";

/// The request's consistency token (`x-honcho-after`), put in its data by the transport.
fn read_after(request: &Request) -> Option<Lsn> {
    request
        .data
        .get(&std::any::TypeId::of::<ReadAfter>())
        .and_then(|d| d.downcast_ref::<ReadAfter>())
        .map(|a| a.0)
}

/// After a mutation (all its fields have committed or failed), the primary's WAL position, for
/// the client to send back with its next reads.
async fn add_consistency_token(store: &Sealed<Store>, response: &mut Response) {
    if let Some(lsn) = store.consistency_token().await {
        response.extensions.insert(
            CONSISTENCY_TOKEN.to_owned(),
            async_graphql::Value::String(lsn.to_string()),
        );
    }
}

/// Executes one operation as a stream (a subscription yields a response per event; a query or
/// mutation yields one) with its own loader, as [`execute`] does for single responses.
/// `session_data` is the WebSocket connection's data ([`subscription::ConnectionInit`]).
pub fn execute_stream(
    schema: &AppSchema,
    request: Request,
    session_data: Option<Arc<Data>>,
) -> BoxStream<'static, Response> {
    let Some(store) = schema.data::<Sealed<Store>>() else {
        let err = async_graphql::ServerError::new("schema built without a store", None);
        return stream::once(async move { Response::from_errors(vec![err]) }).boxed();
    };
    let admitted = match admit(schema, request) {
        Ok(admitted) => admitted,
        Err(exceeded) => return stream::once(async move { refusal(exceeded) }).boxed(),
    };
    let span = admitted.span();
    let Admitted { request, name, ty } = admitted;
    let loader = guard::request_loader(store);
    // A query or mutation over the WebSocket answers once and is counted like one over HTTP;
    // subscription events are not operations.
    let mut timed = match ty {
        Some(ty) if ty != OperationType::Subscription => Some((name, Instant::now())),
        _ => None,
    };
    // Every operation over the WebSocket reads the primary; a mutation still answers with its
    // token, for reads the client makes over HTTP.
    let token_from = (ty == Some(OperationType::Mutation)).then(|| store.clone());
    let responses = schema
        .execute_stream_with_session_data(request.data(loader), session_data.unwrap_or_default())
        .boxed();
    // A query or mutation is traced as over HTTP. A subscription is not one span: it may live for
    // hours, and a span is exported only when it ends.
    let responses = match ty {
        Some(OperationType::Subscription) => responses,
        _ => traced(responses, span),
    };
    responses
        .then(move |mut response| {
            let token_from = token_from.clone();
            async move {
                if let Some(store) = &token_from {
                    add_consistency_token(store, &mut response).await;
                }
                response
            }
        })
        .map(move |mut response| {
            if let Some((name, started)) = timed.take() {
                metrics::observe(name.as_deref(), response.is_ok(), started.elapsed());
            }
            error::code_request_errors(&mut response.errors);
            response
        })
        .boxed()
}

/// `responses`, each polled inside `span`, so what their resolvers do is part of its trace.
fn traced(
    mut responses: BoxStream<'static, Response>,
    span: tracing::Span,
) -> BoxStream<'static, Response> {
    async_stream::stream! {
        while let Some(response) = responses.next().instrument(span.clone()).await {
            yield response;
        }
    }
    .boxed()
}
