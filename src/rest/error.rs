//! REST error bodies: `{"detail": "..."}` with Honcho's status codes. Store errors reach here
//! through the GraphQL edge's one mapping ([`crate::graphql::error`]); this module only turns each
//! code into a status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::graphql::error::{ApiError, Code};
use crate::store::StoreError;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub detail: String,
}

#[derive(Debug)]
pub struct RestError {
    pub status: StatusCode,
    pub detail: String,
}

pub type RestResult<T> = Result<T, RestError>;

impl RestError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        RestError {
            status,
            detail: detail.into(),
        }
    }

    /// A request that does not fit the route's schema (FastAPI's validation status).
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }
}

/// The status of each error code (Honcho's: 422 for bad input, 404, 409, 401; FORBIDDEN is 403,
/// where Honcho answers 401 for a valid key out of scope too).
fn status(code: &str) -> StatusCode {
    const TABLE: &[(Code, StatusCode)] = &[
        (Code::BadUserInput, StatusCode::UNPROCESSABLE_ENTITY),
        (Code::NotFound, StatusCode::NOT_FOUND),
        (Code::Conflict, StatusCode::CONFLICT),
        (Code::Unauthenticated, StatusCode::UNAUTHORIZED),
        (Code::Forbidden, StatusCode::FORBIDDEN),
        (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
        (Code::PayloadTooLarge, StatusCode::PAYLOAD_TOO_LARGE),
    ];
    TABLE
        .iter()
        .find(|(c, _)| c.as_str() == code)
        .map_or(StatusCode::INTERNAL_SERVER_ERROR, |(_, s)| *s)
}

impl From<ApiError> for RestError {
    fn from(e: ApiError) -> Self {
        let code =
            e.0.extensions
                .as_ref()
                .and_then(|x| x.get("code"))
                .and_then(|v| match v {
                    async_graphql::Value::String(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
        RestError::new(status(&code), e.0.message)
    }
}

impl From<StoreError> for RestError {
    fn from(e: StoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                detail: self.detail,
            }),
        )
            .into_response()
    }
}
