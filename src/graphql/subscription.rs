//! Subscriptions: pushed events over WebSocket (`/graphql/ws`), fed by the process's
//! [`EventBus`] (PostgreSQL LISTEN/NOTIFY, so every instance on one database sees every write).
//!
//! A subscription keeps one dataloader for its lifetime (added by [`execute_stream`]). Each event
//! batch carries one more loader, shared by every subscriber of the process: each subscriber
//! prefetches what its selection needs into it (repeats hit its cache), then refills its own
//! loader from it. So nested fields (`peer`, `session`, `context`) resolve as in queries, with rows
//! as fresh as the event, at one statement per kind per batch per process however many subscribe.
//!
//! **Overflow policy.** The bus buffers a fixed number of events per process. A subscriber that
//! falls further behind (its client reads too slowly) does not slow anyone: it skips ahead, and its
//! subscription ends with one error, `extensions.code = EVENTS_MISSED`, `extensions.reason =
//! "lagged"`, `extensions.dropped = N`. The same error with `reason = "listener_reconnected"` ends
//! subscriptions that were open while the listener's connection was down. Either way the client
//! knows it has a hole: it resubscribes, then catches up with `Session.messages` from the last
//! `seqInSession` it saw (a subscriber never gets a silent gap).
//!
//! [`execute_stream`]: super::execute_stream

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_graphql::dataloader::{DataLoader, HashMapCache};
use async_graphql::futures_util::stream::{self, BoxStream, StreamExt};
use async_graphql::{
    Context, Data, ErrorExtensions, Executor, ID, Lookahead, Request, Response, SimpleObject,
    Subscription,
};
use futures::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::error::{ApiError, ApiResult, Code};
use super::guard::{self, Access};
use super::limits::{Exceeded, Limits};
use super::loaders::Loaders;
use super::types::{Conclusion, Message, ReasoningLevel, chat_question, no_llm};
use super::{AppSchema, RequestLoader, loaders, prefetch};
use crate::access::{Field, On, rule};
use crate::dialectic::{Dialectic, DialecticError};
use crate::store::Store;
use crate::store::conclusion::Conclusion as ConclusionRow;
use crate::store::events::{
    Batch, ConclusionBatch, ConclusionIds, Event, EventBus, MessageBatch, MessageRange, Rows,
};
use crate::store::message::Message as MessageRow;

#[derive(Default)]
pub struct SubscriptionRoot;

/// Which messages a `messageCreated` subscription wants.
struct MessageFilter {
    workspace: String,
    session: Option<String>,
    peer: Option<String>,
}

impl MessageFilter {
    fn wants_batch(&self, b: &MessageBatch) -> bool {
        b.workspace == self.workspace && self.session.as_ref().is_none_or(|s| *s == b.session)
    }
}

/// Which conclusions a `conclusionCreated` subscription wants.
struct ConclusionFilter {
    workspace: String,
    observer: Option<String>,
    observed: Option<String>,
}

/// Ends a subscription that cannot promise it saw every event.
fn events_missed(reason: &'static str, dropped: Option<u64>) -> ApiError {
    let message = match dropped {
        Some(n) => format!(
            "subscription fell behind and {n} events were dropped; resubscribe and catch up \
             from the last seqInSession received"
        ),
        None => "the server's event listener reconnected and events may have been missed; \
                 resubscribe and catch up from the last seqInSession received"
            .to_owned(),
    };
    let err = Code::EventsMissed.error(message).0.extend_with(|_, e| {
        e.set("reason", reason);
        if let Some(n) = dropped {
            e.set("dropped", n);
        }
    });
    ApiError(err)
}

#[Subscription]
impl SubscriptionRoot {
    /// Messages created from now on in the workspace, in one session (`sessionId`) and/or by one
    /// author (`peerId`). Within a session they arrive in `seqInSession` order, each once; a batch
    /// rolled back is never seen. A subscription that had to drop events ends with an
    /// `EVENTS_MISSED` error instead of skipping silently.
    async fn message_created(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        session_id: Option<ID>,
        peer_id: Option<ID>,
    ) -> Result<impl Stream<Item = ApiResult<Message>>, ApiError> {
        let filter = MessageFilter {
            workspace: workspace_id.0,
            session: session_id.map(|s| s.0),
            peer: peer_id.map(|p| p.0),
        };
        let field = rule!(SubscriptionRoot.messageCreated);
        let access = guard::require(ctx, field, filter.on()).await?;
        prefetch::check_context_arguments(ctx.field())?;
        deliver(ctx, field, filter, access)
    }

