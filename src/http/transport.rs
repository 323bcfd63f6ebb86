//! GraphQL over HTTP, as the GraphQL-over-HTTP specification words it (the npm `graphql-http`
//! audit checks it in `make test`):
//!
//! - `POST` takes an `application/json` body only. Anything a cross-site HTML form can send
//!   (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`) is refused with
//!   415 before it is read, so a web page cannot make a browser write here without a CORS
//!   preflight.
//! - `GET` takes `query`, `operationName`, `variables` and `extensions` from the query string and
//!   runs queries only: a mutation (or subscription) is refused with 405 and `Allow: POST`.
//! - The response's media type follows `Accept`: `application/graphql-response+json` when the
//!   client prefers it, `application/json` when it asks for that, for `*/*`, or says nothing.
//!   A request error (the document does not parse or validate, a variable does not coerce) has no
//!   `data` entry, and is 400 under `application/graphql-response+json` and 200 under
//!   `application/json`, as the specification asks of each.
//! - A body that is not JSON, a missing `query` or a parameter of the wrong type is 400; every
//!   refusal is a GraphQL error body with `extensions.code` (and the request id, see
//!   [`error_body`]).

use async_graphql::Variables;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::graphql::error::Code;
pub use crate::media::JSON;
use crate::media::NotJson;

pub const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";

/// The media type of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    GraphqlResponse,
    Json,
}

impl MediaType {
    pub fn content_type(self) -> HeaderValue {
        match self {
            MediaType::GraphqlResponse => {
                HeaderValue::from_static("application/graphql-response+json; charset=utf-8")
            }
            MediaType::Json => HeaderValue::from_static("application/json; charset=utf-8"),
        }
    }

    /// The client's preference from `Accept` (highest `q`, then first listed); no header means
    /// `application/json`, as the specification says for legacy clients.
    pub fn negotiate(headers: &HeaderMap) -> Result<MediaType, HttpError> {
        let values: Vec<&str> = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.iter().all(|v| v.trim().is_empty()) {
            return Ok(MediaType::Json);
        }
        let mut best: Option<(f32, MediaType)> = None;
        for range in values.iter().flat_map(|v| v.split(',')) {
            let mut parts = range.split(';');
            let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let ty = match name.as_str() {
                GRAPHQL_RESPONSE_JSON => MediaType::GraphqlResponse,
                JSON | "application/*" | "*/*" => MediaType::Json,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, ty));
            }
        }
        best.map(|(_, ty)| ty).ok_or(HttpError::NotAcceptable)
    }
}

/// Why `/graphql` refused a request before executing it.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("the request body is empty; send a JSON object with a `query`")]
    EmptyBody,
    #[error("the request body is not valid JSON: {0}")]
    BadJson(String),
    #[error("{0}")]
    BadParameters(String),
    #[error("{0} is not a GraphQL request method here; use POST (or GET for queries)")]
    MethodNotAllowed(Method),
    #[error("only queries can be sent by GET; send {0}s by POST")]
    NotAQuery(&'static str),
    #[error(transparent)]
    UnsupportedMediaType(#[from] NotJson),
    #[error("this server answers `application/graphql-response+json` or `application/json` only")]
    NotAcceptable,
    #[error("the request body is larger than {0} bytes (HONCHO_MAX_BODY_BYTES)")]
    PayloadTooLarge(usize),
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::EmptyBody | HttpError::BadJson(_) | HttpError::BadParameters(_) => {
                StatusCode::BAD_REQUEST
            }
            HttpError::MethodNotAllowed(_) | HttpError::NotAQuery(_) => {
                StatusCode::METHOD_NOT_ALLOWED
            }
            HttpError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpError::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            HttpError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    pub fn code(&self) -> Code {
        match self {
            HttpError::EmptyBody | HttpError::BadJson(_) | HttpError::BadParameters(_) => {
                Code::BadRequest
            }
            HttpError::MethodNotAllowed(_) | HttpError::NotAQuery(_) => Code::MethodNotAllowed,
            HttpError::UnsupportedMediaType(_) => Code::UnsupportedMediaType,
            HttpError::NotAcceptable => Code::NotAcceptable,
            HttpError::PayloadTooLarge(_) => Code::PayloadTooLarge,
        }
    }

    /// The refusal as a response: a GraphQL error body in `media`, with the headers the status
    /// calls for (`Allow` on 405, `Accept-Post` on 415).
    pub fn respond(&self, media: MediaType) -> Response {
        let mut resp = json_response(
            self.status(),
            media,
            &error_body(&self.to_string(), self.code()),
        );
        match self {
            HttpError::NotAQuery(_) => {
                resp.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
            }
            HttpError::MethodNotAllowed(_) => {
                resp.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
            }
            HttpError::UnsupportedMediaType(_) => {
                resp.headers_mut()
                    .insert("accept-post", HeaderValue::from_static(JSON));
            }
            _ => {}
        }
        resp
    }
}

/// `{"errors":[{"message", "extensions":{"code"}}]}`: the body of every refusal that happens
/// outside GraphQL execution. The request id is added on the way out (see `super::error_bodies`).
pub fn error_body(message: &str, code: Code) -> Value {
    json!({"errors": [{"message": message, "extensions": {"code": code.as_str()}}]})
}

pub fn json_response(status: StatusCode, media: MediaType, body: &Value) -> Response {
    let mut resp = (status, Body::from(body.to_string())).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, media.content_type());
    resp
}

