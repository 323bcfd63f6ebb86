//! Import: an export's records into a workspace, in batches of one kind, each batch one
//! transaction. A record is keyed by what names it in the workspace (a peer's, a session's or a
//! scope's name, a membership's pair, a message's or a conclusion's id, a summary's session and
//! kind, a card entry's pair and position, a dream's pair): a row with its key and the same
//! content is left as it is, so an import killed midway and run again writes each row once.
//! A row with its key and different content is a conflict, settled by [`OnConflict`].
//!
//! Imported under another workspace name, messages and conclusions take new ids, derived from
//! the name and the old id (the same on every run): ids are unique across the server, and the
//! workspace the file came from may live beside the copy.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, Value as SqlValue};
use sha2::{Digest, Sha256};

use super::{
    CardEntryRecord, ConclusionRecord, DreamRecord, EmbeddingModel, End, Header, MemberRecord,
    MessageRecord, NamedRecord, PAGE, Record, ScopeRecord, ScopeSessionRecord, SummaryRecord,
    WorkspaceRecord, decode_vector,
};
use crate::store::configuration::Defaults;
use crate::store::vectors::{FlatVectors, nth_vector};
use crate::store::{Store, StoreError, StoreResult, TxOptions, new_id, stmt};

/// What an import does with a row that exists with other content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnConflict {
    /// Stop: the batch holding it is not written (batches before it are).
    #[default]
    Fail,
    /// Keep the existing row.
    Skip,
    /// Overwrite the existing row with the file's.
    Replace,
}

#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// The workspace to import into (None: the one the file was exported from).
    pub workspace: Option<String>,
    pub on_conflict: OnConflict,
    /// Records per transaction.
    pub batch: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            workspace: None,
            on_conflict: OnConflict::Fail,
            batch: PAGE as usize,
        }
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub workspace: String,
    /// Rows written that did not exist.
    pub inserted: u64,
    /// Rows that existed with the same content.
    pub unchanged: u64,
    /// Rows that existed with other content and were kept ([`OnConflict::Skip`]).
    pub skipped: u64,
    /// Rows that existed with other content and were overwritten ([`OnConflict::Replace`]).
    pub replaced: u64,
    /// Messages read from the file.
    pub messages: u64,
    /// Whether the file's vectors were kept (same model and dimension as this server's).
    pub vectors_reused: bool,
    /// Vectors computed here because the file's came from another model.
    pub embedded: u64,
}

/// What an import reports as it goes.
pub trait ImportProgress: Send + Sync {
    /// `n` more records of `kind` (`peer`, `message`, …) are written.
    fn advanced(&self, _kind: &'static str, _n: u64) {}
}

impl ImportProgress for () {}

/// An import under way: [`Importer::push`] each record after the header, then
/// [`Importer::finish`].
pub struct Importer {
    store: Store,
    source: String,
    options: ImportOptions,
    reuse_vectors: bool,
    pending: Vec<Record>,
    read: End,
    end: Option<End>,
    report: ImportReport,
}

impl Store {
    /// Starts importing a file whose first line was `header` (docs/export.md).
    pub async fn importer(&self, header: Header, options: ImportOptions) -> StoreResult<Importer> {
        let target = options
            .workspace
            .clone()
            .unwrap_or_else(|| header.workspace.clone());
        crate::store::validate::name("workspace", &target)?;
        // As `serve` does: vectors of the wrong model or size are refused before any is
        // written, and the database records the model whose vectors it is about to hold.
        if self.embedder().is_some() {
            self.check_embedder().await?;
        }
        let here = self.embedding_model().await?;
        let reuse_vectors = header.embedding.model.is_some() && header.embedding == here;
        Ok(Importer {
            store: self.clone(),
            source: header.workspace,
            options: ImportOptions {
                batch: options.batch.clamp(1, 10_000),
                ..options
            },
            reuse_vectors,
            pending: Vec::new(),
            read: End::default(),
            end: None,
            report: ImportReport {
                workspace: target,
                vectors_reused: reuse_vectors,
                ..ImportReport::default()
            },
        })
    }

    /// Imports the export `input` holds (zstd-compressed JSON lines, read on a thread of its
    /// own): the header, then every record, in batches ([`Importer`]).
    pub async fn import_file(
        &self,
        input: impl std::io::Read + Send + 'static,
        options: ImportOptions,
        progress: &dyn ImportProgress,
    ) -> StoreResult<ImportReport> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<StoreResult<Record>>(1024);
        let reader = tokio::task::spawn_blocking(move || {
            let unreadable = |e: std::io::Error| {
                StoreError::invalid(format!("the input is not a zstd-compressed export: {e}"))
            };
            let lines = match zstd::stream::read::Decoder::new(input) {
                Ok(d) => std::io::BufReader::new(d),
                Err(e) => {
                    let _ = tx.blocking_send(Err(unreadable(e)));
                    return;
                }
            };
            for line in std::io::BufRead::split(lines, b'\n') {
                let record = line.map_err(unreadable).and_then(|l| Record::parse(&l));
                let failed = record.is_err();
                if tx.blocking_send(record).is_err() || failed {
                    return;
                }
            }
        });
        let header = match rx.recv().await {
            Some(first) => first?.into_header()?,
            None => return Err(StoreError::invalid("the input is empty: no export header")),
        };
        let mut importer = self.importer(header, options).await?;
        while let Some(record) = rx.recv().await {
            importer.push(record?, progress).await?;
        }
        reader
            .await
            .map_err(|e| StoreError::Internal(format!("the export reader stopped: {e}")))?;
        importer.finish(progress).await
    }

