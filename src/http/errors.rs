//! Error responses in the shape of the API a request went to, whichever layer answered, and the
//! checks that refuse a request before any route runs.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::transport::{self, HttpError, MediaType};
use super::{Hosts, Origins};
use crate::graphql::error::Code;

/// What a page on another site, or one that DNS rebinding made look like this server's own, can
/// send: refused before any route runs, with auth on or off.
/// - A `Host` that is not one of this server's names ([`super::hosts`]): 403.
/// - A method other than GET, HEAD and OPTIONS (the methods that never write here) with an
///   `Origin` that is neither this server's nor an allowed one ([`Origins::admits`]): 403.
///   Browsers send `Origin` with every such request, including the forms and `no-cors` fetches
///   that need no preflight, whatever their body or content type; clients that are not
///   browsers send none.
pub(super) async fn edge_checks(
    edge: Arc<(Hosts, Origins)>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let (hosts, origins) = &*edge;
    let host = match request.headers().get(header::HOST) {
        Some(value) => Some(value.to_str().unwrap_or_default()),
        None => request.uri().authority().map(|a| a.as_str()),
    };
    let refused = if !hosts.allows(host) {
        Some(format!(
            "the host `{}` is not one this server answers (HONCHO_ALLOWED_HOSTS)",
            host.unwrap_or_default()
        ))
    } else if !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) && !origins.admits(request.headers())
    {
        let origin = request.headers().get(header::ORIGIN);
        Some(format!(
            "a {} from the origin `{}` is not allowed (HONCHO_CORS_ORIGINS)",
            request.method(),
            origin
                .map(|o| String::from_utf8_lossy(o.as_bytes()))
                .unwrap_or_default()
        ))
    } else {
        None
    };
    match refused {
        Some(message) => {
            let mut resp = refusal(&request, StatusCode::FORBIDDEN, Code::Forbidden, &message);
            resp.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("origin"));
            resp
        }
        None => next.run(request).await,
    }
}

/// Whether `path` is Honcho's REST API, whose errors are `{"detail": ...}`.
fn is_rest(path: &str) -> bool {
    path == "/v3" || path.starts_with("/v3/")
}

/// An error response in the shape of the API `request` went to: `{"detail": ...}` under `/v3`,
/// a GraphQL error body with the code and the request id elsewhere.
fn refusal(request: &Request<Body>, status: StatusCode, code: Code, message: &str) -> Response {
    if is_rest(request.uri().path()) {
        return crate::rest::RestError::new(status, message).into_response();
    }
    let media = MediaType::negotiate(request.headers()).unwrap_or(MediaType::Json);
    let mut body = transport::error_body(message, code);
    if let Some(id) = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        body["errors"][0]["extensions"]["requestId"] = Value::String(id.to_owned());
    }
    transport::json_response(status, media, &body)
}

#[derive(Clone, Copy)]
pub(super) struct ErrorLimits {
    pub(super) max_body_bytes: usize,
    pub(super) timeout: Option<Duration>,
}

/// Every error response is a GraphQL error body with a code and the request id, including those
/// answered by layers that know nothing of GraphQL: the body limit (413), the request timeout
/// (503), a caught panic (500), a method the route does not serve (405), a refused WebSocket
/// upgrade. Error bodies that are GraphQL already get the request id added to each error.
/// Under `/v3` every error is `{"detail": ...}` instead, those of axum's extractors included (a
/// query string or a path that does not fit is 422 there, as FastAPI answers).
pub(super) async fn error_bodies(
    limits: ErrorLimits,
    request: Request<Body>,
    next: Next,
) -> Response {
    let request_id = request.headers().get("x-request-id").cloned();
    let rest = is_rest(request.uri().path());
    let media = MediaType::negotiate(request.headers()).unwrap_or(MediaType::Json);
    let resp = next.run(request).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let id = request_id
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.starts_with(transport::JSON) || t.starts_with(transport::GRAPHQL_RESPONSE_JSON)
        });
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (status, "error body too large").into_response();
    };
    if rest {
        if is_json {
            // A RestError's body already.
            return Response::from_parts(parts, Body::from(bytes));
        }
        let (_, detail) = plain_error(status, &bytes, limits, &id);
        parts.status = match status {
            StatusCode::BAD_REQUEST => StatusCode::UNPROCESSABLE_ENTITY,
            s => s,
        };
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Response::from_parts(parts, Body::from(json!({ "detail": detail }).to_string()));
    }
    let mut value = if is_json {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.get("errors").is_some_and(Value::is_array) => v,
            // JSON that is not a GraphQL body (`/ready`'s status) stays as it is.
            _ => return Response::from_parts(parts, Body::from(bytes)),
        }
    } else {
        let (code, message) = plain_error(status, &bytes, limits, &id);
        parts
            .headers
            .insert(header::CONTENT_TYPE, media.content_type());
        transport::error_body(&message, code)
    };
    if let Some(errors) = value.get_mut("errors").and_then(Value::as_array_mut) {
        for error in errors {
            if let Some(error) = error.as_object_mut() {
                let extensions = error.entry("extensions").or_insert_with(|| json!({}));
                if let Some(extensions) = extensions.as_object_mut() {
                    extensions.insert("requestId".into(), Value::String(id.clone()));
                }
            }
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(value.to_string()))
}