/// The parameters of a GraphQL request, from a JSON body or a query string.
#[derive(Debug, Default)]
pub struct Params {
    pub query: Option<String>,
    pub operation_name: Option<String>,
    pub variables: Option<Map<String, Value>>,
    pub extensions: Option<Map<String, Value>>,
}

impl Params {
    /// The parameters of a POST body: one JSON object (check [`crate::media::require_json`] first).
    pub fn from_body(body: &Bytes) -> Result<Params, HttpError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(HttpError::EmptyBody);
        }
        let value: Value =
            serde_json::from_slice(body).map_err(|e| HttpError::BadJson(e.to_string()))?;
        let Value::Object(mut fields) = value else {
            return Err(HttpError::BadParameters(
                "the request body must be one JSON object (batches are not accepted)".into(),
            ));
        };
        Ok(Params {
            query: string(fields.remove("query"), "query")?,
            operation_name: string(fields.remove("operationName"), "operationName")?,
            variables: object(fields.remove("variables"), "variables")?,
            extensions: object(fields.remove("extensions"), "extensions")?,
        })
    }

    /// The parameters of a GET: `variables` and `extensions` are JSON in the query string.
    pub fn from_query(query: Option<&str>) -> Result<Params, HttpError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| HttpError::BadParameters(format!("the query string: {e}")))?;
        let mut params = Params::default();
        for (key, value) in pairs {
            let json = |what: &str| -> Result<Option<Map<String, Value>>, HttpError> {
                let parsed = serde_json::from_str(&value).map_err(|e| {
                    HttpError::BadParameters(format!("`{what}` is not valid JSON: {e}"))
                })?;
                object(Some(parsed), what)
            };
            match key.as_str() {
                "query" => params.query = Some(value),
                "operationName" => params.operation_name = Some(value),
                "variables" => params.variables = json("variables")?,
                "extensions" => params.extensions = json("extensions")?,
                _ => {}
            }
        }
        Ok(params)
    }

    /// The async-graphql request of a document (the caller resolves persisted documents first).
    pub fn into_request(self, query: String) -> async_graphql::Request {
        let mut request = async_graphql::Request::new(query);
        if let Some(name) = self.operation_name {
            request = request.operation_name(name);
        }
        if let Some(vars) = self.variables {
            request = request.variables(Variables::from_json(Value::Object(vars)));
        }
        if let Some(ext) = self.extensions {
            request.extensions = async_graphql::Extensions(
                ext.into_iter()
                    .filter_map(|(k, v)| Some((k, async_graphql::Value::from_json(v).ok()?)))
                    .collect(),
            );
        }
        request
    }
}

fn string(value: Option<Value>, name: &str) -> Result<Option<String>, HttpError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(HttpError::BadParameters(format!(
            "`{name}` must be a string, got {}",
            kind(&other)
        ))),
    }
}