    /// The model (and dimension) of the vectors this server writes: its embedder's, else what
    /// the database records.
    pub async fn embedding_model(&self) -> StoreResult<EmbeddingModel> {
        if let Some(e) = self.embedder() {
            return Ok(EmbeddingModel {
                model: Some(e.model_id().to_owned()),
                dims: e.dims() as u32,
            });
        }
        let rows = self
            .db()
            .query_all_raw(stmt(
                "SELECT key, value FROM honcho_meta \
                 WHERE key IN ('embedding_model', 'embedding_dims')",
                [],
            ))
            .await?;
        let mut here = EmbeddingModel {
            model: None,
            dims: 0,
        };
        for r in rows {
            let key: String = r.try_get("", "key")?;
            let value: String = r.try_get("", "value")?;
            match key.as_str() {
                "embedding_model" => here.model = Some(value),
                _ => here.dims = value.parse().unwrap_or(0),
            }
        }
        Ok(here)
    }
}

fn kind_of(r: &Record) -> &'static str {
    match r {
        Record::Header(_) => "header",
        Record::Workspace(_) => "workspace",
        Record::Peer(_) => "peer",
        Record::Session(_) => "session",
        Record::Member(_) => "member",
        Record::Message(_) => "message",
        Record::Conclusion(_) => "conclusion",
        Record::Summary(_) => "summary",
        Record::CardEntry(_) => "card entry",
        Record::Scope(_) => "scope",
        Record::ScopeSession(_) => "scope session",
        Record::Dream(_) => "dream",
        Record::End(_) => "end",
    }
}

impl Importer {
    /// The workspace written to.
    pub fn workspace(&self) -> &str {
        &self.report.workspace
    }

    /// How many records of each kind were pushed so far.
    pub fn read(&self) -> End {
        self.read.clone()
    }

    /// Writes the records pushed so far (they are written in full batches otherwise).
    pub async fn flush_now(&mut self, progress: &dyn ImportProgress) -> StoreResult<()> {
        self.flush(progress).await
    }

    /// Takes the next record; writes a batch when one is full.
    pub async fn push(&mut self, record: Record, progress: &dyn ImportProgress) -> StoreResult<()> {
        if self.end.is_some() {
            return Err(StoreError::invalid("a record after the end line"));
        }
        if self
            .pending
            .first()
            .is_some_and(|p| kind_of(p) != kind_of(&record))
            || self.pending.len() >= self.options.batch
        {
            self.flush(progress).await?;
        }
        match record {
            Record::Header(_) => return Err(StoreError::invalid("a second header line")),
            Record::End(end) => {
                self.flush(progress).await?;
                self.end = Some(end);
            }
            Record::Workspace(ws) => self.workspace_record(ws).await?,
            other => {
                match &other {
                    Record::Peer(_) => self.read.peers += 1,
                    Record::Session(_) => self.read.sessions += 1,
                    Record::Member(_) => self.read.members += 1,
                    Record::Message(_) => self.read.messages += 1,
                    Record::Conclusion(_) => self.read.conclusions += 1,
                    Record::Summary(_) => self.read.summaries += 1,
                    Record::CardEntry(_) => self.read.card_entries += 1,
                    Record::Scope(_) => self.read.scopes += 1,
                    Record::ScopeSession(_) => self.read.scope_sessions += 1,
                    _ => self.read.dreams += 1,
                }
                self.pending.push(other);
            }
        }
        Ok(())
    }

    /// Writes what is left, checks the file was whole, and embeds what came from another model.
    pub async fn finish(mut self, progress: &dyn ImportProgress) -> StoreResult<ImportReport> {
        self.flush(progress).await?;
        self.report.messages = self.read.messages;
        match &self.end {
            Some(end) if *end == self.read => {}
            Some(end) => {
                return Err(StoreError::invalid(format!(
                    "the file's end line counts {end:?} but it held {:?}",
                    self.read
                )));
            }
            None => {
                return Err(StoreError::invalid(
                    "the file ends without its end line (truncated?): what it held is \
                     imported; import the whole file again to finish",
                ));
            }
        }
        if !self.reuse_vectors && self.store.embedder().is_some() {
            self.report.embedded = self.store.embed_missing_in(&self.report.workspace).await?;
        }
        Ok(self.report)
    }

    fn remap(&self, id: String) -> String {
        if self.source == self.report.workspace {
            id
        } else {
            derived_id(&self.report.workspace, &id)
        }
    }