    /// Conclusions created from now on in the workspace (`createConclusions`, and derived
    /// conclusions when first recorded; a reinforcement of an existing one is not a creation),
    /// optionally only those of one observer and/or about one observed peer, in creation order.
    /// Ends with `EVENTS_MISSED` when events had to be dropped, as `messageCreated`.
    async fn conclusion_created(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        observer_id: Option<ID>,
        observed_id: Option<ID>,
    ) -> Result<impl Stream<Item = ApiResult<Conclusion>>, ApiError> {
        let filter = ConclusionFilter {
            workspace: workspace_id.0,
            observer: observer_id.map(|p| p.0),
            observed: observed_id.map(|p| p.0),
        };
        let field = rule!(SubscriptionRoot.conclusionCreated);
        let access = guard::require(ctx, field, filter.on()).await?;
        deliver(ctx, field, filter, access)
    }

    /// `Peer.chat`, streamed: the answer to `query` about the peer (or about `target`, from the
    /// peer's point of view) in pieces as the configured LLM writes them; their concatenation
    /// is `Peer.chat`'s answer, and no piece comes when the model had nothing to say. The
    /// subscription completes with the answer. A bad question, an unknown peer or session, or a
    /// model that cannot be asked is the subscription's error; a model failing after it began
    /// ends the subscription with a `SERVICE_UNAVAILABLE` error after the pieces already sent.
    /// Completing or cancelling the subscription stops the model's request.
    #[allow(clippy::too_many_arguments)]
    async fn peer_chat(
        &self,
        ctx: &Context<'_>,
        workspace_id: ID,
        peer_id: ID,
        query: String,
        target: Option<ID>,
        session_id: Option<ID>,
        #[graphql(default)] reasoning_level: ReasoningLevel,
        scope: Option<ID>,
    ) -> Result<impl Stream<Item = ApiResult<ChatPiece>>, ApiError> {
        let on = On::peer(&workspace_id, &peer_id);
        let access = guard::require(ctx, rule!(SubscriptionRoot.peerChat), on).await?;
        let dialectic = ctx.data_opt::<Dialectic>().ok_or_else(no_llm)?;
        let mut question = chat_question(
            &workspace_id,
            &peer_id,
            &query,
            target,
            session_id,
            reasoning_level,
        );
        let within = access.recall_scope(scope.as_deref().map(|s| s.as_str()))?;
        crate::dialectic::confine(access.store(), &mut question, within.as_deref()).await?;
        let pieces = dialectic.answer_stream(access.store(), &question).await?;
        Ok(pieces.map(|piece| match piece {
            Ok(content) => Ok(ChatPiece { content }),
            Err(e) => Err(DialecticError::from(e).into()),
        }))
    }
}

/// One piece of a streamed chat answer.
#[derive(SimpleObject)]
pub struct ChatPiece {
    /// The text, in order after the pieces before it; never empty.
    pub content: String,
}

/// What one subscription field listens for: which events' batches, which of their rows, and how
/// the rows' nested fields are prefetched. [`deliver`] is the one event loop for all of them.
trait Feed: Send + Sync {
    type Names: Rows<Row = Self::Row>;
    type Row: Clone + Send + Sync + 'static;
    type Item: Send;

    /// The event's batch when it is of this feed's kind and may hold rows it wants.
    fn batch(&self, event: Event) -> Option<Arc<Batch<Self::Names>>>;
    fn wants(&self, row: &Self::Row) -> bool;
    /// What the subscription reaches, for its authorization rule.
    fn on(&self) -> On<'_>;
    fn prefetch<'a>(
        loader: &'a RequestLoader,
        rows: &'a [Self::Row],
        selection: Lookahead<'a>,
    ) -> impl Future<Output = ApiResult<()>> + Send + 'a;
    fn item(row: Self::Row) -> Self::Item;
}

impl Feed for MessageFilter {
    type Names = MessageRange;
    type Row = MessageRow;
    type Item = Message;

    fn batch(&self, event: Event) -> Option<Arc<MessageBatch>> {
        match event {
            Event::Messages(b) if self.wants_batch(&b) => Some(b),
            _ => None,
        }
    }

    fn wants(&self, m: &MessageRow) -> bool {
        self.peer.as_ref().is_none_or(|p| *p == m.peer_name)
    }

    fn on(&self) -> On<'_> {
        On {
            workspace: Some(&self.workspace),
            peer: self.peer.as_deref(),
            session: self.session.as_deref(),
            scope: None,
        }
    }

    async fn prefetch(
        loader: &RequestLoader,
        rows: &[MessageRow],
        selection: Lookahead<'_>,
    ) -> ApiResult<()> {
        prefetch::messages_with(loader, rows, &[selection]).await
    }

    fn item(row: MessageRow) -> Message {
        Message(row)
    }
}

