use crate::graphql::scalars::DateTime;
use crate::graphql::types::filter::{ConclusionWhere, MessageWhere, SessionWhere, filter_json};
use async_graphql::{Context, Enum, ID, Json, Object};
use serde_json::{Value, json};

use super::search::{self, SearchArgs, SearchResult};
use super::{Conclusion, Message, Session, message};
use crate::access::{On, rule};
use crate::dialectic::representation::{self, DEFAULT_MAX_CONCLUSIONS, Recall};
use crate::dialectic::{self, Dialectic, Question};
use crate::graphql::connection::{Conn, SortOrder, connection, slice};
use crate::graphql::error::{ApiError, ApiResult, Code};
use crate::graphql::guard;
use crate::graphql::prefetch;
use crate::store::message::MessageScope;

pub struct Peer(pub crate::store::peer::Peer);

/// Who wrote a card entry.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardOrigin {
    /// Written through `PUT .../card` or MCP's `set_peer_card`; the deriver never changes it.
    Client,
    /// Kept by the deriver from the conclusions it cites.
    Deriver,
}

/// One line of a peer card.
pub struct PeerCardEntry(pub crate::store::peer_card::CardEntry);

#[Object]
impl PeerCardEntry {
    async fn content(&self) -> &str {
        &self.0.content
    }

    async fn origin(&self) -> CardOrigin {
        match self.0.origin {
            crate::store::peer_card::CardOrigin::Client => CardOrigin::Client,
            crate::store::peer_card::CardOrigin::Deriver => CardOrigin::Deriver,
        }
    }

    /// The live conclusions a deriver entry came from (none for a client's).
    async fn source_ids(&self) -> Vec<ID> {
        self.0.conclusion_ids.iter().cloned().map(ID).collect()
    }
}

#[Object]
impl Peer {
    async fn id(&self) -> ID {
        ID(self.0.name.clone())
    }

    async fn workspace_id(&self) -> ID {
        ID(self.0.workspace_name.clone())
    }

    async fn metadata(&self) -> Json<&Value> {
        Json(&self.0.metadata)
    }

    async fn configuration(&self) -> Json<&Value> {
        Json(&self.0.configuration)
    }

    async fn created_at(&self) -> DateTime {
        self.0.created_at.into()
    }