    async fn workspace_record(&mut self, ws: WorkspaceRecord) -> StoreResult<()> {
        let mut cols = Columns::new(NAMED);
        let ws = WorkspaceRecord {
            name: self.report.workspace.clone(),
            ..ws
        };
        cols.push(named_row(new_id(), ws));
        let rows = Batch {
            keyed_by_workspace: false,
            insert_only: &["id"],
            ..cols.batch("workspaces", "workspace", &["name"])
        };
        let outcome = self.write(rows).await?;
        self.tally(outcome);
        Ok(())
    }

    async fn flush(&mut self, progress: &dyn ImportProgress) -> StoreResult<()> {
        let pending = std::mem::take(&mut self.pending);
        let Some(first) = pending.first() else {
            return Ok(());
        };
        let kind = kind_of(first);
        let n = pending.len() as u64;
        let batch = match kind {
            "peer" | "session" => self.named(pending),
            "member" => members(pending),
            "message" => self.messages(pending)?,
            "conclusion" => self.conclusions(pending)?,
            "summary" => self.summaries(pending),
            "card entry" => self.card_entries(pending),
            "scope" => scopes(pending),
            "scope session" => scope_sessions(pending),
            _ => dreams(pending),
        };
        let outcome = self.write(batch).await?;
        self.tally(outcome);
        progress.advanced(kind, n);
        Ok(())
    }

    fn tally(&mut self, o: Outcome) {
        self.report.inserted += o.inserted;
        self.report.unchanged += o.unchanged;
        self.report.skipped += o.skipped;
        self.report.replaced += o.replaced;
    }

    fn named(&self, pending: Vec<Record>) -> Batch {
        let mut cols = Columns::new(NAMED);
        let table = match pending.first() {
            Some(Record::Peer(_)) => "peers",
            _ => "sessions",
        };
        for r in pending {
            let (Record::Peer(named) | Record::Session(named)) = r else {
                continue;
            };
            cols.push(named_row(new_id(), named));
        }
        let what = if table == "peers" { "peer" } else { "session" };
        Batch {
            insert_only: &["id"],
            ..cols.batch(table, what, &["name"])
        }
    }

    fn messages(&self, pending: Vec<Record>) -> StoreResult<Batch> {
        let mut cols = Columns::new([
            ("public_id", "text"),
            ("session_name", "text"),
            ("peer_name", "text"),
            ("seq_in_session", "bigint"),
            ("content", "text"),
            ("metadata", "jsonb"),
            ("internal_metadata", "jsonb"),
            ("token_count", "int"),
            ("created_at", "timestamptz"),
        ]);
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(pending.len());
        for r in pending {
            let Record::Message(MessageRecord {
                id,
                session,
                peer,
                seq_in_session,
                content,
                metadata,
                internal_metadata,
                token_count,
                created_at,
                embedding,
            }) = r
            else {
                continue;
            };
            vectors.push(self.vector(&id, embedding)?);
            cols.push(vec![
                self.remap(id).into(),
                session.into(),
                peer.into(),
                seq_in_session.into(),
                content.into(),
                metadata.to_string().into(),
                internal_metadata.to_string().into(),
                token_count.into(),
                created_at.into(),
            ]);
        }
        let (flat, present) = FlatVectors::new(vectors.iter().map(|v| v.as_deref()))?;
        Ok(Batch {
            extra: Some(Extra::Vectors {
                flat,
                present,
                reused: self.reuse_vectors,
            }),
            ..cols.batch("messages", "message", &["public_id"])
        })
    }

    fn conclusions(&self, pending: Vec<Record>) -> StoreResult<Batch> {
        let mut cols = Columns::new([
            ("id", "text"),
            ("observer", "text"),
            ("observed", "text"),
            ("session_name", "nulltext"),
            ("content", "text"),
            ("level", "text"),
            ("times_derived", "int"),
            ("source_ids", "jsontextarray"),
            ("metadata", "jsonb"),
            ("internal_metadata", "jsonb"),
            ("created_at", "timestamptz"),
            ("deleted_at", "nulltimestamptz"),
        ]);
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(pending.len());
        let mut links = (Vec::new(), Vec::new());
        for r in pending {
            let Record::Conclusion(ConclusionRecord {
                id,
                observer,
                observed,
                session,
                content,
                level,
                times_derived,
                source_ids,
                message_ids,
                metadata,
                internal_metadata,
                created_at,
                deleted_at,
                embedding,
            }) = r
            else {
                continue;
            };
            vectors.push(self.vector(&id, embedding)?);
            let id = self.remap(id);
            for m in message_ids {
                links.0.push(SqlValue::from(id.clone()));
                links.1.push(SqlValue::from(self.remap(m)));
            }
            let sources = source_ids.map(|s| {
                serde_json::Value::from(s.into_iter().map(|i| self.remap(i)).collect::<Vec<_>>())
                    .to_string()
            });
            cols.push(vec![
                id.into(),
                observer.into(),
                observed.into(),
                session.unwrap_or_default().into(),
                content.into(),
                level.into(),
                times_derived.into(),
                sources.unwrap_or_default().into(),
                metadata.to_string().into(),
                internal_metadata.to_string().into(),
                created_at.into(),
                deleted_at
                    .map(|d| d.to_rfc3339())
                    .unwrap_or_default()
                    .into(),
            ]);
        }
        let (flat, present) = FlatVectors::new(vectors.iter().map(|v| v.as_deref()))?;
        Ok(Batch {
            extra: Some(Extra::Conclusions {
                flat,
                present,
                reused: self.reuse_vectors,
                links,
            }),
            ..cols.batch("conclusions", "conclusion", &["id"])
        })
    }

