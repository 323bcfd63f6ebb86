//! Honcho's v3 REST API beside `/graphql`, on the same store and keys, so that Honcho's own SDKs
//! work against this server unchanged: the same paths, JSON field names, `page`/`size`
//! pagination, get-or-create answering 201 or 200, and `{"detail": ...}` errors.
//!
//! Each route does the work of a GraphQL field and is authorized by that field's row of
//! [`crate::access::RULES`] ([`Gate::require`]): one rule table for every API. An option that
//! reads another resource (a peer's memory, another session) is checked against the row of the
//! field that reads that resource; `tests/it/rest_parity.rs` holds every route and option to what
//! GraphQL answers the same key. REST knows nothing of GraphQL: its state is the access layer's
//! sealed store, the key settings and the dialectic. The OpenAPI document at `/v3/openapi.json`
//! is generated from the handlers' annotations.

pub mod chat;
pub mod conclusions;
pub mod error;
pub mod export;
pub mod keys;
pub mod memory;
pub mod messages;
pub mod pdf;
pub mod peers;
pub mod scopes;
pub mod sessions;
pub mod webhooks;
pub mod workspaces;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Multipart, Request};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use crate::access::{self, Access, Auth, Field, On, Principal};
use crate::dialectic::Dialectic;
use crate::store::page::{MAX_PAGE, Order, Slice};
use crate::store::search_keys::SearchKeys;
pub use error::{RestError, RestResult};

#[derive(OpenApi)]
#[openapi(info(
    title = "honcho-graphql: Honcho v3 REST API",
    description = "Honcho's v3 REST surface, served from the same store as /graphql."
))]
struct ApiDoc;

/// Every route, with its OpenAPI description.
fn api() -> OpenApiRouter<RestState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(workspaces::routes())
        .merge(peers::routes())
        .merge(sessions::routes())
        .merge(messages::routes())
        .merge(conclusions::routes())
        .merge(keys::routes())
        .merge(memory::routes())
        .merge(chat::routes())
        .merge(webhooks::routes())
        .merge(scopes::routes())
}

/// What every route is served with: the access layer's [`access::Services`].
pub type RestState = access::Services;

/// The `/v3` routes and the OpenAPI document that describes them, over `state`'s store and auth.
/// A body may be as large as the server's limit (`HONCHO_MAX_BODY_BYTES`, as for `/graphql`),
/// not axum's default of 2 MB, which refused a batch of 100 messages of 25,000 characters; a
/// route that needs less sets its own ([`messages::UPLOAD_MAX_BYTES`]).
pub fn router(state: RestState) -> axum::Router {
    let (router, doc) = api().split_for_parts();
    router
        .layer(DefaultBodyLimit::disable())
        .route(
            "/export/workspaces/{workspace_id}",
            axum::routing::get(export::download),
        )
        .route(
            "/v3/openapi.json",
            axum::routing::get(move || async move { Json(doc) }),
        )
        // Where Honcho v3.0.12 serves its API docs (and its SDK's tests look for a live server).
        .route(
            "/docs",
            axum::routing::get(|| async {
                axum::response::Html(
                    "<!doctype html><title>Honcho REST API</title>\
                     <p>The OpenAPI 3 document of this server's Honcho v3 REST API is at \
                     <a href=\"/v3/openapi.json\">/v3/openapi.json</a>; GraphQL is at \
                     <a href=\"/\">/</a>.</p>",
                )
            }),
        )
        .with_state(state)
}

/// The OpenAPI document of [`router`].
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().split_for_parts().1
}

/// One request's way through the rules: the access layer's [`access::Gate`] for its caller (from
/// `Authorization: Bearer <key>`), and the route's state.
pub struct Gate {
    gate: access::Gate,
    state: RestState,
}

impl Gate {
    /// Checks `field`'s rule (a [`crate::access::RULES`] row, `rule!(Type.field)`) on `on`.
    pub async fn require(&self, field: Field, on: On<'_>) -> RestResult<Access<'_>> {
        Ok(self.gate.require(field, on).await?)
    }

    /// The caller's principal (after [`Gate::require`] passed, for what the store decides by key).
    pub fn principal(&self) -> RestResult<Principal> {
        Ok(self.gate.principal()?)
    }

    /// What the caller's message searches of `workspace` may rank by.
    pub async fn search_keys(&self, workspace: &str) -> SearchKeys {
        self.gate.search_keys(workspace).await
    }

    pub fn auth(&self) -> Option<&Auth> {
        self.state.auth()
    }

    /// The dialectic, when an LLM is configured.
    pub fn dialectic(&self) -> Option<&Dialectic> {
        self.state.dialectic()
    }
}

impl FromRequestParts<RestState> for Gate {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, state: &RestState) -> RestResult<Self> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Ok(Gate {
            gate: state.gate(state.authenticate(header)),
            state: state.clone(),
        })
    }
}

/// A JSON body; an empty body reads as `null` (so `Body<Option<T>>` is an optional body). A body
/// that does not fit is 422, as FastAPI answers. The body must be `application/json`: any other
/// content type, or a body with none, is 415 before it is read, so that what a cross-site form or
/// a `no-cors` fetch can send never reaches a route (an empty body may come without one: Honcho v3.0.12's
/// SDKs send `application/json` even then, but curl does not).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = RestError;

    async fn from_request(req: Request, state: &S) -> RestResult<Self> {
        let typed = crate::media::require_json(req.headers());
        let unsupported = |e: crate::media::NotJson| {
            RestError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string())
        };
        let untyped = match typed {
            Ok(()) => None,
            Err(e) if req.headers().contains_key(CONTENT_TYPE) => return Err(unsupported(e)),
            Err(e) => Some(e),
        };
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| RestError::new(e.status(), e.body_text()))?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"null"
        } else if let Some(e) = untyped {
            return Err(unsupported(e));
        } else {
            &bytes
        };
        serde_json::from_slice(text)
            .map(Body)
            .map_err(|e| RestError::invalid(format!("invalid request body: {e}")))
    }
}

