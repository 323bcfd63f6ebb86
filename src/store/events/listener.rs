//! The [`EventBus`]: one `LISTEN` connection per process, a task that turns notices into
//! [`Event`]s and fans them out, and the reconnect after a lost connection.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use backon::BackoffBuilder;
use sea_orm::sqlx::ConnectOptions as _;
use sea_orm::sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::Event;
use super::batch::{Batch, ConclusionIds, MessageRange, RETAINED_BATCHES};
use super::notice::{CHANNEL, Notice};
use crate::retry;
use crate::store::{StoreError, StoreResult};

/// `application_name` of the listener's connection, to find it in `pg_stat_activity`.
pub const LISTENER_APPLICATION_NAME: &str = "honcho-graphql-events";

/// Events buffered per process when no size is configured.
pub const DEFAULT_BUFFER: usize = 1024;

/// The longest wait between two reconnection attempts of the listener.
const RECONNECT_LONGEST_WAIT: Duration = Duration::from_secs(10);

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
    let mut recent: VecDeque<Event> = VecDeque::with_capacity(RETAINED_BATCHES + 1);
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                stats.notices.fetch_add(1, Ordering::SeqCst);
                if let Ok(Notice::Erased { w }) = serde_json::from_str::<Notice>(n.payload()) {
                    tracing::debug!(workspace = %w, "event listener: erasure; cached rows dropped");
                    // Cached rows of any workspace go: cheap, and a batch's workspace is not
                    // worth a lookup per kind.
                    for event in recent.drain(..) {
                        event.release();
                    }
                    continue;
                }
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
        // Handled by `run` before it dispatches.
        Ok(Notice::Erased { .. }) => return None,
        Err(err) => {
            tracing::debug!(error = %err, payload, "event listener: ignoring an unknown notice");
            return None;
        }
    };
    // Err only when nobody subscribes, which is fine.
    let _ = tx.send(event.clone());
    Some(event)
}
