use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};

use super::configuration::Resolved;
use super::events::{self, Notice};
use super::filter::{self, Resource};
use super::page::{self, Order, Page, Slice};
use super::session::{MemberConfig, add_members, lock_session, require_session};
use super::vectors::{FlatVectors, nth_vector};
use super::workspace::ensure_workspace;
use super::{Store, StoreError, StoreResult, TxOptions, columns, new_id, stmt, tokens, validate};
use crate::embed::{CONTEXT_TURNS, message_text};
use crate::entity::message;

pub type Message = message::Model;

pub struct NewMessage {
    pub peer: String,
    pub content: String,
    pub metadata: Option<Value>,
    pub created_at: Option<DateTime<Utc>>,
    /// Its settings over the session's: only `reasoning` is read ([`super::configuration`]).
    pub configuration: Option<Value>,
}

/// Which messages a list covers.
#[derive(Clone, Copy, Debug)]
pub enum MessageScope<'a> {
    Workspace(&'a str),
    Session(&'a str, &'a str),
    Peer(&'a str, &'a str),
}

impl<'a> MessageScope<'a> {
    /// The workspace the scope lies in.
    pub fn workspace(&self) -> &'a str {
        match *self {
            MessageScope::Workspace(w) | MessageScope::Session(w, _) | MessageScope::Peer(w, _) => {
                w
            }
        }
    }
}

/// Most pages of messages [`Store::newest_messages_within`] reads back before its budget runs out.
pub const MAX_BUDGET_PAGES: u64 = 10;

/// Most messages a context window takes on either side of a message (`Message.context`,
/// `search(contextWindow)`).
pub const MAX_CONTEXT_SIDE: i64 = 10;

/// Most (session, seq) keys one [`Store::messages_in_ranges`] call expands its ranges into. Every
/// caller stays far below it (context windows are checked against [`MAX_CONTEXT_SIDE`]); it is the
/// backstop that keeps a range that slipped past a check from allocating without bound.
pub const MAX_RANGE_KEYS: i64 = 50_000;

/// How long a batch waits for its session's lock before giving up with SERVICE_UNAVAILABLE.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A run of consecutive messages of one session: `seq_in_session` in `from..=to`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeqRange {
    pub workspace: String,
    pub session: String,
    pub from: i64,
    pub to: i64,
}

impl SeqRange {
    /// The window of `before` messages before `m`, `m` itself, and `after` messages after it.
    /// Refused unless both sides are within `0..=MAX_CONTEXT_SIDE`.
    pub fn around(m: &Message, before: i64, after: i64) -> StoreResult<SeqRange> {
        check_context_sides(before, after)?;
        Ok(SeqRange {
            workspace: m.workspace_name.clone(),
            session: m.session_name.clone(),
            from: m.seq_in_session - before,
            to: m.seq_in_session + after,
        })
    }