    /// A summary names its last message by public id; [`Batch::expr`] finds the row
    /// (`messageref`). Each summary also gets its unit, done up to it ([`Extra::Summaries`]).
    fn summaries(&self, pending: Vec<Record>) -> Batch {
        let mut cols = Columns::new([
            ("session_name", "text"),
            ("kind", "text"),
            ("content", "text"),
            ("message_id", "messageref"),
            ("seq_in_session", "bigint"),
            ("token_count", "int"),
            ("created_at", "timestamptz"),
        ]);
        for r in pending {
            let Record::Summary(SummaryRecord {
                session,
                kind,
                content,
                message_id,
                seq_in_session,
                token_count,
                created_at,
            }) = r
            else {
                continue;
            };
            cols.push(vec![
                session.into(),
                kind.into(),
                content.into(),
                self.remap(message_id).into(),
                seq_in_session.into(),
                token_count.into(),
                created_at.into(),
            ]);
        }
        Batch {
            extra: Some(Extra::Summaries),
            ..cols.batch("session_summaries", "summary", &["session_name", "kind"])
        }
    }

    fn card_entries(&self, pending: Vec<Record>) -> Batch {
        let mut cols = Columns::new([
            ("observer", "text"),
            ("observed", "text"),
            ("position", "int"),
            ("content", "text"),
            ("created_at", "timestamptz"),
        ]);
        let mut links = CardLinks::default();
        for r in pending {
            let Record::CardEntry(CardEntryRecord {
                observer,
                observed,
                position,
                content,
                conclusion_ids,
                created_at,
            }) = r
            else {
                continue;
            };
            for c in conclusion_ids {
                links.key.push(format!("{observer}/{observed}/{position}"));
                links.observer.push(observer.clone().into());
                links.observed.push(observed.clone().into());
                links.position.push(position.into());
                links.conclusion.push(self.remap(c).into());
            }
            cols.push(vec![
                observer.into(),
                observed.into(),
                position.into(),
                content.into(),
                created_at.into(),
            ]);
        }
        let key = &["observer", "observed", "position"];
        Batch {
            extra: Some(Extra::CardSources(links)),
            ..cols.batch("peer_card_entries", "card entry", key)
        }
    }

    /// The record's vector when the file's model is this server's, None otherwise.
    fn vector(&self, id: &str, embedding: Option<String>) -> StoreResult<Option<Vec<f32>>> {
        if !self.reuse_vectors {
            return Ok(None);
        }
        embedding
            .map(|e| {
                decode_vector(&e)
                    .ok_or_else(|| StoreError::invalid(format!("the vector of {id} is not base64")))
            })
            .transpose()
    }

    async fn write(&self, batch: Batch) -> StoreResult<Outcome> {
        let workspace = self.report.workspace.clone();
        let on_conflict = self.options.on_conflict;
        let batch = &batch;
        self.store
            .transaction(TxOptions::default(), |txn| {
                let workspace = workspace.clone();
                async move { batch.run(&*txn, &workspace, on_conflict).await }
            })
            .await
    }
}

/// 21 characters of nanoid's alphabet from `workspace` and `id`: an id for a copy under another
/// name that every run of the same import derives again.
pub fn derived_id(workspace: &str, id: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let digest = Sha256::new()
        .chain_update(workspace.as_bytes())
        .chain_update([0])
        .chain_update(id.as_bytes())
        .finalize();
    digest
        .iter()
        .take(21)
        .map(|b| ALPHABET[(b & 63) as usize] as char)
        .collect()
}

fn members(pending: Vec<Record>) -> Batch {
    let mut cols = Columns::new([
        ("session_name", "text"),
        ("peer_name", "text"),
        ("configuration", "jsonb"),
        ("internal_metadata", "jsonb"),
        ("joined_at", "timestamptz"),
        ("left_at", "nulltimestamptz"),
    ]);
    for r in pending {
        let Record::Member(MemberRecord {
            session,
            peer,
            configuration,
            internal_metadata,
            joined_at,
            left_at,
        }) = r
        else {
            continue;
        };
        cols.push(vec![
            session.into(),
            peer.into(),
            configuration.to_string().into(),
            internal_metadata.to_string().into(),
            joined_at.into(),
            left_at.map(|d| d.to_rfc3339()).unwrap_or_default().into(),
        ]);
    }
    cols.batch(
        "session_peers",
        "membership",
        &["session_name", "peer_name"],
    )
}

