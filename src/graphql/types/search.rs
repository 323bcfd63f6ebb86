//! `search` on Workspace, Peer and Session (docs/search.md): `MessageHits`, or `SnippetHits` with the
//! matches' interleaved conversation windows.

use std::collections::HashSet;

use async_graphql::{Context, ID, Json, Object, Union};
use serde_json::Value;

use super::Message;
use super::filter::{MessageWhere, filter_json};
use crate::access::{On, rule};
use crate::graphql::error::ApiResult;
use crate::graphql::guard::{self, Access};
use crate::graphql::loaders::RangeKey;
use crate::graphql::prefetch;
use crate::store::message::Message as Row;
use crate::store::search::{
    DEFAULT_CONTEXT_WINDOW, DEFAULT_SEARCH_LIMIT, SearchScope, Snippet, assemble_snippets,
    check_context_window, check_limit, plan_snippets,
};

/// What `search` returns: the ranked messages, and with `includeContext` their snippets.
#[derive(Union)]
pub enum SearchResult {
    MessageHits(MessageHits),
    SnippetHits(SnippetHits),
}

/// Matching messages, best first (Reciprocal Rank Fusion of the semantic and full-text rankings).
pub struct MessageHits {
    results: Vec<Row>,
}

#[Object]
impl MessageHits {
    /// Matching messages, best first.
    async fn results(&self) -> Vec<Message> {
        self.results.iter().cloned().map(Message).collect()
    }
}

/// Matching messages and, per session, the conversation around them.
pub struct SnippetHits {
    results: Vec<Row>,
    snippets: Vec<Snippet>,
}

#[Object]
impl SnippetHits {
    /// Matching messages, best first.
    async fn results(&self) -> Vec<Message> {
        self.results.iter().cloned().map(Message).collect()
    }

    /// The matches of each session with `contextWindow` messages on either side; windows that
    /// overlap or touch are one snippet. Ordered by the rank of each snippet's best match.
    async fn snippets(&self) -> Vec<MessageSnippet> {
        self.snippets.iter().cloned().map(MessageSnippet).collect()
    }
}

/// Matched messages of one session within their surrounding messages.
pub struct MessageSnippet(Snippet);

#[Object]
impl MessageSnippet {
    async fn session_id(&self) -> ID {
        ID(self.0.session.clone())
    }

    /// The matches in this snippet, in seqInSession order.
    async fn matched(&self) -> Vec<Message> {
        self.0.matched.iter().cloned().map(Message).collect()
    }

    /// Every message of the merged window, in seqInSession order; contains every `matched`.
    ///
    /// Readable where the session is (a peer key: sessions its peer is an active member of), as
    /// `Message.context`; a peer key searching its own messages with `includeContext` is refused
    /// here for the sessions it has left.
    async fn context(&self, ctx: &Context<'_>) -> ApiResult<Vec<Message>> {
        let on = On::session(&self.0.workspace, &self.0.session);
        guard::require(ctx, rule!(MessageSnippet.context), on).await?;
        Ok(self.0.context.iter().cloned().map(Message).collect())
    }
}

/// The arguments of `search`, as the schema declares them (`Int = 10`, …: an explicit null
/// means the default).
pub struct SearchArgs {
    pub query: String,
    pub filters: Option<Json<Value>>,
    pub where_: Option<MessageWhere>,
    pub limit: Option<i32>,
    pub include_context: Option<bool>,
    pub context_window: Option<i32>,
    /// Only the sessions of this scope.
    pub scope: Option<ID>,
}

/// Runs a search for one of the `search` fields. Context windows go through the request's
/// range loader (all windows of the request in one statement, shared with `Message.context`),
/// and everything the selection asks of the messages is prefetched in one batch per kind.
pub async fn search(
    ctx: &Context<'_>,
    access: &Access<'_>,
    scope: SearchScope<'_>,
    args: SearchArgs,
) -> ApiResult<SearchResult> {
    let limit = args
        .limit
        .map_or(Ok(DEFAULT_SEARCH_LIMIT), u64::try_from)
        .unwrap_or(0);
    check_limit(limit)?;
    let window = args
        .context_window
        .map_or(DEFAULT_CONTEXT_WINDOW, i64::from);
    check_context_window(window)?;
    let include_context = args.include_context.unwrap_or(false);
    let filters = filter_json(args.filters, args.where_)?;
    // A scope key searches inside its scope whatever it asks; others where they ask.
    let within = access.recall_scope(args.scope.as_deref().map(|s| s.as_str()))?;
    let filters = access
        .store()
        .within_scope(scope.workspace(), within.as_deref(), filters)
        .await?;
    let keys = guard::search_keys(ctx, scope.workspace()).await;
    let results = access
        .store()
        .search(scope, &args.query, &filters, limit, keys)
        .await?;

    let look = ctx.look_ahead();
    let results_sel = look.field("results");
    if !include_context {
        prefetch::messages(access, &results, &[results_sel]).await?;
        return Ok(SearchResult::MessageHits(MessageHits { results }));
    }

    let snippets_sel = look.field("snippets");
    let snippets = if snippets_sel.exists() {
        let plans = plan_snippets(&results, window);
        let windows = if window == 0 || plans.is_empty() {
            Default::default()
        } else {
            access
                .loader()
                .load_many(plans.iter().map(|p| RangeKey(p.range.clone())))
                .await?
        };
        assemble_snippets(plans, window, |r| {
            windows
                .get(&RangeKey(r.clone()))
                .cloned()
                .unwrap_or_default()
        })
    } else {
        Vec::new()
    };
    // Every message the response can show; context contains matched.
    let mut seen = HashSet::new();
    let shown: Vec<Row> = results
        .iter()
        .chain(snippets.iter().flat_map(|s| s.context.iter()))
        .filter(|m| seen.insert(m.id))
        .cloned()
        .collect();
    prefetch::messages(
        access,
        &shown,
        &[
            results_sel,
            snippets_sel.field("matched"),
            snippets_sel.field("context"),
        ],
    )
    .await?;
    Ok(SearchResult::SnippetHits(SnippetHits { results, snippets }))
}
