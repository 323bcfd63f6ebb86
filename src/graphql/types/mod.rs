//! GraphQL object types, each a thin wrapper over a store row.

pub mod conclusion;
pub mod deriver;
pub mod erasure;
pub mod export;
pub mod filter;
pub mod message;
mod peer;
pub mod scope;
pub mod search;
mod session;
pub mod summary;
pub mod webhook;
mod workspace;

pub use conclusion::Conclusion;
pub use message::Message;
pub use peer::{Peer, ReasoningLevel};
pub(crate) use peer::{chat_question, no_llm};
pub use scope::Scope;
pub use session::{Session, SessionPeer};
pub use workspace::Workspace;
