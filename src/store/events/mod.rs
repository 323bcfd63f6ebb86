//! Change events across server instances, through PostgreSQL LISTEN/NOTIFY.
//!
//! **Publishing.** A write calls [`publish`] inside its own transaction. PostgreSQL delivers a
//! notification only if that transaction commits, at commit, and in commit order; a rolled-back
//! write emits nothing. The payload names rows (a seq range, ids), never carries them, so it stays
//! far below PostgreSQL's 8000-byte limit whatever the content.
//!
//! **Receiving.** Each server process runs one [`EventBus`]: one dedicated connection that
//! `LISTEN`s on [`CHANNEL`] and a background task that parses each notice into an [`Event`] and
//! fans it out through a bounded tokio broadcast channel. Sending never waits for receivers, so a
//! slow subscriber slows neither writers nor other subscribers; a receiver that falls more than
//! the buffer behind is told how many events it lost (tokio's `Lagged`), and the subscription
//! layer ends it (see `graphql::subscription`).
//!
//! **Loading.** Subscribers filter events by their ids alone and load rows only for events they
//! want, through [`Batch::rows`]: the first subscriber to ask runs one query for the batch,
//! every other subscriber of this process shares its result. [`Batch::shared`] holds what
//! the layer above shares the same way (the GraphQL layer's dataloader for nested fields). Both
//! are released once the batch is [`RETAINED_BATCHES`] events old, so memory stays bounded even
//! when a stuck subscriber keeps old events in the broadcast buffer.
//!
//! **Reconnecting.** When the listener's connection drops, the task reconnects by itself (with
//! exponential backoff and jitter, 100 ms up to 10 s) and re-`LISTEN`s. Notifications sent while
//! no connection was listening are gone for good (PostgreSQL queues them only for listening
//! sessions), so after every reconnect the bus sends [`Event::Gap`] and subscribers that were open
//! end with an error telling the client to resubscribe and catch up from its last seq.
//!
//! The three parts, one module each: [`notice`] (what a write publishes, and publishing it),
//! [`batch`] (the rows an event names, loaded once per process) and [`listener`] (the
//! [`EventBus`]: the `LISTEN` connection, its reconnects, the fan-out).
//!
//! **Kinds:** messages (a seq range per `createMessages`) and conclusions (ids per
//! `createConclusions` or new derived conclusion). An erasure publishes `Erased` instead, which
//! reaches no subscriber: each process drops the rows its recent events cached (docs/erasure.md).
//! Adding a kind: a [`Notice`] variant naming the
//! rows, a [`Rows`] impl that loads them, an [`Event`] variant, one arm in `listener::dispatch`, and a
//! `publish` call in the writing transaction.

mod batch;
mod listener;
mod notice;

use std::sync::Arc;

pub use batch::{
    Batch, ConclusionBatch, ConclusionIds, MessageBatch, MessageRange, RETAINED_BATCHES, Rows,
};
pub use listener::{DEFAULT_BUFFER, EventBus, LISTENER_APPLICATION_NAME};
pub(crate) use notice::publish;
pub use notice::{CHANNEL, Notice};

/// What the bus hands to subscribers.
#[derive(Clone, Debug)]
pub enum Event {
    Messages(Arc<MessageBatch>),
    Conclusions(Arc<ConclusionBatch>),
    /// The listener's connection was lost and is back: notifications committed in between were
    /// not received, and nobody can tell which.
    Gap,
}

impl Event {
    /// Drops what the event's batch caches (see [`Batch`]).
    pub(super) fn release(&self) {
        match self {
            Event::Messages(b) => b.release(),
            Event::Conclusions(b) => b.release(),
            Event::Gap => {}
        }
    }
}
