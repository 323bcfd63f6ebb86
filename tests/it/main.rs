//! Integration tests: GraphQL against a real PostgreSQL with pgvector, one database per test.

mod harness;

mod auth;
mod batching;
mod embeddings;
mod filters;
mod http;
mod messages;
mod migrations;
mod schema_file;
mod sessions;
mod workspaces_peers;