impl Feed for ConclusionFilter {
    type Names = ConclusionIds;
    type Row = ConclusionRow;
    type Item = Conclusion;

    fn batch(&self, event: Event) -> Option<Arc<ConclusionBatch>> {
        match event {
            Event::Conclusions(b) if b.workspace == self.workspace => Some(b),
            _ => None,
        }
    }

    fn wants(&self, c: &ConclusionRow) -> bool {
        c.workspace_name == self.workspace
            && self.observer.as_ref().is_none_or(|p| *p == c.observer)
            && self.observed.as_ref().is_none_or(|p| *p == c.observed)
    }

    fn on(&self) -> On<'_> {
        On::workspace(&self.workspace)
    }

    fn prefetch<'a>(
        loader: &'a RequestLoader,
        rows: &'a [ConclusionRow],
        selection: Lookahead<'a>,
    ) -> impl Future<Output = ApiResult<()>> + Send + 'a {
        prefetch::conclusions_with(loader, rows, [selection])
    }

    fn item(row: ConclusionRow) -> Conclusion {
        Conclusion(row)
    }
}

/// The event loop of a subscription: the feed's rows of every batch from now on, in order, their
/// nested fields prefetched; ends with `EVENTS_MISSED` when events were lost.
fn deliver<'a, 'c: 'a, F: Feed + 'a>(
    ctx: &'a Context<'c>,
    field: Field,
    feed: F,
    access: Access<'c>,
) -> ApiResult<impl Stream<Item = ApiResult<F::Item>> + 'a> {
    let bus = ctx
        .data_opt::<EventBus>()
        .ok_or_else(|| Code::Internal.error("subscriptions are not enabled on this server"))?;
    let store = access.store().clone();
    let loader = access.loader();
    // Subscribe now, not on the stream's first poll: events from here on are ours.
    let mut rx = bus.subscribe();
    Ok(async_stream::stream! {
        loop {
            let event = match rx.recv().await {
                Ok(Event::Gap) => {
                    yield Err(events_missed("listener_reconnected", None));
                    break;
                }
                Ok(event) => event,
                Err(RecvError::Lagged(n)) => {
                    yield Err(events_missed("lagged", Some(n)));
                    break;
                }
                Err(RecvError::Closed) => break,
            };
            let Some(batch) = feed.batch(event) else {
                continue;
            };
            let rows: Vec<F::Row> = match batch.rows(&store).await {
                Ok(rows) => rows.iter().filter(|r| feed.wants(r)).cloned().collect(),
                Err(err) => {
                    yield Err(err.into());
                    break;
                }
            };
            if rows.is_empty() {
                continue;
            }
            // Nested fields: the batch's loader is warmed once per process, one subscriber at a
            // time (the first runs the queries its selection needs, the rest mostly hit the
            // cache), then copied into this subscription's loader. Earlier items are fully
            // resolved before the stream is polled again, so replacing its cache is safe.
            let Some(shared) = batch.shared(|| BatchLoader::new(&store)) else {
                yield Err(Code::Internal.error("event batch state of another type"));
                break;
            };
            let warmed = {
                let _turn = shared.turn.lock().await;
                F::prefetch(&shared.loader, &rows, ctx.look_ahead()).await
            };
            if let Err(err) = warmed {
                yield Err(err);
                break;
            }
            loaders::refill_from(loader, &shared.loader).await;
            for row in rows {
                // Again for each event: a key's scope can change while it listens (a peer
                // leaves the session).
                if let Err(err) = guard::require(ctx, field, feed.on()).await {
                    yield Err(err);
                    return;
                }
                yield Ok(F::item(row));
            }
        }
    })
}

/// The loader of one event batch, shared by the process's subscribers; `turn` makes its warm-up
/// single-flight, so a key is fetched once however many subscribers want it at the same instant.
struct BatchLoader {
    loader: RequestLoader,
    turn: tokio::sync::Mutex<()>,
}

impl BatchLoader {
    fn new(store: &Store) -> Self {
        BatchLoader {
            // async-graphql's 1 ms window is kept here, unlike a request's loader: subscribers
            // resolve on tasks of their own, and the window is what gathers their keys into one
            // batch.
            loader: DataLoader::with_cache(
                Loaders::new(store.clone()),
                tokio::spawn,
                HashMapCache::default(),
            ),
            turn: tokio::sync::Mutex::new(()),
        }
    }
}