fn scopes(pending: Vec<Record>) -> Batch {
    let mut cols = Columns::new([
        ("id", "text"),
        ("name", "text"),
        ("metadata", "jsonb"),
        ("created_at", "timestamptz"),
    ]);
    for r in pending {
        let Record::Scope(ScopeRecord {
            name,
            metadata,
            created_at,
        }) = r
        else {
            continue;
        };
        cols.push(vec![
            new_id().into(),
            name.into(),
            metadata.to_string().into(),
            created_at.into(),
        ]);
    }
    Batch {
        insert_only: &["id"],
        ..cols.batch("scopes", "scope", &["name"])
    }
}

fn scope_sessions(pending: Vec<Record>) -> Batch {
    let mut cols = Columns::new([
        ("scope_name", "text"),
        ("session_name", "text"),
        ("added_at", "timestamptz"),
    ]);
    for r in pending {
        let Record::ScopeSession(ScopeSessionRecord {
            scope,
            session,
            added_at,
        }) = r
        else {
            continue;
        };
        cols.push(vec![scope.into(), session.into(), added_at.into()]);
    }
    let key = &["scope_name", "session_name"];
    cols.batch("scope_sessions", "scope membership", key)
}

/// Only what the scheduled check compares with; a pending request, a lease or a failure of the
/// pair here is left as it is.
fn dreams(pending: Vec<Record>) -> Batch {
    let mut cols = Columns::new([
        ("observer", "text"),
        ("observed", "text"),
        ("last_dream_at", "timestamptz"),
        ("explicit_at_last_dream", "bigint"),
    ]);
    for r in pending {
        let Record::Dream(DreamRecord {
            observer,
            observed,
            last_dream_at,
            explicit_at_last_dream,
        }) = r
        else {
            continue;
        };
        cols.push(vec![
            observer.into(),
            observed.into(),
            last_dream_at.into(),
            explicit_at_last_dream.into(),
        ]);
    }
    cols.batch("dream_units", "dream", &["observer", "observed"])
}

/// A card entry's citations, one row per (entry, conclusion): the entry by its place.
#[derive(Default)]
struct CardLinks {
    /// The entry's key as [`Batch::key_text`] writes it.
    key: Vec<String>,
    observer: Vec<SqlValue>,
    observed: Vec<SqlValue>,
    position: Vec<SqlValue>,
    conclusion: Vec<SqlValue>,
}

impl CardLinks {
    /// The links of the entries whose key passes `keep`.
    fn of(&self, keep: impl Fn(&str) -> bool) -> CardLinks {
        let mut out = CardLinks::default();
        for (i, key) in self.key.iter().enumerate() {
            if keep(key) {
                out.key.push(key.clone());
                out.observer.push(self.observer[i].clone());
                out.observed.push(self.observed[i].clone());
                out.position.push(self.position[i].clone());
                out.conclusion.push(self.conclusion[i].clone());
            }
        }
        out
    }
}

/// The columns of workspaces, peers and sessions, which are written alike.
const NAMED: [(&str, &str); 6] = [
    ("id", "text"),
    ("name", "text"),
    ("metadata", "jsonb"),
    ("internal_metadata", "jsonb"),
    ("configuration", "jsonb"),
    ("created_at", "timestamptz"),
];

/// A workspace's, peer's or session's row of [`NAMED`], under the internal id `id`.
fn named_row(id: String, r: NamedRecord) -> Vec<SqlValue> {
    vec![
        id.into(),
        r.name.into(),
        r.metadata.to_string().into(),
        r.internal_metadata.to_string().into(),
        r.configuration.to_string().into(),
        r.created_at.into(),
    ]
}

/// Column-wise values of a batch, each column named `(column, kind)` as in [`Batch::arrays`],
/// filled a row at a time in that order.
struct Columns<const N: usize> {
    names: [(&'static str, &'static str); N],
    values: [Vec<SqlValue>; N],
}

impl<const N: usize> Columns<N> {
    fn new(names: [(&'static str, &'static str); N]) -> Self {
        Columns {
            names,
            values: std::array::from_fn(|_| Vec::new()),
        }
    }

    fn push(&mut self, row: Vec<SqlValue>) {
        for (col, v) in self.values.iter_mut().zip(row) {
            col.push(v);
        }
    }

    /// A batch of these columns into a table keyed by workspace, with no insert-only column
    /// and nothing extra.
    fn batch(self, table: &'static str, what: &'static str, key: &'static [&'static str]) -> Batch {
        let arrays = self
            .names
            .into_iter()
            .zip(self.values)
            .map(|((name, kind), vals)| (name, kind, vals))
            .collect();
        Batch {
            table,
            what,
            key,
            keyed_by_workspace: true,
            arrays,
            insert_only: &[],
            extra: None,
        }
    }
}

/// What a batch writes besides its columns.
enum Extra {
    Vectors {
        flat: FlatVectors,
        present: Vec<bool>,
        reused: bool,
    },
    Conclusions {
        flat: FlatVectors,
        present: Vec<bool>,
        reused: bool,
        /// (conclusion id, message public id) pairs.
        links: (Vec<SqlValue>, Vec<SqlValue>),
    },
    /// Each summary's unit, written done up to the summary's last message when the session has
    /// none: the deriver's next summary of the kind then starts from the imported one instead of
    /// summarising the session again from its first message.
    Summaries,
    CardSources(CardLinks),
}