fn object(value: Option<Value>, name: &str) -> Result<Option<Map<String, Value>>, HttpError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(other) => Err(HttpError::BadParameters(format!(
            "`{name}` must be an object, got {}",
            kind(&other)
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An executed request as HTTP: a request error (nothing executed: the document did not parse or
/// validate, a variable did not coerce) has no `data` entry and is 400 under
/// `application/graphql-response+json`; anything that executed is 200.
pub fn graphql_response(response: async_graphql::Response, media: MediaType) -> Response {
    let request_error = response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty());
    let headers = response.http_headers.clone();
    let cache_control = response.cache_control.value();
    // Serialised straight from the response: a JSON map would sort the fields, and a result's
    // fields come in the order the query asked for them.
    let body = match request_error {
        true => serde_json::to_vec(&json!({"errors": response.errors})),
        false => serde_json::to_vec(&response),
    }
    .unwrap_or_else(|e| {
        error_body(
            &format!("the response could not be serialised: {e}"),
            Code::Internal,
        )
        .to_string()
        .into_bytes()
    });
    let status = if request_error && media == MediaType::GraphqlResponse {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut resp = (status, Body::from(body)).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, media.content_type());
    for (name, value) in headers.iter() {
        resp.headers_mut().append(name, value.clone());
    }
    if let Some(cc) = cache_control.and_then(|v| HeaderValue::from_str(&v).ok()) {
        resp.headers_mut().insert(header::CACHE_CONTROL, cc);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> Result<MediaType, HttpError> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        MediaType::negotiate(&h)
    }

    #[test]
    fn accept_picks_the_preferred_json_media_type() {
        assert_eq!(
            MediaType::negotiate(&HeaderMap::new()).unwrap(),
            MediaType::Json
        );
        assert_eq!(accept("*/*").unwrap(), MediaType::Json);
        assert_eq!(accept("application/json").unwrap(), MediaType::Json);
        assert_eq!(
            accept(GRAPHQL_RESPONSE_JSON).unwrap(),
            MediaType::GraphqlResponse
        );
        assert_eq!(
            accept("application/graphql-response+json, application/json;q=0.9").unwrap(),
            MediaType::GraphqlResponse
        );
        assert_eq!(
            accept("application/json, application/graphql-response+json").unwrap(),
            MediaType::Json
        );
        assert_eq!(
            accept("application/json;q=0.5, application/graphql-response+json;q=0.8").unwrap(),
            MediaType::GraphqlResponse
        );
        assert_eq!(
            accept("text/html,application/xhtml+xml,*/*;q=0.8").unwrap(),
            MediaType::Json
        );
        assert!(matches!(accept("text/html"), Err(HttpError::NotAcceptable)));
        assert!(matches!(
            accept("application/json;q=0"),
            Err(HttpError::NotAcceptable)
        ));
    }

    #[test]
    fn parameters_of_the_wrong_type_are_refused() {
        let post = |body: &'static str| Params::from_body(&Bytes::from_static(body.as_bytes()));
        assert!(matches!(post(""), Err(HttpError::EmptyBody)));
        assert!(matches!(post("{ \"not a JSON"), Err(HttpError::BadJson(_))));
        assert!(matches!(post("[]"), Err(HttpError::BadParameters(_))));
        for bad in [
            r#"{"query": 0}"#,
            r#"{"query": ["a"]}"#,
            r#"{"query": "{a}", "operationName": false}"#,
            r#"{"query": "{a}", "variables": "x"}"#,
            r#"{"query": "{a}", "extensions": [1]}"#,
        ] {
            assert!(
                matches!(post(bad), Err(HttpError::BadParameters(_))),
                "{bad}"
            );
        }
        let ok = post(r#"{"query": "{a}", "operationName": null, "variables": {"x": 1}}"#).unwrap();
        assert_eq!(ok.query.as_deref(), Some("{a}"));
        assert_eq!(ok.variables.unwrap()["x"], 1);
    }

    #[test]
    fn get_parameters_come_from_the_query_string() {
        let p = Params::from_query(Some(
            "query=%7B%20a%20%7D&variables=%7B%22x%22%3A1%7D&operationName=Op",
        ))
        .unwrap();
        assert_eq!(p.query.as_deref(), Some("{ a }"));
        assert_eq!(p.operation_name.as_deref(), Some("Op"));
        assert_eq!(p.variables.unwrap()["x"], 1);
        assert!(matches!(
            Params::from_query(Some("query=x&variables=%5B")),
            Err(HttpError::BadParameters(_))
        ));
    }
}
