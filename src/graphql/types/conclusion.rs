use crate::graphql::scalars::DateTime;
use async_graphql::{Context, Enum, ID, Json, Object, SimpleObject};
use serde_json::Value;

use super::{Message, Peer, Session};
use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard;
use crate::graphql::loaders::{ConclusionKey, DerivedKey, PeerKey, SessionKey, SourceMessagesKey};
use crate::graphql::prefetch;
use crate::store::conclusion::{self as sc, Level};

/// How a conclusion came to be. Clients state EXPLICIT ones; the deriver draws the others from
/// existing conclusions.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConclusionLevel {
    Explicit,
    Deductive,
    Inductive,
    Contradiction,
}

impl From<Level> for ConclusionLevel {
    fn from(l: Level) -> Self {
        match l {
            Level::Explicit => ConclusionLevel::Explicit,
            Level::Deductive => ConclusionLevel::Deductive,
            Level::Inductive => ConclusionLevel::Inductive,
            Level::Contradiction => ConclusionLevel::Contradiction,
        }
    }
}

impl From<ConclusionLevel> for Level {
    fn from(l: ConclusionLevel) -> Self {
        match l {
            ConclusionLevel::Explicit => Level::Explicit,
            ConclusionLevel::Deductive => Level::Deductive,
            ConclusionLevel::Inductive => Level::Inductive,
            ConclusionLevel::Contradiction => Level::Contradiction,
        }
    }
}

/// Which way a reasoning tree grows from its root.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TreeDirection {
    /// Towards premises: each node's neighbours are the conclusions it cites (its `sources`).
    #[default]
    Sources,
    /// Towards consequences: each node's neighbours are the conclusions citing it (`derived`).
    Derived,
}

impl From<TreeDirection> for sc::TreeDirection {
    fn from(d: TreeDirection) -> Self {
        match d {
            TreeDirection::Sources => sc::TreeDirection::Sources,
            TreeDirection::Derived => sc::TreeDirection::Derived,
        }
    }
}

/// A citation: `from` was derived from (cites) `to`. The meaning is the same in both
/// directions of a tree.
#[derive(SimpleObject)]
pub struct ReasoningEdge {
    /// The citing conclusion.
    pub from: ID,
    /// The cited conclusion (one of `from`'s sourceIds).
    pub to: ID,
}

/// The live conclusions reachable from a root, each once, and the citations between them.
#[derive(SimpleObject)]
pub struct ReasoningTree {
    /// The root first, then by distance from the root (shortest path), then creation time.
    pub nodes: Vec<Conclusion>,
    /// Every citation between two nodes, grouped by citing node in node order, each group in
    /// the citing node's sourceIds order.
    pub edges: Vec<ReasoningEdge>,
    /// True when maxDepth cut the tree (a node at maxDepth has neighbours that are not in it)
    /// or more than maxNodes were reachable. When false, nodes and edges are everything
    /// reachable.
    pub truncated: bool,
}

/// A fact, inference or observation one peer (the observer) holds about another (the observed).
pub struct Conclusion(pub sc::Conclusion);

#[Object]
impl Conclusion {
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    async fn content(&self) -> &str {
        &self.0.content
    }

    /// The peer who holds the conclusion.
    async fn observer_id(&self) -> ID {
        ID(self.0.observer.clone())
    }

    async fn observer(&self, ctx: &Context<'_>) -> ApiResult<Option<Peer>> {
        let access = guard::require(ctx, rule!(Conclusion.observer), On::nothing()).await?;
        let key = PeerKey(self.0.workspace_name.clone(), self.0.observer.clone());
        Ok(access.loader().load_one(key).await?.map(Peer))
    }

    /// The peer the conclusion is about.
    async fn observed_id(&self) -> ID {
        ID(self.0.observed.clone())
    }

    async fn observed(&self, ctx: &Context<'_>) -> ApiResult<Option<Peer>> {
        let access = guard::require(ctx, rule!(Conclusion.observed), On::nothing()).await?;
        let key = PeerKey(self.0.workspace_name.clone(), self.0.observed.clone());
        Ok(access.loader().load_one(key).await?.map(Peer))
    }

    /// The session the conclusion was drawn in, if any.
    async fn session_id(&self) -> Option<ID> {
        self.0.session_name.clone().map(ID)
    }

    async fn session(&self, ctx: &Context<'_>) -> ApiResult<Option<Session>> {
        let access = guard::require(ctx, rule!(Conclusion.session), On::nothing()).await?;
        let Some(name) = &self.0.session_name else {
            return Ok(None);
        };
        let key = SessionKey(self.0.workspace_name.clone(), name.clone());
        Ok(access.loader().load_one(key).await?.map(Session))
    }

    /// User-defined tags; replaced by updateConclusion.
    async fn metadata(&self) -> Json<&Value> {
        Json(&self.0.metadata)
    }