    /// This peer's card of `target` (of itself when absent): the client's entries, then those
    /// the deriver keeps, each citing its conclusions (docs/summaries.md#peer-cards). Null when
    /// it has none.
    async fn card(
        &self,
        ctx: &Context<'_>,
        target: Option<ID>,
    ) -> ApiResult<Option<Vec<PeerCardEntry>>> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.card), on).await?;
        let target = target.map_or_else(|| self.0.name.clone(), |t| t.0);
        let card = access
            .store()
            .peer_card_entries(&self.0.workspace_name, &self.0.name, &target)
            .await?;
        Ok(card.map(|entries| entries.into_iter().map(PeerCardEntry).collect()))
    }

    /// Sessions this peer is or was a member of.
    #[allow(clippy::too_many_arguments)]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<SessionWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Session>> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.sessions), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_peer_sessions(
                &self.0.workspace_name,
                &self.0.name,
                &filters,
                order.into(),
                slice,
            )
            .await?;
        Ok(connection(page, Session))
    }

    /// Hybrid search over the messages this peer wrote: semantic (with an embedder) and full-text
    /// rankings, both filtered by `filters`, fused by Reciprocal Rank Fusion. `limit` 1..100;
    /// `includeContext` adds snippets of `contextWindow` (0..10) messages around the matches.
    #[allow(clippy::too_many_arguments)]
    async fn search(
        &self,
        ctx: &Context<'_>,
        query: String,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<MessageWhere>,
        #[graphql(default_with = "Some(10)")] limit: Option<i32>,
        #[graphql(default_with = "Some(false)")] include_context: Option<bool>,
        #[graphql(default_with = "Some(2)")] context_window: Option<i32>,
        scope: Option<ID>,
    ) -> ApiResult<SearchResult> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.search), on).await?;
        search::search(
            ctx,
            &access,
            MessageScope::Peer(&self.0.workspace_name, &self.0.name),
            SearchArgs {
                query,
                filters,
                where_,
                limit,
                include_context,
                context_window,
                scope,
            },
        )
        .await
    }

    /// Answers `query` about this peer, or about `target` from this peer's point of view, with
    /// the configured LLM, from memory: the peer's cards, its conclusions about the one asked
    /// about (the newest, and those nearest the question), that peer's messages matching the
    /// question, and `sessionId`'s latest turns (Honcho's dialectic). Null when the model had
    /// nothing to say. Without an LLM (`HONCHO_LLM=none`), or when it fails,
    /// `SERVICE_UNAVAILABLE`.
    async fn chat(
        &self,
        ctx: &Context<'_>,
        query: String,
        target: Option<ID>,
        session_id: Option<ID>,
        #[graphql(default)] reasoning_level: ReasoningLevel,
        scope: Option<ID>,
    ) -> ApiResult<Option<String>> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.chat), on).await?;
        let dialectic = ctx.data_opt::<Dialectic>().ok_or_else(no_llm)?;
        let mut question = chat_question(
            &self.0.workspace_name,
            &self.0.name,
            &query,
            target,
            session_id,
            reasoning_level,
        );
        let within = access.recall_scope(scope.as_deref().map(|s| s.as_str()))?;
        dialectic::confine(access.store(), &mut question, within.as_deref()).await?;
        Ok(dialectic.answer(access.store(), &question).await?)
    }

    /// Messages this peer wrote, in every session, in the order they were written.
    #[allow(clippy::too_many_arguments)]
    async fn messages(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<MessageWhere>,
        #[graphql(default)] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Message>> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.messages), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let scope = MessageScope::Peer(&self.0.workspace_name, &self.0.name);
        message::page(ctx, &access, scope, &filters, order, slice).await
    }

    /// What this peer holds about `target` (itself when absent) as text, Honcho v3.0.12's
    /// representation (docs/rest.md): of `maxConclusions` (25, at most 100), `searchTopK` (a
    /// third) go to the conclusions that best answer `searchQuery` (hybrid search, none beyond
    /// `searchMaxDistance`, 0 to 1 of cosine distance), a share to the most derived when
    /// `includeMostFrequent`, the rest to the newest; search hits lead their level. Only
    /// conclusions drawn in `sessionId`, or in `scope`'s sessions, when given. BAD_USER_INPUT
    /// for out-of-range values.
    #[allow(clippy::too_many_arguments)]
    async fn representation(
        &self,
        ctx: &Context<'_>,
        target: Option<ID>,
        session_id: Option<ID>,
        scope: Option<ID>,
        search_query: Option<String>,
        search_top_k: Option<i32>,
        search_max_distance: Option<f64>,
        #[graphql(default = false)] include_most_frequent: bool,
        max_conclusions: Option<i32>,
    ) -> ApiResult<String> {
        let on = On::peer(&self.0.workspace_name, &self.0.name);
        let access = guard::require(ctx, rule!(Peer.representation), on).await?;
        let within = access.recall_scope(scope.as_deref().map(|s| s.as_str()))?;
        // A negative count is out of range, as 0 is.
        let count = |n: Option<i32>| n.map(|n| u64::try_from(n).unwrap_or(0));
        let recall = Recall {
            max: count(max_conclusions).unwrap_or(DEFAULT_MAX_CONCLUSIONS),
            search_query,
            search_top_k: count(search_top_k),
            search_max_distance,
            include_most_frequent,
        };
        let bound = session_id.map_or_else(|| json!({}), |s| json!({"session_id": s.as_str()}));
        let bound = access
            .store()
            .within_scope(&self.0.workspace_name, within.as_deref(), bound)
            .await?;
        let observed = target
            .as_deref()
            .map_or(self.0.name.as_str(), String::as_str);
        Ok(representation::represent_with(
            access.store(),
            &self.0.workspace_name,
            &self.0.name,
            observed,
            &bound,
            &recall,
        )
        .await?)
    }

    /// Live conclusions this peer holds (as observer), newest first unless `order: ASC`.
    #[allow(clippy::too_many_arguments)]
    async fn conclusions(
        &self,
        ctx: &Context<'_>,
        filters: Option<Json<Value>>,
        #[graphql(name = "where")] where_: Option<ConclusionWhere>,
        #[graphql(default_with = "SortOrder::Desc")] order: SortOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<Conn<Conclusion>> {
        // Conclusions are workspace-key data (Honcho v3.0.12's conclusions router), also a peer's own.
        let on = On::workspace(&self.0.workspace_name);
        let access = guard::require(ctx, rule!(Peer.conclusions), on).await?;
        let slice = slice(ctx, first, after, last, before)?;
        let filters = filter_json(filters, where_)?;
        let page = access
            .store()
            .list_conclusions(
                &self.0.workspace_name,
                Some(&self.0.name),
                &filters,
                order.into(),
                slice,
            )
            .await?;
        prefetch::conclusions(&access, &page.items, prefetch::nodes(ctx.look_ahead())).await?;
        Ok(connection(page, Conclusion))
    }
}

/// What `peer` is asked in `workspace`, about `target` (itself when absent): `Peer.chat` and
/// `peerChat` ask the same question.
pub(crate) fn chat_question(
    workspace: &str,
    peer: &str,
    query: &str,
    target: Option<ID>,
    session_id: Option<ID>,
    level: ReasoningLevel,
) -> Question {
    Question {
        workspace: workspace.to_owned(),
        observer: peer.to_owned(),
        observed: target.map_or_else(|| peer.to_owned(), |t| t.0),
        session: session_id.map(|s| s.0),
        sessions: None,
        query: query.replace('\0', ""),
        level: level.into(),
        response_format: None,
        scoped: false,
    }
}

/// A chat asked of a server without an LLM.
pub(crate) fn no_llm() -> ApiError {
    Code::Unavailable.error("chat answers from an LLM, and none is configured (HONCHO_LLM=none)")
}

/// How much the model may write before it answers (Honcho's reasoning levels).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Enum)]
#[graphql(remote = "dialectic::ReasoningLevel")]
pub enum ReasoningLevel {
    Minimal,
    #[default]
    Low,
    Medium,
    High,
    Max,
}
