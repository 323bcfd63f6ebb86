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
//! **Kinds:** messages (a seq range per `createMessages`) and conclusions (ids per
//! `createConclusions` or new derived conclusion). Adding one: a [`Notice`] variant naming the
//! rows, a [`Rows`] impl that loads them, an [`Event`] variant, one arm in `dispatch`, and a
//! `publish` call in the writing transaction.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;

use sea_orm::ConnectionTrait;
use sea_orm::sqlx::ConnectOptions as _;
use sea_orm::sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::conclusion::Conclusion;
use super::message::{Message, SeqRange};
use super::{Store, StoreError, StoreResult, stmt};
use crate::retry;

/// The longest wait between two reconnection attempts of the listener.
const RECONNECT_LONGEST_WAIT: Duration = Duration::from_secs(10);

/// The one notification channel of this server.
pub const CHANNEL: &str = "honcho_events";

/// `application_name` of the listener's connection, to find it in `pg_stat_activity`.
pub const LISTENER_APPLICATION_NAME: &str = "honcho-graphql-events";

/// Events buffered per process when no size is configured.
pub const DEFAULT_BUFFER: usize = 1024;

/// What a notification says, serialised as its JSON payload. Unknown kinds (e.g. from a newer
/// server during a rolling deploy) are ignored by receivers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// One `createMessages` batch: the messages of session `s` in workspace `w` with
    /// `seq_in_session` in `from..=to`. Seqs of a batch are contiguous (assigned under the
    /// session's lock), so the range names exactly the batch's rows, in 2 numbers whatever its
    /// size; with names of at most 512 characters the payload stays under 1.2 kB.
    Message {
        w: String,
        s: String,
        from: i64,
        to: i64,
    },
    /// Conclusions created in workspace `w` (a `createConclusions` batch or a new derived
    /// conclusion), by public id: at most 100 ids of 21 characters, under 3.2 kB with the longest
    /// workspace name.
    Conclusion { w: String, ids: Vec<String> },
}

/// Sends `notice` on [`CHANNEL`] as part of `db`'s transaction: delivered at commit, or never.
pub(crate) async fn publish<C: ConnectionTrait>(db: &C, notice: &Notice) -> StoreResult<()> {
    let payload = serde_json::to_string(notice)
        .map_err(|e| StoreError::Internal(format!("serialising an event: {e}")))?;
    db.execute_raw(stmt(
        "SELECT pg_notify($1, $2)",
        [CHANNEL.into(), payload.into()],
    ))
    .await?;
    Ok(())
}

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
    fn release(&self) {
        match self {
            Event::Messages(b) => b.release(),
            Event::Conclusions(b) => b.release(),
            Event::Gap => {}
        }
    }
}

/// What an event names (a seq range, a list of ids) and how its rows are loaded.
pub trait Rows: Send + Sync + 'static {
    type Row: Send + Sync + 'static;
    fn load(&self, store: &Store) -> impl Future<Output = StoreResult<Vec<Self::Row>>> + Send;
}

/// The messages `from..=to` of one session: one `createMessages` batch.
#[derive(Debug)]
pub struct MessageRange {
    pub workspace: String,
    pub session: String,
    pub from: i64,
    pub to: i64,
}

impl Rows for MessageRange {
    type Row = Message;

    /// In `seq_in_session` order.
    async fn load(&self, store: &Store) -> StoreResult<Vec<Message>> {
        let range = SeqRange {
            workspace: self.workspace.clone(),
            session: self.session.clone(),
            from: self.from,
            to: self.to,
        };
        store.messages_in_ranges(&[range]).await
    }
}

/// Conclusions of one workspace by public id.
#[derive(Debug)]
pub struct ConclusionIds {
    pub workspace: String,
    pub ids: Vec<String>,
}

impl Rows for ConclusionIds {
    type Row = Conclusion;

    /// In creation order (a batch's conclusions are created a microsecond apart, in input order);
    /// deleted ones are left out.
    async fn load(&self, store: &Store) -> StoreResult<Vec<Conclusion>> {
        let keys: Vec<(String, String)> = self
            .ids
            .iter()
            .map(|id| (self.workspace.clone(), id.clone()))
            .collect();
        let mut rows = store.conclusions_by_ids(&keys).await?;
        rows.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(rows)
    }
}

pub type MessageBatch = Batch<MessageRange>;
pub type ConclusionBatch = Batch<ConclusionIds>;

/// The rows one committed write created; loaded on first demand, once per process.
///
/// What a batch caches (its rows, the shared state) is kept while the batch is among the last
/// [`RETAINED_BATCHES`] events and then released: the broadcast buffer keeps an event until its
/// slowest receiver has seen it, and a stuck receiver must not pin a buffer's worth of rows. A
/// receiver that gets to a released batch loads it again (one query).
pub struct Batch<N: Rows> {
    names: N,
    cache: Mutex<Cache<N::Row>>,
    loading: tokio::sync::Mutex<()>,
}