impl Extra {
    fn has_vectors(&self) -> bool {
        matches!(self, Extra::Vectors { .. } | Extra::Conclusions { .. })
    }
}

/// One batch of one table: arrays bound column-wise, each named `(column, kind, values)`, where
/// kind is an SQL type, or `nulltext`/`nulltimestamptz` (empty text is NULL), `jsontextarray`
/// (a JSON array's text, empty for NULL) or `messageref` (a message's public id, written as its
/// row id).
struct Batch {
    table: &'static str,
    what: &'static str,
    key: &'static [&'static str],
    /// Whether the table has a `workspace_name` column bound to `$1`.
    keyed_by_workspace: bool,
    arrays: Vec<(&'static str, &'static str, Vec<SqlValue>)>,
    /// Columns written by an insert only (an internal id), never compared or replaced.
    insert_only: &'static [&'static str],
    extra: Option<Extra>,
}

#[derive(Default)]
struct Outcome {
    inserted: u64,
    unchanged: u64,
    skipped: u64,
    replaced: u64,
}

impl Batch {
    /// `unnest(...) WITH ORDINALITY AS s(...)`, its arrays from `$2`, and the values bound
    /// (`$1` the workspace, then the arrays, then the vectors).
    fn source(&self, workspace: &str) -> (String, Vec<SqlValue>) {
        let mut values: Vec<SqlValue> = vec![workspace.into()];
        let mut args = Vec::new();
        let mut names = Vec::new();
        for (i, (name, kind, vals)) in self.arrays.iter().enumerate() {
            let ty = match *kind {
                "jsonb" | "nulltext" | "jsontextarray" | "nulltimestamptz" | "messageref" => "text",
                other => other,
            };
            args.push(format!("${}::{ty}[]", i + 2));
            names.push(*name);
            values.push(array_value(ty, vals.clone()));
        }
        let mut select = String::new();
        if let Some(Extra::Vectors { present, .. } | Extra::Conclusions { present, .. }) =
            &self.extra
        {
            args.push(format!("${}::bool[]", values.len() + 1));
            names.push("has_vector");
            values.push(present.clone().into());
        }
        select.push_str(&format!(
            "unnest({}) WITH ORDINALITY AS s({}, ord)",
            args.join(", "),
            names.join(", ")
        ));
        if let Some(
            Extra::Vectors {
                flat, reused: true, ..
            }
            | Extra::Conclusions {
                flat, reused: true, ..
            },
        ) = &self.extra
        {
            values.push(flat.values.clone().into());
            values.push(flat.dims.into());
        }
        (select, values)
    }

    /// The SQL value of column `name` from the source row `s`.
    fn expr(&self, name: &str) -> String {
        let kind = self
            .arrays
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or("text", |(_, k, _)| *k);
        match kind {
            "jsonb" => format!("s.{name}::jsonb"),
            "nulltext" => format!("NULLIF(s.{name}, '')"),
            "nulltimestamptz" => format!("NULLIF(s.{name}, '')::timestamptz"),
            "jsontextarray" => format!(
                "CASE WHEN s.{name} = '' THEN NULL ELSE \
                 ARRAY(SELECT jsonb_array_elements_text(s.{name}::jsonb)) END"
            ),
            "messageref" => format!(
                "(SELECT m.id FROM messages m \
                 WHERE m.workspace_name = $1 AND m.public_id = s.{name})"
            ),
            _ => format!("s.{name}"),
        }
    }

    /// The vector of the source row, when the batch carries vectors the server may keep.
    fn vector_expr(&self, n_values: usize) -> Option<String> {
        match &self.extra {
            Some(Extra::Vectors { reused: true, .. } | Extra::Conclusions { reused: true, .. }) => {
                let v = nth_vector(
                    &format!("${}::real[]", n_values - 1),
                    &format!("${}::int", n_values),
                    "s.ord",
                );
                Some(format!("CASE WHEN s.has_vector THEN {v} END"))
            }
            _ => None,
        }
    }

    fn key_text(&self, alias: &str) -> String {
        self.key
            .iter()
            .map(|k| format!("{alias}.{k}"))
            .collect::<Vec<_>>()
            .join(" || '/' || ")
    }