/// A `multipart/form-data` body (415 for any other content type); a form that does not parse is
/// 422, one over the route's body limit 413.
pub struct Form(pub Multipart);

impl<S: Send + Sync> FromRequest<S> for Form {
    type Rejection = RestError;

    async fn from_request(req: Request, state: &S) -> RestResult<Self> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let is_form = content_type.as_deref().is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("multipart/form-data"))
        });
        if !is_form {
            return Err(RestError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "the request body must be `multipart/form-data`{}",
                    content_type
                        .map(|t| format!(", not `{t}`"))
                        .unwrap_or_default()
                ),
            ));
        }
        Multipart::from_request(req, state)
            .await
            .map(Form)
            .map_err(|e| RestError::invalid(e.body_text()))
    }
}

/// Query parameters of a paginated list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Page number, from 1.
    page: Option<u64>,
    /// Items per page, 1 to 100 (50).
    size: Option<u64>,
    /// Newest first.
    reverse: Option<bool>,
}

impl PageParams {
    pub fn page_size(&self) -> RestResult<(u64, u64)> {
        let page = self.page.unwrap_or(1);
        let size = self.size.unwrap_or(50);
        if page < 1 {
            return Err(RestError::invalid("page must be at least 1"));
        }
        if !(1..=MAX_PAGE).contains(&size) {
            return Err(RestError::invalid(format!(
                "size must be between 1 and {MAX_PAGE}"
            )));
        }
        Ok((page, size))
    }

    /// The store's slice for this page, with the total counted.
    pub fn slice(&self) -> RestResult<Slice> {
        let (page, size) = self.page_size()?;
        let skip = (page - 1)
            .checked_mul(size)
            .ok_or_else(|| RestError::invalid("page is too large"))?;
        Ok(Slice {
            first: Some(size),
            after: skip.checked_sub(1).map(crate::store::page::Cursor::at),
            want_total: true,
            ..Slice::default()
        })
    }

    /// Oldest first, unless `reverse`.
    pub fn order(&self) -> Order {
        self.order_from(Order::Asc)
    }

    /// `default`, or the other way with `reverse`.
    pub fn order_from(&self, default: Order) -> Order {
        match (self.reverse.unwrap_or(false), default) {
            (false, o) => o,
            (true, Order::Asc) => Order::Desc,
            (true, Order::Desc) => Order::Asc,
        }
    }

    /// The response page of a store page.
    pub fn respond<T, U: From<T>>(&self, page: crate::store::page::Page<T>) -> Json<Page<U>> {
        Json(self.page(page.items, page.total))
    }

    /// The response page of `items` out of `total`.
    pub fn page<T, U: From<T>>(&self, items: Vec<T>, total: Option<u64>) -> Page<U> {
        let (page, size) = self.page_size().unwrap_or((1, 50));
        let total = total.unwrap_or(0);
        Page {
            items: items.into_iter().map(U::from).collect(),
            total,
            page,
            size,
            pages: total.div_ceil(size),
        }
    }
}

/// A page of a list, as fastapi-pagination shapes it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    pub page: u64,
    pub size: u64,
    pub pages: u64,
}

/// The optional body of a `POST .../list` route.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ListBody {
    /// The filter JSON (Honcho's filter language).
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub filters: Option<Value>,
}

impl ListBody {
    /// The filters, `{}` when none were given.
    pub fn filters(body: Option<ListBody>) -> Value {
        body.and_then(|b| b.filters)
            .filter(|f| !f.is_null())
            .unwrap_or_else(|| Value::Object(Default::default()))
    }
}

/// The body of the search routes.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SearchBody {
    pub query: String,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    pub filters: Option<Value>,
    /// 1 to 100 (10).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Only the sessions of this scope (Honcho main's workspace search option).
    #[serde(default)]
    pub scope: Option<String>,
}

impl SearchBody {
    pub fn filters(&self) -> Value {
        self.filters
            .clone()
            .filter(|f| !f.is_null())
            .unwrap_or_else(|| Value::Object(Default::default()))
    }

    pub fn limit(&self) -> u64 {
        self.limit
            .unwrap_or(crate::store::search::DEFAULT_SEARCH_LIMIT)
    }
}

/// The `scope` option of chat and representation: a scope's id, or a list of them (Honcho main
/// takes a list as the union of the scopes). Recall here runs inside one scope at a time, so a
/// list must name one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ScopeOption {
    One(String),
    Many(Vec<String>),
}

impl ScopeOption {
    /// The one scope asked for, if any; 422 for a list of more than one.
    pub fn one(option: Option<&ScopeOption>) -> RestResult<Option<&str>> {
        match option {
            None => Ok(None),
            Some(ScopeOption::One(s)) => Ok(Some(s)),
            Some(ScopeOption::Many(list)) => match list.as_slice() {
                [one] => Ok(Some(one)),
                _ => Err(RestError::invalid(
                    "scope takes one scope id here (a list must hold exactly one)",
                )),
            },
        }
    }
}

/// A get-or-create's answer: 201 when the row is new, 200 when it existed.
pub fn created_or_found<T: Serialize>(created: bool, body: T) -> Response {
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(body)).into_response()
}

/// `{"message": ...}`, answered by Honcho v3.0.12's deletions.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageBody {
    pub message: String,
}

/// A JSON object, `{}` for anything else (metadata and configuration are objects).
fn object(v: Value) -> Value {
    if v.is_object() {
        v
    } else {
        Value::Object(Default::default())
    }
}
