//! GraphQL's edge for errors: a [`Failure`] (the access layer's code and message, from a store,
//! dialectic or access error) becomes an error with `extensions.code`, and `extensions.limit` and
//! `extensions.max` for a refusal by a limit. Internal causes are logged where the failure is
//! made, with an id, and never echoed.

use async_graphql::{Error, ErrorExtensions};

pub use crate::access::Code;
use crate::access::{AccessError, Failure};
use crate::dialectic::DialecticError;
use crate::store::StoreError;

impl Code {
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

impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        let error = f.code.error(f.message).0;
        match f.limit {
            Some((limit, max)) => ApiError(error.extend_with(|_, e| {
                e.set("limit", limit);
                e.set("max", max);
            })),
            None => ApiError(error),
        }
    }
}

/// Back to a failure, for what the access layer asks of GraphQL's loader (a lookup that failed).
impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let code =
            e.0.extensions
                .as_ref()
                .and_then(|x| x.get("code"))
                .and_then(|v| match v {
                    async_graphql::Value::String(s) => Code::parse(s),
                    _ => None,
                })
                .unwrap_or(Code::Internal);
        code.failure(e.0.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        Failure::from(err).into()
    }
}

impl From<DialecticError> for ApiError {
    fn from(err: DialecticError) -> Self {
        Failure::from(err).into()
    }
}

impl From<AccessError> for ApiError {
    fn from(err: AccessError) -> Self {
        Failure::from(err).into()
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