/// The `connection_init` payload of a WebSocket connection (an object, or null when none was
/// sent), kept as connection data for every operation on it.
#[derive(Clone, Debug, Default)]
pub struct ConnectionInit(pub serde_json::Value);

/// Authenticates the `connection_init` payload (`{"Authorization": "Bearer <key>"}`) and keeps
/// the caller and the payload as connection data. A missing or bad key does not refuse the
/// connection: with auth on, its guarded fields answer UNAUTHENTICATED, as over HTTP. The
/// connection's operations count against its key in `per_key`, its server's table.
/// Also answers when the connection's key expires (the transport closes the socket then).
pub fn connection_data(
    schema: &AppSchema,
    payload: serde_json::Value,
    per_key: &OpenPerKey,
) -> (Data, Option<chrono::DateTime<chrono::Utc>>) {
    let caller = super::authenticate_connection_init(schema, &payload);
    let expires_at = caller.expires_at();
    let mut data = Data::default();
    // Only an authenticated key has operations counted against it: with auth off every client
    // would share one count.
    let key = caller
        .principal()
        .is_ok()
        .then(|| payload.get("Authorization").and_then(|v| v.as_str()))
        .flatten()
        .filter(|_| {
            schema
                .data::<crate::auth::Auth>()
                .is_some_and(|a| a.enabled())
        })
        .map(str::to_owned);
    data.insert(caller);
    data.insert(OpenOperations {
        on_connection: Arc::default(),
        key,
        per_key: per_key.clone(),
    });
    data.insert(ConnectionInit(payload));
    (data, expires_at)
}

/// The operations open on one WebSocket, and the key they also count against. Fan-out within a
/// socket is quadratic in its subscriptions (20,000 took 91 s to deliver one event), so both are
/// capped ([`Limits`]).
pub struct OpenOperations {
    on_connection: Arc<AtomicUsize>,
    key: Option<String>,
    per_key: OpenPerKey,
}

/// The operations open per key on one server, over all its sockets. The server's router makes
/// one, so that two servers in one process (or two routers on one schema) count apart.
#[derive(Clone, Default)]
pub struct OpenPerKey(Arc<Mutex<HashMap<String, usize>>>);

impl OpenPerKey {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One open operation; dropping it (the stream ended or was stopped) frees its place.
struct Slot {
    on_connection: Arc<AtomicUsize>,
    key: Option<(OpenPerKey, String)>,
}

impl OpenOperations {
    fn open(&self, limits: &Limits) -> Result<Slot, Exceeded> {
        let max = limits.max_subscriptions_per_connection;
        let taken = self
            .on_connection
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(Exceeded::SubscriptionsPerConnection { max });
        }
        // Dropped on the way out when the key is over its cap, giving the place back.
        let mut slot = Slot {
            on_connection: self.on_connection.clone(),
            key: None,
        };
        let Some(key) = &self.key else {
            return Ok(slot);
        };
        let mut open = self.per_key.lock();
        let n = open.entry(key.clone()).or_default();
        if *n >= limits.max_subscriptions_per_key {
            return Err(Exceeded::SubscriptionsPerKey {
                max: limits.max_subscriptions_per_key,
            });
        }
        *n += 1;
        slot.key = Some((self.per_key.clone(), key.clone()));
        Ok(slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.on_connection.fetch_sub(1, Ordering::SeqCst);
        if let Some((per_key, key)) = &self.key {
            let mut open = per_key.lock();
            if let Some(n) = open.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    open.remove(key);
                }
            }
        }
    }
}

/// The schema as an [`Executor`] whose every operation gets its own loader, for the WebSocket
/// transport (the equivalent of [`super::execute`] for HTTP).
#[derive(Clone)]
pub struct LoaderExecutor(pub AppSchema);

impl Executor for LoaderExecutor {
    async fn execute(&self, request: Request) -> Response {
        super::execute(&self.0, request).await
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        let open = session_data
            .as_deref()
            .and_then(|d| d.get(&TypeId::of::<OpenOperations>()))
            .and_then(|o| o.downcast_ref::<OpenOperations>());
        let defaults = Limits::default();
        let limits = self.0.data::<Limits>().unwrap_or(&defaults);
        let slot = match open.map(|o| o.open(limits)).transpose() {
            Ok(slot) => slot,
            Err(exceeded) => {
                let refusal = super::refusal(exceeded);
                return stream::once(async move { refusal }).boxed();
            }
        };
        super::execute_stream(&self.0, request, session_data)
            .map(move |response| {
                let _open = &slot;
                response
            })
            .boxed()
    }
}