    /// How many seqs (from 1 up) the range covers.
    pub fn len(&self) -> i64 {
        self.to
            .saturating_sub(self.from.max(1))
            .saturating_add(1)
            .max(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Both sides of a context window within `0..=MAX_CONTEXT_SIDE`.
pub fn check_context_sides(before: i64, after: i64) -> StoreResult<()> {
    for (name, v) in [("before", before), ("after", after)] {
        if !(0..=MAX_CONTEXT_SIDE).contains(&v) {
            return Err(StoreError::invalid(format!(
                "{name} must be between 0 and {MAX_CONTEXT_SIDE} (got {v})"
            )));
        }
    }
    Ok(())
}

impl Store {
    #[tracing::instrument(name = "store.message", level = "debug", skip_all)]
    pub async fn message(&self, workspace: &str, id: &str) -> StoreResult<Option<Message>> {
        Ok(message::Entity::find()
            .filter(message::Column::WorkspaceName.eq(workspace))
            .filter(message::Column::PublicId.eq(id))
            .one(self.reader())
            .await?)
    }

    /// Appends messages to a session, creating workspace, session and authors as needed and
    /// (re)joining authors as members (as Honcho v3.0.12 does). Everything happens in one transaction: a batch
    /// with one bad message writes nothing.
    ///
    /// `seq_in_session` is assigned under the session's lock ([`lock_session`]), taken before
    /// anything else, so concurrent writers to one session queue up and the numbers stay
    /// 1..N with no gaps and no duplicates (a rolled-back batch releases its numbers with it).
    #[tracing::instrument(name = "store.create_messages", level = "debug", skip_all)]
    pub async fn create_messages(
        &self,
        workspace: &str,
        session_name: &str,
        batch: Vec<NewMessage>,
    ) -> StoreResult<Vec<Message>> {
        validate::name("workspace", workspace)?;
        validate::name("session", session_name)?;
        let rows = Rows::prepare(batch).await?;
        // Embedded before the transaction so the session lock is never held during inference.
        let embeddings = self.embed_batch(workspace, session_name, &rows).await?;
        // A message without a vector (blank, or the embedder failed) gets NULL.
        let (vectors, has_vector) = FlatVectors::new(embeddings.iter().map(|e| e.as_deref()))?;
        let (rows, vectors, has_vector) = (&rows, &vectors, &has_vector);
        let derive = self.derives();
        let defaults = self.configuration_defaults();
        let options = TxOptions::default().lock_timeout(LOCK_WAIT);
        self.transaction(options, |txn| async move {
            lock_session(&*txn, workspace, session_name).await?;
            ensure_workspace(&*txn, workspace, None, None).await?;
            ensure_session(&*txn, workspace, session_name).await?;
            add_members(&*txn, workspace, session_name, &rows.authors).await?;
            let last = last_seq(&*txn, workspace, session_name).await?;
            let created = insert_rows(
                &*txn,
                workspace,
                session_name,
                last,
                rows,
                vectors,
                has_vector,
            )
            .await?;
            // Delivered to listeners at commit, never if the batch rolls back.
            if let (Some(first), Some(last)) = (created.first(), created.last()) {
                let notice = Notice::Message {
                    w: workspace.to_owned(),
                    s: session_name.to_owned(),
                    from: first.seq_in_session,
                    to: last.seq_in_session,
                };
                events::publish(&*txn, &notice).await?;
            }
            let ids: Vec<i64> = created.iter().map(|m| m.id).collect();
            // Committed with the messages, or never: the outbox row is the event.
            super::webhook::outbox::emit_messages(&*txn, workspace, &ids).await?;
            if derive {
                let (w, s) = super::configuration::layers(&*txn, workspace, session_name).await?;
                let settings = Resolved::resolve(&defaults, &[&w, &s]);
                let reasoned: Vec<i64> = created
                    .iter()
                    .zip(&rows.configurations)
                    .filter(|(_, c)| settings.for_message(c.as_ref()).reasoning)
                    .map(|(m, _)| m.id)
                    .collect();
                super::queue::enqueue(&*txn, workspace, session_name, &reasoned).await?;
                if let (Some(first), Some(last)) = (created.first(), created.last()) {
                    let seqs = first.seq_in_session..=last.seq_in_session;
                    super::summary::enqueue(&*txn, workspace, session_name, &settings, seqs)
                        .await?;
                }
            }
            Ok(created)
        })
        .await
    }

    /// The batch's vectors, `None` for each message without an embedder. Each message is
    /// embedded in its conversation: the turns before it come from this batch or, for the first
    /// ones, from the session as it is now (a concurrent batch may land between them and this
    /// one; its turns are then missing from these vectors, nothing else).
    async fn embed_batch(
        &self,
        workspace: &str,
        session: &str,
        rows: &Rows,
    ) -> StoreResult<Vec<Option<Vec<f32>>>> {
        let n = rows.peers.len();
        if self.embedder().is_none() {
            return Ok(vec![None; n]);
        }
        let earlier = self.last_turns(workspace, session, CONTEXT_TURNS).await?;
        let turns: Vec<(&str, &str)> = earlier
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .chain(
                rows.peers
                    .iter()
                    .map(String::as_str)
                    .zip(rows.contents.iter().map(String::as_str)),
            )
            .collect();
        let texts: Vec<String> = (0..n)
            .map(|i| {
                let at = earlier.len() + i;
                let (peer, content) = turns[at];
                message_text(&turns[at.saturating_sub(CONTEXT_TURNS)..at], peer, content)
            })
            .collect();
        Ok(self.embed_texts(&texts).await)
    }

    /// The last `n` messages of a session as (peer, content), oldest first.
    async fn last_turns(
        &self,
        workspace: &str,
        session: &str,
        n: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let rows = self
            .db()
            .query_all_raw(stmt(
                "SELECT peer_name, content FROM messages \
                 WHERE workspace_name = $1 AND session_name = $2 \
                 ORDER BY seq_in_session DESC LIMIT $3",
                [workspace.into(), session.into(), (n as i64).into()],
            ))
            .await?;
        let mut turns = rows
            .iter()
            .map(|r| Ok((r.try_get("", "peer_name")?, r.try_get("", "content")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        turns.reverse();
        Ok(turns)
    }

    /// Replaces a message's metadata; `None` leaves it as it is.
    #[tracing::instrument(name = "store.update_message", level = "debug", skip_all)]
    pub async fn update_message(
        &self,
        workspace: &str,
        id: &str,
        metadata: Option<Value>,
    ) -> StoreResult<Message> {
        let metadata = validate::optional_metadata(metadata)?;
        message::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "UPDATE messages SET metadata = COALESCE($3, metadata) \
                     WHERE workspace_name = $1 AND public_id = $2 RETURNING {}",
                    columns::list::<message::Entity>("")
                ),
                [workspace.into(), id.into(), metadata.into()],
            ))
            .one(self.db())
            .await?
            .ok_or_else(|| StoreError::not_found("message", id))
    }

    /// Messages of a scope. Within a session they are in `seq_in_session` order; across sessions
    /// in insertion order.
    #[tracing::instrument(name = "store.list_messages", level = "debug", skip_all)]
    pub async fn list_messages(
        &self,
        scope: MessageScope<'_>,
        filters: &Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<Message>> {
        let filter = filter::parse(Resource::Message, filters)?;
        let select = message::Entity::find().filter(filter.condition("messages"));
        let (select, key) = match scope {
            MessageScope::Workspace(ws) => (
                select.filter(message::Column::WorkspaceName.eq(ws)),
                message::Column::Id,
            ),
            MessageScope::Session(ws, s) => (
                select
                    .filter(message::Column::WorkspaceName.eq(ws))
                    .filter(message::Column::SessionName.eq(s)),
                message::Column::SeqInSession,
            ),
            MessageScope::Peer(ws, p) => (
                select
                    .filter(message::Column::WorkspaceName.eq(ws))
                    .filter(message::Column::PeerName.eq(p)),
                message::Column::Id,
            ),
        };
        page::fetch(
            self.reader(),
            select,
            order,
            &[key],
            slice,
            page::Rows::Deferred,
        )
        .await
    }

    /// The session's newest messages whose token counts add up to at most `budget`, oldest
    /// first (Honcho v3.0.12's session context), read back a page at a time for at most
    /// [`MAX_BUDGET_PAGES`] pages.
    #[tracing::instrument(name = "store.newest_messages_within", level = "debug", skip_all)]
    pub async fn newest_messages_within(
        &self,
        workspace: &str,
        session: &str,
        budget: i64,
    ) -> StoreResult<Vec<Message>> {
        self.newest_messages_after(workspace, session, budget, 0)
            .await
    }

    /// [`Store::newest_messages_within`], of the messages after seq `after` only.
    pub async fn newest_messages_after(
        &self,
        workspace: &str,
        session: &str,
        budget: i64,
        after: i64,
    ) -> StoreResult<Vec<Message>> {
        let (mut messages, mut used) = (Vec::new(), 0i64);
        'pages: for n in 0..MAX_BUDGET_PAGES {
            let slice = Slice {
                first: Some(page::MAX_PAGE),
                after: (n * page::MAX_PAGE).checked_sub(1).map(page::Cursor::at),
                ..Slice::default()
            };
            let page = self
                .list_messages(
                    MessageScope::Session(workspace, session),
                    &json!({}),
                    Order::Desc,
                    slice,
                )
                .await?;
            for m in page.items {
                used += i64::from(m.token_count);
                if used > budget || m.seq_in_session <= after {
                    break 'pages;
                }
                messages.push(m);
            }
            if !page.has_next {
                break;
            }
        }
        messages.reverse();
        Ok(messages)
    }

    /// All messages inside any of `ranges`, in one statement. Ranges may overlap; each message
    /// comes back once, ordered by session and seq.
    ///
    /// The ranges are expanded here into the distinct (workspace, session, seq) keys they cover,
    /// and joined by equality on the `(workspace, session, seq)` unique index. Joined by
    /// `BETWEEN lo AND hi` instead, the planner cannot tell how narrow the ranges are, estimates
    /// ~120 rows per range and, for 100 ranges, prefers a parallel sequential scan of all
    /// messages: 180 ms instead of 0.8 ms at 100k messages (bench/history/2026-12.md, "What the
    /// profile showed, and what changed"). Callers' ranges are small (a context window is at most
    /// 21 seqs, merged snippet windows at most results × (2 · window + 1), an event's range one
    /// createMessages batch), so the key lists stay short.
    #[tracing::instrument(name = "store.messages_in_ranges", level = "debug", skip_all)]
    pub async fn messages_in_ranges(&self, ranges: &[SeqRange]) -> StoreResult<Vec<Message>> {
        let covered = ranges
            .iter()
            .fold(0i64, |sum, r| sum.saturating_add(r.len()));
        if covered > MAX_RANGE_KEYS {
            return Err(StoreError::invalid(format!(
                "the message ranges cover {covered} positions, more than {MAX_RANGE_KEYS}"
            )));
        }
        let keys: BTreeSet<(&str, &str, i64)> = ranges
            .iter()
            .flat_map(|r| {
                (r.from.max(1)..=r.to).map(|seq| (r.workspace.as_str(), r.session.as_str(), seq))
            })
            .collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (mut ws, mut sessions, mut seqs) = (Vec::new(), Vec::new(), Vec::new());
        for (w, s, seq) in keys {
            ws.push(w.to_owned());
            sessions.push(s.to_owned());
            seqs.push(seq);
        }
        Ok(message::Entity::find()
            .from_raw_sql(stmt(
                &format!(
                    "SELECT {} \
                     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(w, s, seq) \
                     JOIN messages m ON m.workspace_name = k.w AND m.session_name = k.s \
                       AND m.seq_in_session = k.seq \
                     ORDER BY m.workspace_name, m.session_name, m.seq_in_session",
                    columns::list::<message::Entity>("m")
                ),
                [ws.into(), sessions.into(), seqs.into()],
            ))
            .all(self.reader())
            .await?)
    }
}

/// A validated `createMessages` batch laid out as the columns its INSERT binds, one entry per
/// message. Laid out before the transaction, so a retried attempt only clones them.
struct Rows {
    /// The authors, (re)joined as members.
    authors: Vec<MemberConfig>,
    peers: Vec<String>,
    contents: Vec<String>,
    /// JSON text.
    metadata: Vec<String>,
    tokens: Vec<i32>,
    times: Vec<DateTime<Utc>>,
    configurations: Vec<Option<Value>>,
}

impl Rows {
    /// Validates every message (a bad one refuses the batch) and counts its tokens.
    async fn prepare(batch: Vec<NewMessage>) -> StoreResult<Rows> {
        validate::batch_len("messages", batch.len())?;
        let n = batch.len();
        // One timestamp for the batch, as PostgreSQL's now() would give.
        let now = Utc::now();
        let mut rows = Rows {
            authors: Vec::with_capacity(n),
            peers: Vec::with_capacity(n),
            contents: Vec::with_capacity(n),
            metadata: Vec::with_capacity(n),
            tokens: Vec::new(),
            times: Vec::with_capacity(n),
            configurations: Vec::with_capacity(n),
        };
        for (i, m) in batch.into_iter().enumerate() {
            validate::name("peer", &m.peer)
                .map_err(|e| StoreError::invalid(format!("messages[{i}].peerId: {e}")))?;
            let content = validate::message_content(i, &m.content)?;
            let metadata = match m.metadata {
                Some(v) => validate::metadata(&format!("messages[{i}].metadata"), v)?,
                None => json!({}),
            };
            rows.authors.push(MemberConfig {
                peer: m.peer.clone(),
                ..MemberConfig::default()
            });
            rows.peers.push(m.peer);
            rows.contents.push(content);
            rows.metadata.push(metadata.to_string());
            rows.times.push(m.created_at.unwrap_or(now));
            super::configuration::check_message(i, m.configuration.as_ref())?;
            rows.configurations.push(m.configuration);
        }
        (rows.contents, rows.tokens) = tokens::count_all(rows.contents).await?;
        Ok(rows)
    }
}

/// The session's last `seq_in_session`, 0 when it has no message yet. The seq of an erased
/// message is never given again (an erasure records the highest it removed in the session's
/// `internal_metadata.last_seq`), so a client that has seen a seq never sees it name another
/// message.
async fn last_seq<C: ConnectionTrait>(db: &C, workspace: &str, session: &str) -> StoreResult<i64> {
    Ok(db
        .query_one_raw(stmt(
            "SELECT GREATEST( \
               (SELECT COALESCE(MAX(seq_in_session), 0) FROM messages \
                WHERE workspace_name = $1 AND session_name = $2), \
               (SELECT COALESCE((internal_metadata->>'last_seq')::bigint, 0) FROM sessions \
                WHERE workspace_name = $1 AND name = $2)) AS last",
            [workspace.into(), session.into()],
        ))
        .await?
        .map(|r| r.try_get("", "last"))
        .transpose()?
        .unwrap_or(0))
}

/// Inserts the rows after seq `last`, each with its vector, in one statement; returns them in
/// seq order.
///
/// One INSERT with the embeddings in it: inserting and then setting the vectors would write every
/// row twice, and the second version again into every index (HNSW, both GINs, the B-trees), which
/// costs more than the insert itself.
async fn insert_rows<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    session: &str,
    last: i64,
    rows: &Rows,
    vectors: &FlatVectors,
    has_vector: &[bool],
) -> StoreResult<Vec<Message>> {
    let n = rows.peers.len();
    let ids: Vec<String> = (0..n).map(|_| new_id()).collect();
    let seqs: Vec<i64> = (0..n as i64).map(|i| last + 1 + i).collect();
    let vector = nth_vector("$11::real[]", "$12::int", "r.ord");
    let mut created = message::Entity::find()
        .from_raw_sql(stmt(
            &format!(
                "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, \
                   seq_in_session, content, metadata, internal_metadata, token_count, created_at, \
                   embedding) \
                 SELECT r.public_id, $1, $2, r.peer, r.seq, r.content, r.metadata::jsonb, \
                   '{{}}'::jsonb, r.tokens, r.created_at, \
                   CASE WHEN r.has_vector THEN {vector} END \
                 FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], \
                   $8::int[], $9::timestamptz[], $10::bool[]) WITH ORDINALITY \
                   AS r(public_id, peer, seq, content, metadata, tokens, created_at, has_vector, \
                     ord) \
                 RETURNING {}",
                columns::list::<message::Entity>("")
            ),
            [
                workspace.into(),
                session.into(),
                ids.into(),
                rows.peers.clone().into(),
                seqs.into(),
                rows.contents.clone().into(),
                rows.metadata.clone().into(),
                rows.tokens.clone().into(),
                rows.times.clone().into(),
                has_vector.to_vec().into(),
                vectors.values.clone().into(),
                vectors.dims.into(),
            ],
        ))
        .all(db)
        .await?;
    created.sort_by_key(|m| m.seq_in_session);
    Ok(created)
}

async fn ensure_session<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    name: &str,
) -> StoreResult<()> {
    db.execute_raw(stmt(
        "INSERT INTO sessions (id, name, workspace_name) VALUES ($1, $2, $3) \
         ON CONFLICT (name, workspace_name) DO NOTHING",
        [new_id().into(), name.into(), workspace.into()],
    ))
    .await?;
    require_session(db, workspace, name).await?;
    Ok(())
}
