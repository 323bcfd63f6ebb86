//! The store's one error type. The GraphQL edge turns each variant into a stable `extensions.code`;
//! database causes are logged there and never echoed to clients.

use sea_orm::{DbErr, RuntimeErr};

use super::filter::FilterError;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    InvalidInput(String),
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    /// The caller's key reaches the resource but not this effect on it (decided inside the write,
    /// against what the transaction sees).
    #[error("{0}")]
    Forbidden(String),
    #[error("database error: {0}")]
    Database(#[source] DbErr),
    /// The database cannot be reached (down, restarting, pool exhausted); worth retrying.
    #[error("the database is unavailable; retry shortly")]
    Unavailable(#[source] DbErr),
    /// PostgreSQL cancelled the statement (statement_timeout or lock_timeout).
    #[error("the request took too long and was cancelled")]
    Timeout(#[source] DbErr),
    /// An input over one of the store's size limits: `limit` names it for clients.
    #[error("{message}")]
    TooLarge {
        limit: &'static str,
        max: usize,
        message: String,
    },
    /// PostgreSQL aborted the transaction to resolve a deadlock (40P01) or a serialization
    /// failure (40001) with a concurrent one. The store's transaction helper retries these; this
    /// reaches a client only after its retries ran out.
    #[error("the request collided with concurrent writes; retry shortly")]
    Contention(#[source] DbErr),
    /// A resource other than the database (the in-process embedder) is saturated; worth
    /// retrying.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Internal(String),
    /// The database does not fit this server's configuration (checked at start-up).
    #[error("{0}")]
    Incompatible(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        StoreError::InvalidInput(msg.into())
    }

    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        StoreError::NotFound {
            what,
            id: id.into(),
        }
    }

    /// The named limit an input went over, and its value (clients see both).
    pub fn limit(&self) -> Option<(&'static str, usize)> {
        match self {
            StoreError::TooLarge { limit, max, .. } => Some((limit, *max)),
            StoreError::Filter(e) => e.limit(),
            _ => None,
        }
    }

    /// Worth running the same transaction again at once.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Contention(_))
    }

    /// SQLSTATE of the database error behind this one, if any.
    pub fn sqlstate(&self) -> Option<String> {
        self.db_err().and_then(sqlstate)
    }

    /// The database error behind this one, if any.
    pub(crate) fn db_err(&self) -> Option<&DbErr> {
        match self {
            StoreError::Database(err)
            | StoreError::Unavailable(err)
            | StoreError::Timeout(err)
            | StoreError::Contention(err) => Some(err),
            _ => None,
        }
    }
}

pub(crate) fn sqlstate(err: &DbErr) -> Option<String> {
    let runtime = match err {
        DbErr::Exec(e) | DbErr::Query(e) | DbErr::Conn(e) => e,
        _ => return None,
    };
    match runtime {
        RuntimeErr::SqlxError(sqlx_err) => match sqlx_err.as_ref() {
            sea_orm::sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// The connection broke or could not be had (as opposed to the statement failing).
fn lost_connection(err: &DbErr) -> bool {
    let (DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e))) = err
    else {
        return false;
    };
    matches!(
        e.as_ref(),
        sea_orm::sqlx::Error::Io(_)
            | sea_orm::sqlx::Error::PoolTimedOut
            | sea_orm::sqlx::Error::PoolClosed
            | sea_orm::sqlx::Error::WorkerCrashed
    )
}

/// The database cannot be reached or is going away: the connection could not be had or broke, or
/// the server is shutting down or starting.
pub(crate) fn is_unavailable(err: &DbErr) -> bool {
    if matches!(err, DbErr::ConnectionAcquire(_) | DbErr::Conn(_)) || lost_connection(err) {
        return true;
    }
    // admin_shutdown, crash_shutdown, cannot_connect_now, connection failures
    matches!(
        sqlstate(err).as_deref(),
        Some("57P01" | "57P02" | "57P03" | "08000" | "08001" | "08003" | "08006")
    )
}

impl From<DbErr> for StoreError {
    /// Constraint violations that a client's input can cause become user errors; the rest stay
    /// internal. Callers that know better (e.g. which row a foreign key names) map before this.
    fn from(err: DbErr) -> Self {
        if is_unavailable(&err) {
            return StoreError::Unavailable(err);
        }
        match sqlstate(&err).as_deref() {
            // query_canceled (statement_timeout), lock_not_available (lock_timeout)
            Some("57014") | Some("55P03") => StoreError::Timeout(err),
            // serialization_failure, deadlock_detected
            Some("40001") | Some("40P01") => StoreError::Contention(err),
            Some("23505") => StoreError::Conflict("a row with the same key already exists".into()),
            // foreign_key_violation: what the row refers to was deleted meanwhile (e.g. the
            // session of a batch of messages); callers that know which row map it to NOT_FOUND.
            Some("23503") => StoreError::Conflict(
                "something this refers to was deleted or changed concurrently".into(),
            ),
            // invalid_row_count_in_limit_clause, invalid_row_count_in_result_offset_clause
            Some("23514") | Some("22001") | Some("22P02") | Some("22021") | Some("2201W")
            | Some("2201X") => {
                StoreError::InvalidInput("a value is out of the allowed range or format".into())
            }
            _ => StoreError::Database(err),
        }
    }
}