/// The code and message of an error response whose body is not JSON (a layer's, or an
/// extractor's plain-text rejection).
fn plain_error(status: StatusCode, body: &[u8], limits: ErrorLimits, id: &str) -> (Code, String) {
    let text = String::from_utf8_lossy(body).trim().to_owned();
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            Code::PayloadTooLarge,
            HttpError::PayloadTooLarge(limits.max_body_bytes).to_string(),
        ),
        StatusCode::SERVICE_UNAVAILABLE => (
            Code::Unavailable,
            match limits.timeout {
                Some(t) => format!(
                    "the request took longer than {} ms (HONCHO_REQUEST_TIMEOUT_MS); it may be retried",
                    t.as_millis()
                ),
                None => "the service is unavailable; the request may be retried".into(),
            },
        ),
        StatusCode::METHOD_NOT_ALLOWED => (
            Code::MethodNotAllowed,
            "this path does not serve that method".into(),
        ),
        StatusCode::NOT_FOUND => (Code::NotFound, "no such path".into()),
        s if s.is_server_error() => {
            tracing::error!(request_id = %id, status = %s, "internal error answered");
            (
                Code::Internal,
                format!("internal server error (request {id})"),
            )
        }
        _ if !text.is_empty() => (Code::BadRequest, text),
        s => (
            Code::BadRequest,
            s.canonical_reason().unwrap_or("bad request").to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;

    use super::*;
    use crate::http::{HttpOptions, layers};

    /// The layers around a route that panics and one that outlives the request timeout.
    async fn serve_failing_routes() -> String {
        async fn panics() -> &'static str {
            panic!("a handler bug")
        }
        async fn sleeps() -> &'static str {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "too late"
        }
        let app = Router::new()
            .route("/panic", get(panics))
            .route("/slow", get(sleeps));
        let options = HttpOptions {
            request_timeout: Some(Duration::from_millis(100)),
            ..HttpOptions::default()
        };
        let app = layers(app, &options);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    async fn get_error(url: String) -> (u16, String, Value) {
        let resp = crate::outbound::client()
            .get(url)
            .header("x-request-id", "req-42")
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let content_type = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        (status, content_type, resp.json().await.unwrap())
    }

    #[tokio::test]
    async fn a_caught_panic_and_a_timeout_answer_graphql_error_bodies() {
        let base = serve_failing_routes().await;
        let (status, content_type, body) = get_error(format!("{base}/panic")).await;
        assert_eq!(status, 500);
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        assert_eq!(
            body["errors"][0]["extensions"]["code"],
            "INTERNAL_SERVER_ERROR"
        );
        assert_eq!(body["errors"][0]["extensions"]["requestId"], "req-42");
        assert!(
            !body.to_string().contains("a handler bug"),
            "the panic message stays in the log: {body}"
        );

        let (status, _, body) = get_error(format!("{base}/slow")).await;
        assert_eq!(status, 503);
        assert_eq!(
            body["errors"][0]["extensions"]["code"],
            "SERVICE_UNAVAILABLE"
        );
        assert_eq!(body["errors"][0]["extensions"]["requestId"], "req-42");
        assert!(
            body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("HONCHO_REQUEST_TIMEOUT_MS"),
            "{body}"
        );
    }
}
