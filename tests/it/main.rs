//! Integration tests: GraphQL against a real PostgreSQL with pgvector, one database per test.

mod harness;

mod auth;
mod batching;
mod conclusions;
mod cost;
mod embeddings;
mod filters;
mod frontend;
mod http;
mod limits;
mod messages;
mod migrations;
mod readme;
mod schema_file;
mod search;
mod sessions;
mod subscriptions;
mod survival;
mod transactions;
mod workspaces_peers;
