//! Dataloaders: every nested lookup of a request is collected and answered with one statement per
//! kind, so a list of N items never costs N round trips. Each request has its own loader
//! (`graphql::request_loader`) whose cache lives as long as the request: a key asked for twice in
//! one response is loaded once, and nothing is shared between requests, so no write is ever hidden.

use std::collections::HashMap;

use async_graphql::dataloader::Loader;

use super::error::ApiError;
use crate::store::Store;
use crate::store::conclusion::Conclusion;
use crate::store::message::{Message, SeqRange};
use crate::store::peer::Peer;
use crate::store::session::{Session, SessionPeer};

pub struct Loaders {
    store: Store,
}

impl Loaders {
    pub fn new(store: Store) -> Self {
        Loaders { store }
    }

    /// The store the loaders read (for a lookup no loader batches).
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// (workspace, peer name)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerKey(pub String, pub String);

/// (workspace, session name)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey(pub String, pub String);

/// Active members of (workspace, session name).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MembersKey(pub String, pub String);

/// Messages of one session with seq in a range.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeKey(pub SeqRange);

/// Replaces the cache of `own` with the rows `shared` holds, kind by kind. A subscription keeps one
/// loader for its lifetime and, before each event batch, refills it from the batch's loader
/// (warmed once per process for all subscribers): nested fields read fresh rows without a query
/// per subscriber, and a subscription's cache never holds more than one batch.
/// **A new key kind must be added here.**
pub async fn refill_from(own: &super::RequestLoader, shared: &super::RequestLoader) {
    macro_rules! refill {
        ($($kind:ty),*) => {$(
            own.clear::<$kind>();
            own.feed_many(shared.get_cached_values::<$kind>()).await;
        )*};
    }
    refill!(
        PeerKey,
        SessionKey,
        MembersKey,
        RangeKey,
        ConclusionKey,
        DerivedKey,
        SourceMessagesKey
    );
}

impl Loader<PeerKey> for Loaders {
    type Value = Peer;
    type Error = ApiError;

    async fn load(&self, keys: &[PeerKey]) -> Result<HashMap<PeerKey, Peer>, ApiError> {
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.0.clone(), k.1.clone())).collect();
        let rows = self.store.peers_by_keys(&pairs).await?;
        Ok(rows
            .into_iter()
            .map(|p| (PeerKey(p.workspace_name.clone(), p.name.clone()), p))
            .collect())
    }
}

impl Loader<SessionKey> for Loaders {
    type Value = Session;
    type Error = ApiError;

    async fn load(&self, keys: &[SessionKey]) -> Result<HashMap<SessionKey, Session>, ApiError> {
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.0.clone(), k.1.clone())).collect();
        let rows = self.store.sessions_by_keys(&pairs).await?;
        Ok(rows
            .into_iter()
            .map(|s| (SessionKey(s.workspace_name.clone(), s.name.clone()), s))
            .collect())
    }
}

impl Loader<MembersKey> for Loaders {
    type Value = Vec<SessionPeer>;
    type Error = ApiError;

    async fn load(
        &self,
        keys: &[MembersKey],
    ) -> Result<HashMap<MembersKey, Vec<SessionPeer>>, ApiError> {
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.0.clone(), k.1.clone())).collect();
        let rows = self.store.members_by_sessions(&pairs).await?;
        let mut out: HashMap<MembersKey, Vec<SessionPeer>> =
            keys.iter().map(|k| (k.clone(), Vec::new())).collect();
        for m in rows {
            if let Some(list) = out.get_mut(&MembersKey(
                m.workspace_name.clone(),
                m.session_name.clone(),
            )) {
                list.push(m);
            }
        }
        Ok(out)
    }
}

impl Loader<RangeKey> for Loaders {
    type Value = Vec<Message>;
    type Error = ApiError;

