//! `honcho-graphql import-honcho`: a workspace read from a running Honcho v3 server through its
//! REST API (docs/export.md, "From a running Honcho") and written here with the importer of
//! exports, record by record, so the same rules hold: rows keyed by name or id, a rerun writes
//! nothing twice, conflicts settled by the same flag.
//!
//! Honcho's API gives no vectors, no derivation graph and no message seq: vectors are computed
//! here, conclusions arrive without sources, and a message's seq is its place in its session's
//! listing (oldest first). A session's summaries come with its messages, so they continue here
//! from the message they name. After each page the run records where it is
//! (`import_checkpoints`); a run started again skips what was read before.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::store::Store;
use crate::store::export::{
    ConclusionRecord, EmbeddingModel, FORMAT, Header, ImportOptions, ImportProgress, ImportReport,
    MemberRecord, MessageRecord, NamedRecord, OnConflict, Record, ScopeRecord, ScopeSessionRecord,
    SummaryRecord, VERSION, WorkspaceRecord,
};

/// Items per page asked of the source (Honcho's largest page).
const SIZE: u64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum ImportHonchoError {
    #[error("{url}: {cause}")]
    Http {
        url: String,
        #[source]
        cause: reqwest::Error,
    },
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

pub struct ImportHoncho {
    /// The source's base URL, without `/v3`.
    pub base_url: String,
    pub workspace: String,
    pub api_key: Option<String>,
    pub on_conflict: OnConflict,
}

/// Where a run is: the sessions done, and the pages of the current one's messages read.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Position {
    sessions_done: Vec<String>,
    session: Option<String>,
    pages_read: u64,
}

#[derive(Deserialize)]
struct Page<T> {
    items: Vec<T>,
    pages: u64,
}

#[derive(Deserialize)]
struct Named {
    id: String,
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    configuration: Value,
    created_at: DateTime<Utc>,
}

impl Named {
    /// This workspace, peer or session as the file writes it, with `internal_metadata`.
    fn record(&self, internal_metadata: Value) -> NamedRecord {
        NamedRecord {
            name: self.id.clone(),
            metadata: object(self.metadata.clone()),
            internal_metadata,
            configuration: object(self.configuration.clone()),
            created_at: self.created_at,
        }
    }
}

#[derive(Deserialize)]
struct Message {
    id: String,
    content: String,
    peer_id: String,
    #[serde(default)]
    metadata: Value,
    created_at: DateTime<Utc>,
    #[serde(default)]
    token_count: i32,
}

#[derive(Deserialize)]
struct Conclusion {
    id: String,
    content: String,
    observer_id: String,
    observed_id: String,
    session_id: Option<String>,
    #[serde(default)]
    level: Option<String>,
    created_at: DateTime<Utc>,
}

/// `GET …/sessions/{id}/summaries`: each kind null until the source's deriver wrote one.
#[derive(Deserialize)]
struct Summaries {
    short_summary: Option<Summary>,
    long_summary: Option<Summary>,
}

#[derive(Deserialize)]
struct Summary {
    content: String,
    message_id: String,
    created_at: DateTime<Utc>,
    #[serde(default)]
    token_count: i32,
}

#[derive(Deserialize)]
struct Card {
    peer_card: Option<Vec<String>>,
}

struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Client {
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, ImportHonchoError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url);
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let http = |cause| ImportHonchoError::Http {
            url: url.clone(),
            cause,
        };
        let resp = req.send().await.map_err(&http)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(ImportHonchoError::Status {
                url: url.clone(),
                status: status.as_u16(),
                body: body.chars().take(500).collect(),
            });
        }
        resp.json().await.map_err(&http)
    }

    /// Every item of a `POST …/list` route, page by page.
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Vec<T>, ImportHonchoError> {
        self.pages(reqwest::Method::POST, path, Some(json!({})))
            .await
    }

    /// Every item of a route that answers `method` (with `body`) with a page, page by page.
    async fn pages<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Vec<T>, ImportHonchoError> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let p: Page<T> = self
                .call(
                    method.clone(),
                    &format!("{path}?page={page}&size={SIZE}"),
                    body.clone(),
                )
                .await?;
            out.extend(p.items);
            if page >= p.pages {
                return Ok(out);
            }
            page += 1;
        }
    }
}

/// Honcho's ids are nanoids; an id of another shape gets one derived from it.
fn local_id(workspace: &str, id: String) -> String {
    let nanoid = id.len() == 21
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if nanoid {
        id
    } else {
        crate::store::export::derived_id(workspace, &id)
    }
}

