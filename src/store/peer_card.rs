//! Peer cards: what an observer keeps about a peer as a short list of stable facts.
//!
//! A card has two parts, shown as one list:
//! - the **client's** entries (`PUT .../card`, MCP `set_peer_card`), kept as written in the
//!   observer's `internal_metadata.peer_cards`; the deriver never changes them;
//! - the **deriver's** entries (`peer_card_entries`), each citing the conclusions it came from
//!   (`peer_card_sources`). An entry whose sources are all deleted is not shown.
//!
//! Read, the card is the client's entries in their order, then the deriver's that do not repeat
//! one of them (compared without case and spacing), at most [`MAX_CARD_ENTRIES`] in all. A client
//! write replaces the card as the client sees it: the deriver's entries it repeats stay the
//! deriver's (with their sources), those it leaves out are deleted, the rest become the client's.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, DatabaseTransaction};
use serde_json::Value;

use super::conclusion::derive::Premise;
use super::{Store, StoreError, StoreResult, TxOptions, stmt};

/// Most entries on one card (Honcho main's bound, December 2026).
pub const MAX_CARD_ENTRIES: usize = 40;
/// Longest deriver entry, in characters (Honcho main's).
pub const MAX_ENTRY_CHARS: usize = 200;
/// The kinds of entry the deriver may write, each a prefix followed by a space.
pub const ENTRY_PREFIXES: [&str; 4] = ["IDENTITY:", "ATTRIBUTE:", "RELATIONSHIP:", "INSTRUCTION:"];

/// Who wrote an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardOrigin {
    Client,
    Deriver,
}

/// One line of a card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardEntry {
    pub content: String,
    pub origin: CardOrigin,
    /// The live conclusions a deriver entry came from (none for a client's).
    pub conclusion_ids: Vec<String>,
}

/// An entry the deriver proposes, citing the batch's facts or existing conclusions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCardEntry {
    pub content: String,
    pub premises: Vec<Premise>,
}

/// Two entries are the same when they differ only in case and spacing.
pub fn entry_key(content: &str) -> String {
    content
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A deriver entry's form: an allowed prefix, a space, a non-empty body, within the length.
pub fn well_formed(content: &str) -> bool {
    content.chars().count() <= MAX_ENTRY_CHARS
        && ENTRY_PREFIXES.iter().any(|p| {
            content
                .strip_prefix(p)
                .and_then(|rest| rest.strip_prefix(' '))
                .is_some_and(|body| !body.trim().is_empty())
        })
}

impl Store {
    /// `observer`'s card of `observed` as lines, None when it has none. `NotFound` when the
    /// observer does not exist.
    #[tracing::instrument(name = "store.peer_card", level = "debug", skip_all)]
    pub async fn peer_card(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
    ) -> StoreResult<Option<Vec<String>>> {
        Ok(self
            .peer_card_entries(workspace, observer, observed)
            .await?
            .map(|entries| entries.into_iter().map(|e| e.content).collect()))
    }

    /// `observer`'s card of `observed` entry by entry ([`self`] says how the parts merge), None
    /// when it has none.
    pub async fn peer_card_entries(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
    ) -> StoreResult<Option<Vec<CardEntry>>> {
        card_entries(self.reader(), workspace, observer, observed).await
    }

    /// Replaces `observer`'s card of `observed` as a client sees it (NUL characters stripped);
    /// returns the card as it now reads.
    #[tracing::instrument(name = "store.set_peer_card", level = "debug", skip_all)]
    pub async fn set_peer_card(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
        card: Vec<String>,
    ) -> StoreResult<Vec<String>> {
        let card: Vec<String> = card.into_iter().map(|c| c.replace('\0', "")).collect();
        self.transaction(TxOptions::default(), |txn| {
            let card = card.clone();
            async move {
                let derived = derived_entries(&*txn, workspace, observer, observed).await?;
                let written: HashSet<String> = card.iter().map(|c| entry_key(c)).collect();
                let kept: HashSet<String> = derived
                    .iter()
                    .map(|(_, e)| entry_key(&e.content))
                    .filter(|k| written.contains(k))
                    .collect();
                let dropped: Vec<i64> = derived
                    .iter()
                    .filter(|(_, e)| !kept.contains(&entry_key(&e.content)))
                    .map(|(id, _)| *id)
                    .collect();
                txn.execute_raw(stmt(
                    "DELETE FROM peer_card_entries WHERE id = ANY($1::bigint[])",
                    [dropped.into()],
                ))
                .await?;
                let client: Vec<String> = card
                    .into_iter()
                    .filter(|c| !kept.contains(&entry_key(c)))
                    .collect();
                let value = serde_json::to_value(&client).unwrap_or_default();
                let done = txn
                    .execute_raw(stmt(
                        "UPDATE peers SET internal_metadata = jsonb_set(internal_metadata, \
                           '{peer_cards}', COALESCE(internal_metadata->'peer_cards', '{}'::jsonb) \
                           || jsonb_build_object($3::text, $4::jsonb)) \
                         WHERE workspace_name = $1 AND name = $2",
                        [
                            workspace.into(),
                            observer.into(),
                            observed.into(),
                            value.into(),
                        ],
                    ))
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(StoreError::not_found("peer", observer));
                }
                let now = card_entries(&*txn, workspace, observer, observed).await?;
                Ok(now
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| e.content)
                    .collect())
            }
        })
        .await
    }
}

