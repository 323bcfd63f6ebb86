//! One SeaORM entity per table. Vector and tsvector columns are left out on purpose: no read path
//! needs them back, and selecting 384 floats per row would make every list pay for search. The
//! store writes and queries them with SQL of its own.

pub mod conclusion;
pub mod erasure_job;
pub mod message;
pub mod peer;
pub mod scope;
pub mod scope_session;
pub mod session;
pub mod session_peer;
pub mod workspace;
