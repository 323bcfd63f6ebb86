//! The rows an event names, loaded on first demand and shared by every subscriber of the process,
//! and released once the event is old.

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::store::conclusion::Conclusion;
use crate::store::message::{Message, SeqRange};
use crate::store::{Store, StoreResult};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
