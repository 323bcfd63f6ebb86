//! The error codes every API answers with, and the one place a store, dialectic or access error
//! becomes a coded [`Failure`]. Each API shapes a failure once, at its edge: GraphQL as an error
//! with `extensions.code` (`graphql::error`), REST as a status and `{"detail": ...}`
//! (`rest::error`). Internal causes are logged here with an id and never echoed.

use crate::dialectic::DialecticError;
use crate::store::StoreError;

/// Stable error codes, the `extensions.code` of every GraphQL error (docs/graphql.md) and the
/// source of every REST status.
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
    /// Every code, for the tables that map them.
    pub const ALL: [Code; 15] = [
        Code::BadUserInput,
        Code::NotFound,
        Code::Conflict,
        Code::Unauthenticated,
        Code::Forbidden,
        Code::Unavailable,
        Code::Internal,
        Code::EventsMissed,
        Code::BadRequest,
        Code::MethodNotAllowed,
        Code::UnsupportedMediaType,
        Code::NotAcceptable,
        Code::PayloadTooLarge,
        Code::PersistedQueryNotFound,
        Code::DocumentNotTrusted,
    ];

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

    /// The code named `s` (an `extensions.code`).
    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }

    pub fn failure(self, message: impl Into<String>) -> Failure {
        Failure {
            code: self,
            message: message.into(),
            limit: None,
        }
    }
}

/// What went wrong, as every API tells it: a code, a message safe to show, and for a refusal by
/// a limit the limit's name and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: Code,
    pub message: String,
    /// The variable or name of the limit that refused the request, and its value.
    pub limit: Option<(&'static str, u64)>,
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        if let Some((limit, max)) = err.limit() {
            return Failure {
                limit: Some((limit, max as u64)),
                ..Code::BadUserInput.failure(err.to_string())
            };
        }
        match &err {
            StoreError::InvalidInput(_) | StoreError::Filter(_) | StoreError::TooLarge { .. } => {
                Code::BadUserInput.failure(err.to_string())
            }
            StoreError::NotFound { .. } => Code::NotFound.failure(err.to_string()),
            StoreError::Conflict(_) => Code::Conflict.failure(err.to_string()),
            StoreError::Forbidden(_) => Code::Forbidden.failure(err.to_string()),
            StoreError::Unavailable(cause)
            | StoreError::Timeout(cause)
            | StoreError::Contention(cause) => {
                tracing::warn!(error = %cause, "database unavailable or too slow");
                Code::Unavailable.failure(err.to_string())
            }
            StoreError::Busy(_) => Code::Unavailable.failure(err.to_string()),
            StoreError::Database(_) | StoreError::Internal(_) | StoreError::Incompatible(_) => {
                let id = nanoid::nanoid!(10);
                tracing::error!(error_id = %id, error = ?err, "internal error");
                Code::Internal.failure(format!("internal server error (id {id})"))
            }
        }
    }
}

impl From<DialecticError> for Failure {
    fn from(err: DialecticError) -> Self {
        match err {
            DialecticError::Store(e) => e.into(),
            DialecticError::Invalid(m) => Code::BadUserInput.failure(m),
            // The model's server is a dependency like the database: its failure is worth a retry.
            e @ DialecticError::Llm(_) => Code::Unavailable.failure(e.to_string()),
        }
    }
}
