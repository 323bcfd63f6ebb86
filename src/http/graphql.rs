//! `/graphql`: GraphQL over HTTP, POST and GET ([`transport`] negotiates and parses).

use async_graphql::parser::types::OperationType;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::Response;

use super::transport::{self, HttpError, MediaType, Params};
use super::{AppState, persisted};
use crate::store::Lsn;
use crate::store::replicas::ReadAfter;

/// GraphQL over HTTP ([`transport`]). A document refused before parsing
/// ([`crate::graphql::limits`]) is answered 400 with a GraphQL body under either media type, so a
/// client sees the same coded error it would over the WebSocket.
pub(super) async fn graphql(State(app): State<AppState>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let media = match MediaType::negotiate(&parts.headers) {
        Ok(media) => media,
        Err(refused) => return refused.respond(MediaType::Json),
    };
    let params = match parts.method.clone() {
        Method::GET => Params::from_query(parts.uri.query()),
        Method::POST => match crate::media::require_json(&parts.headers) {
            Ok(()) => match read_body(body, app.max_body_bytes).await {
                Ok(bytes) => Params::from_body(&bytes),
                Err(refused) => Err(refused),
            },
            Err(refused) => Err(refused.into()),
        },
        other => Err(HttpError::MethodNotAllowed(other)),
    };
    let mut params = match params {
        Ok(params) => params,
        Err(refused) => return refused.respond(media),
    };
    // A header that is not visible ASCII is as good as a bad key (the guards say UNAUTHENTICATED).
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    let caller = crate::graphql::authenticate(&app.schema, authorization);
    let sender = persisted::Sender::of(Some(&caller));
    let query = match app
        .persisted
        .resolve(params.query.take(), params.extensions.as_ref(), sender)
    {
        Ok(Some(query)) => query,
        Ok(None) => {
            return HttpError::BadParameters(
                "the request has no `query` (the GraphQL document, a string)".into(),
            )
            .respond(media);
        }
        Err(refused) => {
            // An unknown hash is a request error like any other: the client's APQ link reads it
            // and sends the document.
            let not_found = refused == persisted::PersistedError::NotFound;
            let mut resp = transport::graphql_response(refused.into_response(), media);
            if !not_found {
                *resp.status_mut() = StatusCode::BAD_REQUEST;
            }
            return resp;
        }
    };
    let mut request = params.into_request(query).data(caller);
    if let Some(id) = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        request = request.data(crate::graphql::RequestId(id.to_owned()));
    }
    match read_after(&parts.headers) {
        Ok(Some(after)) => request = request.data(after),
        Ok(None) => {}
        Err(refused) => return refused.respond(media),
    }
    match crate::graphql::admit(&app.schema, request) {
        Ok(admitted) => {
            // GET is for reads: a link or an <img> must never write.
            if parts.method == Method::GET {
                match admitted.operation_type() {
                    Some(OperationType::Mutation) => {
                        return HttpError::NotAQuery("mutation").respond(media);
                    }
                    Some(OperationType::Subscription) => {
                        return HttpError::NotAQuery("subscription").respond(media);
                    }
                    _ => {}
                }
            }
            let response = crate::graphql::execute_admitted(&app.schema, admitted).await;
            transport::graphql_response(response, media)
        }
        Err(exceeded) => {
            let mut resp = transport::graphql_response(crate::graphql::refusal(exceeded), media);
            *resp.status_mut() = StatusCode::BAD_REQUEST;
            resp
        }
    }
}

/// The header by which a client asks to read its own writes: the `consistencyToken` of a
/// mutation's `extensions`.
pub const READ_AFTER_HEADER: &str = "x-honcho-after";

/// The request's consistency token, if it sent one (400 when it is not one).
fn read_after(headers: &HeaderMap) -> Result<Option<ReadAfter>, HttpError> {
    let Some(value) = headers.get(READ_AFTER_HEADER) else {
        return Ok(None);
    };
    let refused = |why: String| {
        HttpError::BadParameters(format!(
            "{READ_AFTER_HEADER} must be the consistencyToken of a mutation's extensions: {why}"
        ))
    };
    let text = value
        .to_str()
        .map_err(|_| refused("it is not visible ASCII".into()))?;
    text.parse::<Lsn>()
        .map(|lsn| Some(ReadAfter(lsn)))
        .map_err(|e| refused(e.to_string()))
}

/// The whole body, or 413 when it is longer than the limit (the body limit layer cuts the stream;
/// this reads that as 413, not as a broken request).
async fn read_body(body: Body, max: usize) -> Result<Bytes, HttpError> {
    axum::body::to_bytes(body, max).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<http_body_util::LengthLimitError>() {
                return HttpError::PayloadTooLarge(max);
            }
            source = err.source();
        }
        HttpError::BadParameters(format!("the request body could not be read: {e}"))
    })
}