fn object(v: Value) -> Value {
    if v.is_object() { v } else { json!({}) }
}

impl ImportHoncho {
    /// Reads the workspace from the source and writes it to `store`, reporting to `progress`.
    pub async fn run(
        &self,
        store: &Store,
        progress: &dyn ImportProgress,
    ) -> Result<ImportReport, ImportHonchoError> {
        let client = Client {
            http: crate::outbound::client(),
            base: format!("{}/v3", self.base_url.trim_end_matches('/')),
            key: self.api_key.clone(),
        };
        let ws = &self.workspace;
        let source = self.base_url.trim_end_matches('/').to_owned();
        let mut position: Position = store
            .import_checkpoint(&source, ws)
            .await?
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            workspace: ws.clone(),
            // No vectors come through Honcho's API: every one is computed here.
            embedding: EmbeddingModel {
                model: None,
                dims: 0,
            },
        };
        let mut importer = store
            .importer(
                header,
                ImportOptions {
                    on_conflict: self.on_conflict,
                    ..ImportOptions::default()
                },
            )
            .await?;

        // Honcho's get-or-create is its way to read one workspace.
        let w: Named = client
            .call(
                reqwest::Method::POST,
                "/workspaces",
                Some(json!({ "id": ws })),
            )
            .await?;
        let w = WorkspaceRecord {
            name: ws.clone(),
            ..w.record(json!({}))
        };
        importer.push(Record::Workspace(w), progress).await?;

        // Conclusions first in memory (they are few beside messages): the cards read below
        // are those of the pairs they name.
        let conclusions: Vec<Conclusion> = client
            .list(&format!("/workspaces/{ws}/conclusions/list"))
            .await?;
        let peers: Vec<Named> = client.list(&format!("/workspaces/{ws}/peers/list")).await?;
        for p in peers {
            let mut cards = serde_json::Map::new();
            let mut targets = vec![p.id.clone()];
            for c in conclusions.iter().filter(|c| c.observer_id == p.id) {
                if !targets.contains(&c.observed_id) {
                    targets.push(c.observed_id.clone());
                }
            }
            for t in targets {
                let card: Card = client
                    .call(
                        reqwest::Method::GET,
                        &format!("/workspaces/{ws}/peers/{}/card?target={t}", p.id),
                        None,
                    )
                    .await?;
                if let Some(card) = card.peer_card {
                    cards.insert(t, json!(card));
                }
            }
            let internal = if cards.is_empty() {
                json!({})
            } else {
                json!({ "peer_cards": cards })
            };
            importer
                .push(Record::Peer(p.record(internal)), progress)
                .await?;
        }

        let sessions: Vec<Named> = client
            .list(&format!("/workspaces/{ws}/sessions/list"))
            .await?;
        for s in &sessions {
            importer
                .push(Record::Session(s.record(json!({}))), progress)
                .await?;
        }
        for s in &sessions {
            let members: Vec<Named> = client
                .list_get(&format!("/workspaces/{ws}/sessions/{}/peers", s.id))
                .await?;
            for m in members {
                let config: Value = client
                    .call(
                        reqwest::Method::GET,
                        &format!("/workspaces/{ws}/sessions/{}/peers/{}/config", s.id, m.id),
                        None,
                    )
                    .await?;
                importer
                    .push(
                        Record::Member(MemberRecord {
                            session: s.id.clone(),
                            peer: m.id,
                            configuration: json!({
                                "observe_me": config.get("observe_me").cloned().unwrap_or(Value::Null),
                                "observe_others": config.get("observe_others").cloned().unwrap_or(Value::Null),
                            }),
                            internal_metadata: json!({}),
                            // Honcho's API does not say when a peer joined: the session's birth.
                            joined_at: s.created_at,
                            left_at: None,
                        }),
                        progress,
                    )
                    .await?;
            }
        }

        // Scopes came after v3.0.12: a source without them answers 404 (or 405) to the list.
        let scopes: Vec<Named> = match client.list(&format!("/workspaces/{ws}/scopes/list")).await {
            Ok(scopes) => scopes,
            Err(ImportHonchoError::Status {
                status: 404 | 405, ..
            }) => Vec::new(),
            Err(e) => return Err(e),
        };
        for scope in scopes {
            let members: Vec<Named> = client
                .list(&format!(
                    "/workspaces/{ws}/scopes/{}/sessions/list",
                    scope.id
                ))
                .await?;
            importer
                .push(
                    Record::Scope(ScopeRecord {
                        name: scope.id.clone(),
                        metadata: object(scope.metadata),
                        created_at: scope.created_at,
                    }),
                    progress,
                )
                .await?;
            for m in members {
                importer
                    .push(
                        Record::ScopeSession(ScopeSessionRecord {
                            scope: scope.id.clone(),
                            session: m.id,
                            // The API does not say when a session was added: the scope's birth.
                            added_at: scope.created_at,
                        }),
                        progress,
                    )
                    .await?;
            }
        }