/// Replaces the deriver's entries of the pair with `entries` (in the caller's transaction,
/// which holds the pair's deriver lock). `fact_ids` are the conclusions the batch's facts
/// became, for [`Premise::Fact`]. Only live conclusions are linked; an entry left with none is
/// not written. Returns how many entries were written.
pub(crate) async fn write_derived(
    txn: &DatabaseTransaction,
    workspace: &str,
    observer: &str,
    observed: &str,
    entries: &[NewCardEntry],
    fact_ids: &[String],
) -> StoreResult<usize> {
    txn.execute_raw(stmt(
        "DELETE FROM peer_card_entries \
         WHERE workspace_name = $1 AND observer = $2 AND observed = $3",
        [workspace.into(), observer.into(), observed.into()],
    ))
    .await?;
    let mut written = 0;
    for (position, entry) in entries.iter().enumerate() {
        let ids: Vec<String> = entry
            .premises
            .iter()
            .filter_map(|p| match p {
                Premise::Fact(i) => fact_ids.get(*i).cloned(),
                Premise::Existing(id) => Some(id.clone()),
            })
            .collect();
        let row = txn
            .query_one_raw(stmt(
                "WITH live AS ( \
                   SELECT id FROM conclusions WHERE id = ANY($6::text[]) \
                     AND workspace_name = $1 AND deleted_at IS NULL), \
                 e AS ( \
                   INSERT INTO peer_card_entries (workspace_name, observer, observed, position, \
                     content) \
                   SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM live) RETURNING id), \
                 s AS ( \
                   INSERT INTO peer_card_sources (entry_id, conclusion_id) \
                   SELECT e.id, live.id FROM e, live RETURNING 1) \
                 SELECT (SELECT count(*) FROM e) AS n, (SELECT count(*) FROM s) AS links",
                [
                    workspace.into(),
                    observer.into(),
                    observed.into(),
                    (position as i32).into(),
                    entry.content.clone().into(),
                    ids.into(),
                ],
            ))
            .await?;
        if let Some(r) = row {
            written += r.try_get::<i64>("", "n")? as usize;
        }
    }
    Ok(written)
}

/// The deriver's entries of the pair with a live source, in order, with their row ids.
async fn derived_entries<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    observer: &str,
    observed: &str,
) -> StoreResult<Vec<(i64, CardEntry)>> {
    let rows = db
        .query_all_raw(stmt(
            "SELECT e.id, e.content, \
               array_agg(c.id ORDER BY c.created_at, c.id) AS sources \
             FROM peer_card_entries e \
             JOIN peer_card_sources s ON s.entry_id = e.id \
             JOIN conclusions c ON c.id = s.conclusion_id AND c.deleted_at IS NULL \
             WHERE e.workspace_name = $1 AND e.observer = $2 AND e.observed = $3 \
             GROUP BY e.id ORDER BY e.position, e.id",
            [workspace.into(), observer.into(), observed.into()],
        ))
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("", "id")?,
                CardEntry {
                    content: r.try_get("", "content")?,
                    origin: CardOrigin::Deriver,
                    conclusion_ids: r.try_get("", "sources")?,
                },
            ))
        })
        .collect()
}

/// The merged card (see the module's documentation).
async fn card_entries<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    observer: &str,
    observed: &str,
) -> StoreResult<Option<Vec<CardEntry>>> {
    let row = db
        .query_one_raw(stmt(
            "SELECT internal_metadata->'peer_cards'->$3 AS card FROM peers \
             WHERE workspace_name = $1 AND name = $2",
            [workspace.into(), observer.into(), observed.into()],
        ))
        .await?
        .ok_or_else(|| StoreError::not_found("peer", observer))?;
    let client: Option<Vec<String>> = row
        .try_get::<Option<Value>>("", "card")?
        .and_then(|v| serde_json::from_value(v).ok());
    let derived = derived_entries(db, workspace, observer, observed).await?;
    if client.is_none() && derived.is_empty() {
        return Ok(None);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut out: Vec<CardEntry> = Vec::new();
    for content in client.unwrap_or_default() {
        seen.insert(entry_key(&content));
        out.push(CardEntry {
            content,
            origin: CardOrigin::Client,
            conclusion_ids: Vec::new(),
        });
    }
    for (_, e) in derived {
        if out.len() >= MAX_CARD_ENTRIES {
            break;
        }
        if seen.insert(entry_key(&e.content)) {
            out.push(e);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_compare_without_case_and_spacing() {
        assert_eq!(
            entry_key("ATTRIBUTE:  Lives in  Paris"),
            entry_key("attribute: lives in paris")
        );
    }

    #[test]
    fn deriver_entries_need_a_known_prefix_a_body_and_a_bounded_length() {
        assert!(well_formed("IDENTITY: Name: Alice"));
        assert!(well_formed("INSTRUCTION: Call me Al"));
        assert!(!well_formed("TRAIT: curious"));
        assert!(!well_formed("Lives in Paris"));
        assert!(!well_formed("ATTRIBUTE:"));
        assert!(!well_formed("ATTRIBUTE:   "));
        assert!(!well_formed("ATTRIBUTE:Paris"));
        assert!(!well_formed(&format!("ATTRIBUTE: {}", "x".repeat(200))));
    }
}