    async fn load(&self, keys: &[RangeKey]) -> Result<HashMap<RangeKey, Vec<Message>>, ApiError> {
        let ranges: Vec<SeqRange> = keys.iter().map(|k| k.0.clone()).collect();
        let rows = self.store.messages_in_ranges(&ranges).await?;
        // Rows arrive sorted by (workspace, session, seq); hand each range its slice.
        let mut by_session: HashMap<(&str, &str), Vec<&Message>> = HashMap::new();
        for m in &rows {
            by_session
                .entry((m.workspace_name.as_str(), m.session_name.as_str()))
                .or_default()
                .push(m);
        }
        Ok(keys
            .iter()
            .map(|k| {
                let r = &k.0;
                let msgs = by_session
                    .get(&(r.workspace.as_str(), r.session.as_str()))
                    .map(|ms| {
                        ms.iter()
                            .filter(|m| (r.from..=r.to).contains(&m.seq_in_session))
                            .map(|m| (*m).clone())
                            .collect()
                    })
                    .unwrap_or_default();
                (k.clone(), msgs)
            })
            .collect())
    }
}

/// (workspace, conclusion id). The value is `None` for an absent or deleted conclusion, so that
/// the absence is cached too and a deleted source is looked up once per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConclusionKey(pub String, pub String);

/// One page of the live conclusions citing (workspace, conclusion id), oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DerivedKey(pub String, pub String, pub DerivedPage);

/// `derived(first, after)`: at most `first` conclusions, after the one with id `after`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DerivedPage {
    pub first: u64,
    pub after: Option<String>,
}

impl Loader<ConclusionKey> for Loaders {
    type Value = Option<Conclusion>;
    type Error = ApiError;

    async fn load(
        &self,
        keys: &[ConclusionKey],
    ) -> Result<HashMap<ConclusionKey, Option<Conclusion>>, ApiError> {
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.0.clone(), k.1.clone())).collect();
        let rows = self.store.conclusions_by_ids(&pairs).await?;
        let mut out: HashMap<ConclusionKey, Option<Conclusion>> =
            keys.iter().map(|k| (k.clone(), None)).collect();
        for c in rows {
            out.insert(
                ConclusionKey(c.workspace_name.clone(), c.id.clone()),
                Some(c),
            );
        }
        Ok(out)
    }
}

impl Loader<DerivedKey> for Loaders {
    type Value = Vec<Conclusion>;
    type Error = ApiError;

    async fn load(
        &self,
        keys: &[DerivedKey],
    ) -> Result<HashMap<DerivedKey, Vec<Conclusion>>, ApiError> {
        let mut out: HashMap<DerivedKey, Vec<Conclusion>> =
            keys.iter().map(|k| (k.clone(), Vec::new())).collect();
        // One statement per distinct page: the keys of one field share theirs.
        let mut pages: HashMap<&DerivedPage, Vec<(String, String)>> = HashMap::new();
        for k in keys {
            pages
                .entry(&k.2)
                .or_default()
                .push((k.0.clone(), k.1.clone()));
        }
        for (page, pairs) in pages {
            let rows = self
                .store
                .derived_by_source_ids(&pairs, page.first, page.after.as_deref())
                .await?;
            // Rows arrive oldest first, each with the key it was found for.
            for (source, c) in rows {
                let key = DerivedKey(c.workspace_name.clone(), source, page.clone());
                if let Some(list) = out.get_mut(&key) {
                    list.push(c);
                }
            }
        }
        Ok(out)
    }
}

/// The messages (workspace, conclusion id) was drawn from, in seq order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceMessagesKey(pub String, pub String);

impl Loader<SourceMessagesKey> for Loaders {
    type Value = Vec<Message>;
    type Error = ApiError;

    async fn load(
        &self,
        keys: &[SourceMessagesKey],
    ) -> Result<HashMap<SourceMessagesKey, Vec<Message>>, ApiError> {
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.0.clone(), k.1.clone())).collect();
        let mut found = self.store.source_messages(&pairs).await?;
        Ok(keys
            .iter()
            .map(|k| {
                let list = found
                    .remove(&(k.0.clone(), k.1.clone()))
                    .unwrap_or_default();
                (k.clone(), list)
            })
            .collect())
    }
}