        for s in &sessions {
            if position.sessions_done.contains(&s.id) {
                continue;
            }
            let mut page = if position.session.as_deref() == Some(&s.id) {
                position.pages_read + 1
            } else {
                1
            };
            // Each message's seq as read by this run, for the summaries that name them.
            let mut seqs = std::collections::HashMap::new();
            loop {
                let p: Page<Message> = client
                    .call(
                        reqwest::Method::POST,
                        &format!(
                            "/workspaces/{ws}/sessions/{}/messages/list?page={page}&size={SIZE}",
                            s.id
                        ),
                        Some(json!({})),
                    )
                    .await?;
                let first_seq = (page - 1) * SIZE + 1;
                for (i, m) in p.items.into_iter().enumerate() {
                    let seq = (first_seq + i as u64) as i64;
                    seqs.insert(m.id.clone(), seq);
                    importer
                        .push(
                            Record::Message(MessageRecord {
                                id: local_id(ws, m.id),
                                session: s.id.clone(),
                                peer: m.peer_id,
                                seq_in_session: seq,
                                content: m.content,
                                metadata: object(m.metadata),
                                internal_metadata: json!({}),
                                token_count: m.token_count,
                                created_at: m.created_at,
                                embedding: None,
                            }),
                            progress,
                        )
                        .await?;
                }
                // What was pushed is written before the position says it was.
                importer.flush_now(progress).await?;
                position.session = Some(s.id.clone());
                position.pages_read = page;
                store
                    .set_import_checkpoint(&source, ws, Some(&json!(position)))
                    .await?;
                if page >= p.pages {
                    break;
                }
                page += 1;
            }
            // Before the session is recorded done, so a run stopped here reads them again.
            let both: Summaries = client
                .call(
                    reqwest::Method::GET,
                    &format!("/workspaces/{ws}/sessions/{}/summaries", s.id),
                    None,
                )
                .await?;
            for (kind, summary) in [("short", both.short_summary), ("long", both.long_summary)] {
                let Some(summary) = summary else { continue };
                let id = local_id(ws, summary.message_id.clone());
                // A message read by an earlier run (this one resumed inside the session) is
                // already here, with its seq.
                let seq = match seqs.get(&summary.message_id) {
                    Some(seq) => Some(*seq),
                    None => store.message(ws, &id).await?.map(|m| m.seq_in_session),
                };
                // A summary naming a message its session does not list is not carried over.
                let Some(seq_in_session) = seq else { continue };
                importer
                    .push(
                        Record::Summary(SummaryRecord {
                            session: s.id.clone(),
                            kind: kind.into(),
                            content: summary.content,
                            message_id: id,
                            seq_in_session,
                            token_count: summary.token_count,
                            created_at: summary.created_at,
                        }),
                        progress,
                    )
                    .await?;
            }
            importer.flush_now(progress).await?;
            position.sessions_done.push(s.id.clone());
            position.session = None;
            position.pages_read = 0;
            store
                .set_import_checkpoint(&source, ws, Some(&json!(position)))
                .await?;
        }

        for c in conclusions {
            importer
                .push(
                    Record::Conclusion(ConclusionRecord {
                        id: local_id(ws, c.id),
                        observer: c.observer_id,
                        observed: c.observed_id,
                        session: c.session_id,
                        content: c.content,
                        level: c.level.unwrap_or_else(|| "explicit".into()),
                        times_derived: 1,
                        source_ids: None,
                        message_ids: Vec::new(),
                        metadata: json!({}),
                        internal_metadata: json!({}),
                        created_at: c.created_at,
                        deleted_at: None,
                        embedding: None,
                    }),
                    progress,
                )
                .await?;
        }
        // What this run read: messages skipped as read by an earlier run are not in the count.
        let end = importer.read();
        importer.push(Record::End(end), progress).await?;
        let report = importer.finish(progress).await?;
        store.set_import_checkpoint(&source, ws, None).await?;
        Ok(report)
    }
}

impl Client {
    /// Every item of a `GET` route that answers a page.
    async fn list_get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Vec<T>, ImportHonchoError> {
        self.pages(reqwest::Method::GET, path, None).await
    }
}