    /// Read-only: EXPLICIT for conclusions clients create, the deriver's level otherwise.
    async fn level(&self) -> ConclusionLevel {
        self.0.level.into()
    }

    /// How many times the conclusion has been derived independently (read-only; 1 for explicit
    /// conclusions).
    async fn times_derived(&self) -> i32 {
        self.0.times_derived
    }

    /// Ids of the conclusions this one was derived from (read-only; null for explicit ones).
    async fn source_ids(&self) -> Option<Vec<ID>> {
        self.0
            .source_ids
            .as_ref()
            .map(|ids| ids.iter().cloned().map(ID).collect())
    }

    /// Ids of the conclusions a dream merged into this one as duplicates (read-only; empty for
    /// most): their counts are in timesDerived, their sources in sourceIds, their messages in
    /// sourceMessages, and whatever cited them cites this one (docs/dreams.md).
    async fn merged_ids(&self) -> Vec<ID> {
        self.0.internal_metadata["merged_from"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .map(|s| ID(s.to_owned()))
            .collect()
    }

    /// The live conclusions this one was derived from, in sourceIds order (deleted ones are
    /// left out). Batched.
    async fn sources(&self, ctx: &Context<'_>) -> ApiResult<Vec<Conclusion>> {
        let access = guard::require(ctx, rule!(Conclusion.sources), On::nothing()).await?;
        let Some(ids) = &self.0.source_ids else {
            return Ok(Vec::new());
        };
        let keys: Vec<ConclusionKey> = ids
            .iter()
            .map(|id| ConclusionKey(self.0.workspace_name.clone(), id.clone()))
            .collect();
        let found = access.loader().load_many(keys.iter().cloned()).await?;
        let list: Vec<sc::Conclusion> = keys
            .iter()
            .filter_map(|k| found.get(k).cloned().flatten())
            .collect();
        prefetch::conclusions(&access, &list, [ctx.look_ahead()]).await?;
        Ok(list.into_iter().map(Conclusion).collect())
    }

    /// The live conclusions derived from this one, oldest first, a page at a time: at most
    /// `first` (1-100, default 20), after the conclusion whose id is `after` (the last one of the
    /// previous page). Batched: `derived` on a whole list of conclusions is one query.
    async fn derived(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<ID>,
    ) -> ApiResult<Vec<Conclusion>> {
        let access = guard::require(ctx, rule!(Conclusion.derived), On::nothing()).await?;
        let page = prefetch::derived_page(first, after.map(|id| id.0))?;
        let key = DerivedKey(self.0.workspace_name.clone(), self.0.id.clone(), page);
        let list = access.loader().load_one(key).await?.unwrap_or_default();
        prefetch::conclusions(&access, &list, [ctx.look_ahead()]).await?;
        Ok(list.into_iter().map(Conclusion).collect())
    }

    /// The messages the deriver drew this conclusion from, in seq order (empty for conclusions
    /// clients state and for derived ones, whose grounds are their `sources`). Batched.
    async fn source_messages(&self, ctx: &Context<'_>) -> ApiResult<Vec<Message>> {
        let access = guard::require(ctx, rule!(Conclusion.sourceMessages), On::nothing()).await?;
        let key = SourceMessagesKey(self.0.workspace_name.clone(), self.0.id.clone());
        let list = access.loader().load_one(key).await?.unwrap_or_default();
        Ok(list.into_iter().map(Message).collect())
    }

    /// The reasoning graph around this conclusion, from one recursive query: every live
    /// conclusion reachable in `direction` within `maxDepth` (1 to 20) steps, each once
    /// (diamonds and cycles included), nearest first and at most `maxNodes` (1 to 10,000) of
    /// them, with the citations between them. `truncated` says either limit cut it.
    async fn reasoning_tree(
        &self,
        ctx: &Context<'_>,
        #[graphql(default)] direction: TreeDirection,
        #[graphql(default = 5)] max_depth: i32,
        #[graphql(default = 2000)] max_nodes: i32,
    ) -> ApiResult<ReasoningTree> {
        let access = guard::require(ctx, rule!(Conclusion.reasoningTree), On::nothing()).await?;
        let tree = access
            .store()
            .reasoning_tree(
                &self.0.workspace_name,
                &self.0.id,
                direction.into(),
                max_depth,
                max_nodes,
            )
            .await?;
        let nodes: Vec<sc::Conclusion> = tree.nodes.into_iter().map(|n| n.conclusion).collect();
        prefetch::conclusions(&access, &nodes, [ctx.look_ahead().field("nodes")]).await?;
        Ok(ReasoningTree {
            nodes: nodes.into_iter().map(Conclusion).collect(),
            edges: tree
                .edges
                .into_iter()
                .map(|e| ReasoningEdge {
                    from: ID(e.from),
                    to: ID(e.to),
                })
                .collect(),
            truncated: tree.truncated,
        })
    }

    async fn created_at(&self) -> DateTime {
        self.0.created_at.into()
    }
}
