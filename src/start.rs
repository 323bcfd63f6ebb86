//! Why a command could not start or stopped early: each cause typed, carrying what its message
//! needs (the URL without its password, the address); the binary prints it.

use std::net::SocketAddr;

use crate::auth::EmptySecret;
use crate::embed::EmbedError;
use crate::http::persisted::ManifestError;
use crate::http::{HostsError, OriginsError};
use crate::llm::LlmError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    AuthSecret(#[from] EmptySecret),
    #[error(transparent)]
    Origins(#[from] OriginsError),
    #[error(transparent)]
    Hosts(#[from] HostsError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("HONCHO_LLM=none: the deriver needs an LLM (HONCHO_LLM=openai)")]
    NoLlm,
    #[error(transparent)]
    Embedder(#[from] EmbedError),
    #[error("connecting to {url}: {cause}")]
    Connect { url: String, cause: StoreError },
    #[error("connecting to the read replicas: {0}")]
    Replicas(StoreError),
    #[error("migrating: {0}")]
    Migrate(sea_orm::DbErr),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("listening for events on {url}: {cause}")]
    Events { url: String, cause: StoreError },
    #[error("binding {addr}: {cause}")]
    Bind {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("serving HTTP: {0}")]
    Serve(std::io::Error),
}
