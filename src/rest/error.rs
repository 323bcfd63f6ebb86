//! REST error bodies: `{"detail": "..."}` with Honcho v3.0.12's status codes. Store, dialectic and access
//! errors reach here as the access layer's [`Failure`] (its one mapping of errors to codes); this
//! module only turns each code into a status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::pdf::PdfError;
use crate::access::{AccessError, Code, Failure};
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

/// The status of each error code (Honcho v3.0.12's: 422 for bad input, 404, 409, 401; FORBIDDEN is 403,
/// where Honcho v3.0.12 answers 401 for a valid key out of scope too).
fn status(code: Code) -> StatusCode {
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
        .find(|(c, _)| *c == code)
        .map_or(StatusCode::INTERNAL_SERVER_ERROR, |(_, s)| *s)
}

impl From<Failure> for RestError {
    fn from(f: Failure) -> Self {
        RestError::new(status(f.code), f.message)
    }
}

/// A PDF that cannot be read is the caller's input (422), as is one whose text makes more
/// messages than an upload may (413, as for a text file); only a full set of readers is ours (503).
impl From<PdfError> for RestError {
    fn from(e: PdfError) -> Self {
        let status = match e {
            PdfError::TooLong(_) => StatusCode::PAYLOAD_TOO_LARGE,
            PdfError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        RestError::new(status, e.to_string())
    }
}

impl From<StoreError> for RestError {
    fn from(e: StoreError) -> Self {
        Failure::from(e).into()
    }
}

impl From<AccessError> for RestError {
    fn from(e: AccessError) -> Self {
        Failure::from(e).into()
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
