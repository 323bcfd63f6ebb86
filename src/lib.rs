//! honcho-graphql: Honcho's memory model over GraphQL, on PostgreSQL + pgvector.

pub mod store;