    async fn run<C: ConnectionTrait>(
        &self,
        db: &C,
        workspace: &str,
        on_conflict: OnConflict,
    ) -> StoreResult<Outcome> {
        let (source, values) = self.source(workspace);
        let vector = self.vector_expr(values.len());
        let columns: Vec<&str> = self.arrays.iter().map(|(n, _, _)| *n).collect();
        let mut insert_cols: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        let mut insert_vals: Vec<String> = columns.iter().map(|c| self.expr(c)).collect();
        if self.keyed_by_workspace {
            insert_cols.push("workspace_name".into());
            insert_vals.push("$1".into());
        }
        if let Some(v) = &vector {
            insert_cols.push("embedding".into());
            insert_vals.push(v.clone());
        }
        let inserted: HashSet<String> = db
            .query_all_raw(stmt(
                &format!(
                    "INSERT INTO {table} AS t ({cols}) SELECT {vals} FROM {source} \
                     ON CONFLICT DO NOTHING RETURNING {key} AS k",
                    table = self.table,
                    cols = insert_cols.join(", "),
                    vals = insert_vals.join(", "),
                    key = self.key_text("t"),
                ),
                values.clone(),
            ))
            .await?
            .iter()
            .map(|r| r.try_get::<String>("", "k"))
            .collect::<Result<_, _>>()?;
        let compared: Vec<&str> = columns
            .iter()
            .copied()
            .filter(|c| !self.insert_only.contains(c))
            .collect();
        let mut t_cols: Vec<String> = compared.iter().map(|c| format!("t.{c}")).collect();
        let mut s_cols: Vec<String> = compared.iter().map(|c| self.expr(c)).collect();
        if let Some(v) = &vector {
            t_cols.push("t.embedding".into());
            s_cols.push(v.clone());
        }
        let scope = if self.keyed_by_workspace {
            "t.workspace_name = $1 AND "
        } else {
            ""
        };
        let join = self
            .key
            .iter()
            .map(|k| format!("t.{k} = {}", self.expr(k)))
            .collect::<Vec<_>>()
            .join(" AND ");
        let existing = db
            .query_all_raw(stmt(
                &format!(
                    "SELECT {skey} AS k, t.{first} IS NOT NULL AS present, \
                     ROW({t}) IS DISTINCT FROM ROW({s}) AS differs \
                     FROM {source} LEFT JOIN {table} t ON {scope}{join}",
                    skey = self.key_text("s"),
                    first = self.key[0],
                    t = t_cols.join(", "),
                    s = s_cols.join(", "),
                    table = self.table,
                ),
                values.clone(),
            ))
            .await?;
        let mut outcome = Outcome {
            inserted: inserted.len() as u64,
            ..Outcome::default()
        };
        let mut differing = Vec::new();
        for r in &existing {
            let key: String = r.try_get("", "k")?;
            if inserted.contains(&key) {
                continue;
            }
            let present: bool = r.try_get("", "present")?;
            if !present {
                return Err(StoreError::Conflict(format!(
                    "{} {key} cannot be written: its id is taken outside this workspace, or \
                     another {} holds its place (the same seq in its session, the same derived \
                     content); nothing of this batch was written",
                    self.what, self.what
                )));
            }
            if r.try_get::<bool>("", "differs")? {
                differing.push(key);
            } else {
                outcome.unchanged += 1;
            }
        }
        if !differing.is_empty() {
            match on_conflict {
                OnConflict::Fail => {
                    return Err(StoreError::Conflict(format!(
                        "{} {} exists with other content ({} in this batch); nothing of this \
                         batch was written (--on-conflict skip keeps what exists, replace \
                         overwrites it)",
                        self.what,
                        differing[0],
                        differing.len()
                    )));
                }
                OnConflict::Skip => outcome.skipped = differing.len() as u64,
                OnConflict::Replace => {
                    let mut sets: Vec<String> = compared
                        .iter()
                        .map(|c| format!("{c} = {}", self.expr(c)))
                        .collect();
                    match &vector {
                        Some(v) => sets.push(format!("embedding = {v}")),
                        None if self.extra.as_ref().is_some_and(Extra::has_vectors) => {
                            sets.push("embedding = NULL".into())
                        }
                        None => {}
                    }
                    let mut vals = values.clone();
                    vals.push(differing.clone().into());
                    db.execute_raw(stmt(
                        &format!(
                            "UPDATE {table} t SET {sets} FROM {source} \
                             WHERE {scope}{join} AND {skey} = ANY(${n}::text[])",
                            table = self.table,
                            sets = sets.join(", "),
                            skey = self.key_text("s"),
                            n = vals.len(),
                        ),
                        vals,
                    ))
                    .await?;
                    outcome.replaced = differing.len() as u64;
                    if matches!(self.extra, Some(Extra::Conclusions { .. })) {
                        db.execute_raw(stmt(
                            "DELETE FROM conclusion_messages WHERE conclusion_id = ANY($1::text[])",
                            [differing.clone().into()],
                        ))
                        .await?;
                    }
                }
            }
        }
        // Links are written with the rows they belong to: an unchanged row has had its own since
        // the batch that inserted it, and a row kept (`skip`) keeps its own.
        let replaced: &[String] = match on_conflict {
            OnConflict::Replace => &differing,
            _ => &[],
        };
        let written = |key: &str| inserted.contains(key) || replaced.iter().any(|k| k == key);
        if let Some(Extra::Conclusions { links, .. }) = &self.extra {
            let (conclusions, messages): (Vec<SqlValue>, Vec<SqlValue>) = links
                .0
                .iter()
                .zip(&links.1)
                .filter(|(c, _)| matches!(c, SqlValue::String(Some(id)) if written(id)))
                .map(|(c, m)| (c.clone(), m.clone()))
                .unzip();
            if !conclusions.is_empty() {
                db.execute_raw(stmt(
                    "INSERT INTO conclusion_messages (conclusion_id, message_id) \
                     SELECT l.c, m.id FROM unnest($2::text[], $3::text[]) AS l(c, m_id) \
                     JOIN messages m ON m.workspace_name = $1 AND m.public_id = l.m_id \
                     JOIN conclusions c ON c.id = l.c AND c.workspace_name = $1 \
                     ON CONFLICT DO NOTHING",
                    [
                        workspace.into(),
                        array_value("text", conclusions),
                        array_value("text", messages),
                    ],
                ))
                .await?;
            }
        }
        match &self.extra {
            Some(Extra::CardSources(links)) => {
                card_sources(db, workspace, &links.of(written), replaced).await?
            }
            Some(Extra::Summaries) => summary_units(db, workspace, self).await?,
            _ => {}
        }
        Ok(outcome)
    }
}