struct Cache<R> {
    released: bool,
    rows: Option<Arc<[R]>>,
    shared: Option<Arc<dyn Any + Send + Sync>>,
}

/// Batches whose loaded rows a process keeps (see [`Batch`]).
pub const RETAINED_BATCHES: usize = 64;

impl<N: Rows> std::ops::Deref for Batch<N> {
    type Target = N;

    fn deref(&self) -> &N {
        &self.names
    }
}

impl<N: Rows + std::fmt::Debug> std::fmt::Debug for Batch<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.names.fmt(f)
    }
}

impl<N: Rows> Batch<N> {
    pub fn new(names: N) -> Self {
        Batch {
            names,
            cache: Mutex::new(Cache {
                released: false,
                rows: None,
                shared: None,
            }),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache<N::Row>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// State that every subscriber of this event in this process shares, made by the first that
    /// asks (the GraphQL layer keeps the batch's dataloader here, so nested fields cost one query
    /// per kind per batch, not per subscriber). None if it was made with another type.
    pub fn shared<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Option<Arc<T>> {
        let mut cache = self.cache();
        if let Some(any) = &cache.shared {
            return any.clone().downcast::<T>().ok();
        }
        let made = Arc::new(init());
        if !cache.released {
            cache.shared = Some(made.clone());
        }
        Some(made)
    }

    /// The batch's rows: one query the first time, shared after (callers that ask while it loads
    /// wait for it). A failed load is not kept.
    pub async fn rows(&self, store: &Store) -> StoreResult<Arc<[N::Row]>> {
        if let Some(rows) = &self.cache().rows {
            return Ok(rows.clone());
        }
        let _turn = self.loading.lock().await;
        if let Some(rows) = &self.cache().rows {
            return Ok(rows.clone());
        }
        let rows: Arc<[N::Row]> = self.names.load(store).await?.into();
        let mut cache = self.cache();
        if !cache.released {
            cache.rows = Some(rows.clone());
        }
        Ok(rows)
    }

    /// Drops what the batch caches; later callers load again and nothing is kept.
    pub fn release(&self) {
        let mut cache = self.cache();
        cache.released = true;
        cache.rows = None;
        cache.shared = None;
    }
}

#[derive(Default)]
struct Stats {
    notices: AtomicU64,
    reconnects: AtomicU64,
    listening: AtomicBool,
}

struct Inner {
    tx: broadcast::Sender<Event>,
    stats: Arc<Stats>,
    task: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closes the listener's connection; receivers see the channel close.
        self.task.abort();
    }
}

/// One process's view of the event stream: a dedicated LISTEN connection and a bounded fan-out.
/// Cheap to clone; the listener stops when the last clone is dropped.
#[derive(Clone)]
pub struct EventBus {
    inner: Arc<Inner>,
}

impl EventBus {
    /// Connects the listener to `url` (its own connection, outside the pool) and starts the
    /// fan-out task. `LISTEN` is in effect when this returns: a subscriber that subscribes after
    /// this misses no write committed after its `subscribe`.
    ///
    /// `buffer` is how many events the broadcast channel holds for its slowest receiver.
    pub async fn start(url: &str, buffer: usize) -> StoreResult<EventBus> {
        let opts: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("event listener URL: {e}")))?;
        let opts = opts
            .application_name(LISTENER_APPLICATION_NAME)
            .disable_statement_logging();
        let listener = connect(&opts).await.map_err(listener_error)?;
        let (tx, _) = broadcast::channel(buffer.max(1));
        let stats = Arc::new(Stats::default());
        stats.listening.store(true, Ordering::SeqCst);
        let task = tokio::spawn(run(listener, opts, tx.clone(), stats.clone()));
        Ok(EventBus {
            inner: Arc::new(Inner { tx, stats, task }),
        })
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.tx.subscribe()
    }

    /// Receivers currently subscribed (one per open subscription).
    pub fn subscribers(&self) -> usize {
        self.inner.tx.receiver_count()
    }

    /// Notifications received since start (valid or not).
    pub fn notices_received(&self) -> u64 {
        self.inner.stats.notices.load(Ordering::SeqCst)
    }

    /// Times the listener's connection was re-established.
    pub fn reconnects(&self) -> u64 {
        self.inner.stats.reconnects.load(Ordering::SeqCst)
    }

    /// Whether the listener's connection is up (false while it reconnects).
    pub fn is_listening(&self) -> bool {
        self.inner.stats.listening.load(Ordering::SeqCst)
    }
}

fn listener_error(e: sea_orm::sqlx::Error) -> StoreError {
    StoreError::Database(sea_orm::DbErr::Conn(sea_orm::RuntimeErr::SqlxError(
        Arc::new(e),
    )))
}

