//! The one place store errors become GraphQL errors. Every error a client sees carries
//! `extensions.code` from [`Code`]; internal causes are logged with an id and never echoed.

use async_graphql::{Error, ErrorExtensions};

use crate::dialectic::DialecticError;
use crate::store::StoreError;

/// Stable error codes, the `extensions.code` of every error (docs/graphql.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    BadUserInput,
    NotFound,
    Conflict,
    Unauthenticated,
    Forbidden,
    /// The database is unreachable or the request ran out of time; safe to retry.
    Unavailable,
    Internal,
    /// A subscription ended because events were dropped (lagged client, listener reconnect).
    EventsMissed,
    /// The HTTP request is not a GraphQL request: a body that is not JSON, a missing `query`,
    /// parameters of the wrong type.
    BadRequest,
    /// A method `/graphql` does not serve, or a mutation sent by GET.
    MethodNotAllowed,
    /// A POST whose body is not `application/json`.
    UnsupportedMediaType,
    /// An `Accept` header that names neither JSON media type.
    NotAcceptable,
    /// A body above `HONCHO_MAX_BODY_BYTES`.
    PayloadTooLarge,
    /// A persisted-query hash the server does not know (yet): send the document with it.
    PersistedQueryNotFound,
    /// Strict mode (`HONCHO_TRUSTED_DOCUMENTS`): the document is not in the manifest.
    DocumentNotTrusted,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::BadUserInput => "BAD_USER_INPUT",
            Code::NotFound => "NOT_FOUND",
            Code::Conflict => "CONFLICT",
            Code::Unauthenticated => "UNAUTHENTICATED",
            Code::Forbidden => "FORBIDDEN",
            Code::Unavailable => "SERVICE_UNAVAILABLE",
            Code::Internal => "INTERNAL_SERVER_ERROR",
            Code::EventsMissed => "EVENTS_MISSED",
            Code::BadRequest => "BAD_REQUEST",
            Code::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Code::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            Code::NotAcceptable => "NOT_ACCEPTABLE",
            Code::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Code::PersistedQueryNotFound => "PERSISTED_QUERY_NOT_FOUND",
            Code::DocumentNotTrusted => "DOCUMENT_NOT_TRUSTED",
        }
    }

    pub fn error(self, message: impl Into<String>) -> ApiError {
        let code = self.as_str();
        ApiError(Error::new(message.into()).extend_with(|_, e| e.set("code", code)))
    }
}

/// A resolver error. Deliberately not `Display`, so that `?` on a [`StoreError`] goes through
/// [`From<StoreError>`] here (and gets its code) instead of async-graphql's blanket conversion of
/// anything printable, which would drop the code.
#[derive(Clone, Debug)]
pub struct ApiError(pub Error);

pub type ApiResult<T> = Result<T, ApiError>;

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        e.0
    }
}

impl From<Error> for ApiError {
    /// Errors raised by async-graphql itself (missing context data, bad argument values) are the
    /// client's or ours; without a code they are treated as internal.
    fn from(e: Error) -> Self {
        if e.extensions
            .as_ref()
            .is_some_and(|x| x.get("code").is_some())
        {
            ApiError(e)
        } else {
            ApiError(e.extend_with(|_, x| x.set("code", Code::Internal.as_str())))
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        if let Some((limit, max)) = err.limit() {
            return ApiError(
                Code::BadUserInput
                    .error(err.to_string())
                    .0
                    .extend_with(|_, e| {
                        e.set("limit", limit);
                        e.set("max", max as u64);
                    }),
            );
        }
        match &err {
            StoreError::InvalidInput(_) | StoreError::Filter(_) | StoreError::TooLarge { .. } => {
                Code::BadUserInput.error(err.to_string())
            }
            StoreError::NotFound { .. } => Code::NotFound.error(err.to_string()),
            StoreError::Conflict(_) => Code::Conflict.error(err.to_string()),
            StoreError::Forbidden(_) => Code::Forbidden.error(err.to_string()),
            StoreError::Unavailable(cause)
            | StoreError::Timeout(cause)
            | StoreError::Contention(cause) => {
                tracing::warn!(error = %cause, "database unavailable or too slow");
                Code::Unavailable.error(err.to_string())
            }
            StoreError::Busy(_) => Code::Unavailable.error(err.to_string()),
            StoreError::Database(_) | StoreError::Internal(_) | StoreError::Incompatible(_) => {
                let id = nanoid::nanoid!(10);
                tracing::error!(error_id = %id, error = ?err, "internal error");
                Code::Internal.error(format!("internal server error (id {id})"))
            }
        }
    }
}

impl From<DialecticError> for ApiError {
    fn from(err: DialecticError) -> Self {
        match err {
            DialecticError::Store(e) => e.into(),
            DialecticError::Invalid(m) => Code::BadUserInput.error(m),
            // The model's server is a dependency like the database: its failure is worth a retry.
            e @ DialecticError::Llm(_) => Code::Unavailable.error(e.to_string()),
        }
    }
}

/// Argument checks that happen in the GraphQL layer (ranges, cursors).
pub fn bad_input(message: impl Into<String>) -> ApiError {
    Code::BadUserInput.error(message)
}

/// Gives every error without a code this one.
pub fn code_errors(errors: &mut [async_graphql::ServerError], code: Code) {
    for e in errors {
        let has_code = e
            .extensions
            .as_ref()
            .is_some_and(|x| x.get("code").is_some());
        if !has_code {
            e.extensions
                .get_or_insert_with(Default::default)
                .set("code", code.as_str());
        }
    }
}

/// Errors async-graphql raises itself before any resolver runs (syntax, validation, unknown
/// fields or arguments, depth and complexity limits) carry no code; they are the client's.
pub fn code_request_errors(errors: &mut [async_graphql::ServerError]) {
    code_errors(errors, Code::BadUserInput)
}