/// Links card entries to the conclusions they cite. The links of `replaced` (the keys of the
/// entries overwritten) that the file does not have are then dropped: after the file's are in,
/// so the statement trigger that deletes an entry left with no link leaves them.
async fn card_sources<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    links: &CardLinks,
    replaced: &[String],
) -> StoreResult<()> {
    if links.conclusion.is_empty() && replaced.is_empty() {
        return Ok(());
    }
    let values = vec![
        workspace.into(),
        array_value("text", links.observer.clone()),
        array_value("text", links.observed.clone()),
        array_value("int", links.position.clone()),
        array_value("text", links.conclusion.clone()),
    ];
    const FILE: &str = "unnest($2::text[], $3::text[], $4::int[], $5::text[]) \
        AS l(observer, observed, position, conclusion_id)";
    const PLACE: &str = "e.workspace_name = $1 AND e.observer = l.observer \
        AND e.observed = l.observed AND e.position = l.position";
    let mut values = values;
    db.execute_raw(stmt(
        &format!(
            "INSERT INTO peer_card_sources (entry_id, conclusion_id) \
             SELECT e.id, c.id FROM {FILE} \
             JOIN peer_card_entries e ON {PLACE} \
             JOIN conclusions c ON c.id = l.conclusion_id AND c.workspace_name = $1 \
             ON CONFLICT DO NOTHING"
        ),
        values.clone(),
    ))
    .await?;
    if replaced.is_empty() {
        return Ok(());
    }
    values.push(replaced.to_vec().into());
    db.execute_raw(stmt(
        &format!(
            "DELETE FROM peer_card_sources ps USING peer_card_entries e \
             WHERE ps.entry_id = e.id AND e.workspace_name = $1 \
               AND e.observer || '/' || e.observed || '/' || e.position = ANY($6::text[]) \
               AND NOT EXISTS (SELECT 1 FROM {FILE} WHERE {PLACE} \
                 AND l.conclusion_id = ps.conclusion_id)"
        ),
        values,
    ))
    .await?;
    Ok(())
}

/// [`Extra::Summaries`] for the summary batch `batch`. The unit's period is a placeholder until
/// the session's next messages cross a threshold, which sets it from the settings in force.
async fn summary_units<C: ConnectionTrait>(
    db: &C,
    workspace: &str,
    batch: &Batch,
) -> StoreResult<()> {
    let array = |name: &str, ty: &str| {
        let vals = batch
            .arrays
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_default();
        array_value(ty, vals)
    };
    let defaults = Defaults::default();
    db.execute_raw(stmt(
        "INSERT INTO summary_units (workspace_name, session_name, kind, every, due_seq, done_seq) \
         SELECT $1, s.session_name, s.kind, \
           CASE s.kind WHEN 'short' THEN $5::int ELSE $6::int END, s.seq, s.seq \
         FROM unnest($2::text[], $3::text[], $4::bigint[]) AS s(session_name, kind, seq) \
         JOIN session_summaries x ON x.workspace_name = $1 AND x.session_name = s.session_name \
           AND x.kind = s.kind AND x.seq_in_session = s.seq \
         ON CONFLICT (workspace_name, session_name, kind) DO NOTHING",
        [
            workspace.into(),
            array("session_name", "text"),
            array("kind", "text"),
            array("seq_in_session", "bigint"),
            (defaults.messages_per_short_summary as i32).into(),
            (defaults.messages_per_long_summary as i32).into(),
        ],
    ))
    .await?;
    Ok(())
}

/// An SQL array of `ty` from its elements.
fn array_value(ty: &str, vals: Vec<SqlValue>) -> SqlValue {
    use sea_orm::sea_query::ArrayType;
    let at = match ty {
        "bigint" => ArrayType::BigInt,
        "int" => ArrayType::Int,
        "timestamptz" => ArrayType::ChronoDateTimeUtc,
        _ => ArrayType::String,
    };
    SqlValue::Array(at, Some(Box::new(vals)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_nanoid_shaped_and_stable() {
        let a = derived_id("copy", "V1StGXR8_Z5jdHi6B-myT");
        assert_eq!(a.len(), 21);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert_eq!(a, derived_id("copy", "V1StGXR8_Z5jdHi6B-myT"));
        assert_ne!(a, derived_id("other", "V1StGXR8_Z5jdHi6B-myT"));
    }
}