/// A listener on its own one-connection pool (never shared with queries), listening on
/// [`CHANNEL`]. The pool lets sqlx reconnect by itself after a plain connection loss.
async fn connect(opts: &PgConnectOptions) -> Result<PgListener, sea_orm::sqlx::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts.clone())
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

async fn run(
    mut listener: PgListener,
    opts: PgConnectOptions,
    tx: broadcast::Sender<Event>,
    stats: Arc<Stats>,
) {
    let mut recent = VecDeque::with_capacity(RETAINED_BATCHES + 1);
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                stats.notices.fetch_add(1, Ordering::SeqCst);
                if let Some(event) = dispatch(&tx, n.payload()) {
                    recent.push_back(event);
                    if recent.len() > RETAINED_BATCHES
                        && let Some(old) = recent.pop_front()
                    {
                        old.release();
                    }
                }
            }
            Ok(None) => {
                // sqlx noticed the loss and has already reconnected and re-listened.
                stats.reconnects.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(
                    "event listener: connection lost and re-established; \
                     notifications sent in between are lost, open subscriptions are ended"
                );
                let _ = tx.send(Event::Gap);
            }
            Err(err) => {
                stats.listening.store(false, Ordering::SeqCst);
                tracing::warn!(error = %err, "event listener: connection failed; reconnecting");
                drop(listener);
                listener = reconnect(&opts).await;
                stats.listening.store(true, Ordering::SeqCst);
                stats.reconnects.fetch_add(1, Ordering::SeqCst);
                tracing::info!(
                    "event listener: listening again; notifications sent in between are lost, \
                     open subscriptions are ended"
                );
                let _ = tx.send(Event::Gap);
            }
        }
    }
}

/// Tries until it succeeds, waiting 50-100 ms first, doubling up to 5-10 s.
async fn reconnect(opts: &PgConnectOptions) -> PgListener {
    let mut waits = retry::backoff(Duration::from_millis(100), RECONNECT_LONGEST_WAIT)
        .without_max_times()
        .build();
    loop {
        let wait = waits.next().unwrap_or(RECONNECT_LONGEST_WAIT);
        tokio::time::sleep(wait).await;
        match connect(opts).await {
            Ok(listener) => return listener,
            Err(err) => tracing::warn!(error = %err, "event listener: reconnect failed"),
        }
    }
}

/// Parses a notice and sends its event; returns the event (to release its cache later).
fn dispatch(tx: &broadcast::Sender<Event>, payload: &str) -> Option<Event> {
    let event = match serde_json::from_str::<Notice>(payload) {
        Ok(Notice::Message { w, s, from, to }) => {
            Event::Messages(Arc::new(Batch::new(MessageRange {
                workspace: w,
                session: s,
                from,
                to,
            })))
        }
        Ok(Notice::Conclusion { w, ids }) => {
            Event::Conclusions(Arc::new(Batch::new(ConclusionIds { workspace: w, ids })))
        }
        Err(err) => {
            tracing::debug!(error = %err, payload, "event listener: ignoring an unknown notice");
            return None;
        }
    };
    // Err only when nobody subscribes, which is fine.
    let _ = tx.send(event.clone());
    Some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_notice_round_trips_and_stays_small() {
        let n = Notice::Message {
            w: "w".repeat(512),
            s: "s".repeat(512),
            from: i64::MAX - 100,
            to: i64::MAX,
        };
        let json = serde_json::to_string(&n).unwrap();
        assert!(json.len() < 1200, "{}", json.len());
        assert!(json.starts_with(r#"{"kind":"message","#), "{json}");
        assert_eq!(serde_json::from_str::<Notice>(&json).unwrap(), n);
    }

    #[test]
    fn unknown_kinds_are_not_notices() {
        assert!(serde_json::from_str::<Notice>(r#"{"kind":"summary","w":"x","ids":[]}"#).is_err());
    }

    #[test]
    fn shared_state_is_made_once_and_dropped_on_release() {
        let b = MessageBatch::new(MessageRange {
            workspace: "w".into(),
            session: "s".into(),
            from: 1,
            to: 2,
        });
        let first = b.shared(|| 1u32).unwrap();
        let again = b.shared(|| 2u32).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(b.shared(|| "other type").is_none());
        b.release();
        assert_eq!(Arc::strong_count(&first), 2, "the batch no longer holds it");
        let after = b.shared(|| 3u32).unwrap();
        assert_eq!(*after, 3);
        assert_eq!(
            *b.shared(|| 4u32).unwrap(),
            4,
            "nothing is kept once released"
        );
    }

    #[test]
    fn a_full_conclusion_batch_fits_a_notification() {
        let n = Notice::Conclusion {
            w: "w".repeat(512),
            ids: (0..100).map(|_| "x".repeat(21)).collect(),
        };
        let json = serde_json::to_string(&n).unwrap();
        assert!(json.len() < 3200, "{}", json.len());
        assert_eq!(serde_json::from_str::<Notice>(&json).unwrap(), n);
    }

}
