//! Integration tests: GraphQL against a real PostgreSQL with pgvector, one database per test.

mod harness;

mod auth;
mod batching;
mod conclusions;
mod connections;
mod cost;
mod deriver;
mod embeddings;
mod fake_llm;
mod filter_sql;
mod filters;
mod frontend;
mod gin_pending;
mod http;
mod limits;
mod llm;
mod messages;
mod migrations;
mod paging;
mod pool;
mod readme;
mod replicas;
mod rest;
mod rest_parity;
mod schema_file;
mod search;
mod sessions;
mod standby;
mod statistics;
mod subscriptions;
mod survival;
mod telemetry;
mod transactions;
mod typed_where;
mod workspaces_peers;
