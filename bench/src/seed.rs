//! Deterministic data: sentences from a word list, conversations, conclusion trees, inserted with
//! SQL directly (the seed is not what is measured).

use std::sync::Arc;

use anyhow::Context as _;
use honcho_graphql::embed::Embedder;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value};

use crate::common::bar;

/// SplitMix64: small, fast, and the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.range(0, xs.len() - 1)]
    }
    /// A 21-character id in the nanoid alphabet.
    pub fn nanoid(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
        (0..21)
            .map(|_| ALPHABET[(self.next_u64() % 64) as usize] as char)
            .collect()
    }
}

const FUNCTION: &[&str] = &[
    "the", "a", "to", "and", "of", "in", "that", "it", "is", "was", "for", "on", "with", "as", "I",
    "you", "we", "they", "but", "so", "if", "my", "your", "our", "this", "at", "from", "about",
    "really", "just", "maybe", "again", "then", "still", "also", "not", "very",
];

const CONTENT: &[&str] = &[
    "coffee",
    "morning",
    "meeting",
    "project",
    "deadline",
    "garden",
    "weekend",
    "dinner",
    "recipe",
    "travel",
    "flight",
    "hotel",
    "mountain",
    "river",
    "book",
    "novel",
    "chapter",
    "music",
    "guitar",
    "piano",
    "concert",
    "movie",
    "series",
    "episode",
    "weather",
    "rain",
    "sunshine",
    "winter",
    "summer",
    "holiday",
    "birthday",
    "gift",
    "family",
    "sister",
    "brother",
    "mother",
    "father",
    "friend",
    "neighbour",
    "dog",
    "cat",
    "walk",
    "run",
    "marathon",
    "training",
    "gym",
    "doctor",
    "appointment",
    "medicine",
    "sleep",
    "dream",
    "idea",
    "plan",
    "budget",
    "salary",
    "office",
    "manager",
    "team",
    "code",
    "database",
    "server",
    "bug",
    "release",
    "customer",
    "email",
    "phone",
    "message",
    "question",
    "answer",
    "problem",
    "solution",
    "school",
    "teacher",
    "exam",
    "language",
    "French",
    "Spanish",
    "kitchen",
    "bread",
    "cheese",
    "wine",
    "tea",
    "breakfast",
    "lunch",
    "city",
    "train",
    "bicycle",
    "car",
    "road",
    "beach",
    "ocean",
    "island",
    "forest",
    "camera",
    "photo",
    "painting",
    "museum",
    "history",
    "science",
    "space",
    "planet",
    "star",
    "election",
    "news",
    "article",
    "podcast",
    "game",
    "chess",
    "football",
    "tennis",
    "score",
    "apartment",
    "rent",
    "furniture",
    "plant",
    "flower",
    "tomato",
    "soup",
    "pasta",
    "vacation",
    "memory",
    "childhood",
    "wedding",
    "promise",
    "secret",
    "surprise",
    "habit",
    "goal",
    "progress",
];

const VERBS: &[&str] = &[
    "like",
    "love",
    "hate",
    "need",
    "want",
    "remember",
    "forgot",
    "finished",
    "started",
    "visited",
    "bought",
    "cooked",
    "read",
    "watched",
    "played",
    "planned",
    "missed",
    "found",
    "lost",
    "called",
    "wrote",
    "fixed",
    "broke",
    "tried",
    "enjoyed",
    "learned",
    "noticed",
    "moved",
    "cleaned",
    "painted",
    "booked",
    "cancelled",
    "shared",
    "discussed",
    "prefer",
    "think",
];

const ADJ: &[&str] = &[
    "good",
    "bad",
    "great",
    "tired",
    "happy",
    "busy",
    "quiet",
    "long",
    "short",
    "new",
    "old",
    "cold",
    "warm",
    "early",
    "late",
    "strange",
    "lovely",
    "difficult",
    "easy",
    "expensive",
    "cheap",
    "small",
    "big",
    "favourite",
    "boring",
    "exciting",
    "honest",
    "careful",
    "lucky",
    "green",
];

/// An English-looking sentence of 5 to 40 words.
pub fn sentence(rng: &mut Rng) -> String {
    let n = if rng.range(0, 3) == 0 {
        rng.range(16, 40)
    } else {
        rng.range(5, 15)
    };
    sentence_of(rng, n)
}

/// A sentence of `n` words from the word lists.
pub fn sentence_of(rng: &mut Rng, n: usize) -> String {
    let mut words: Vec<&str> = Vec::with_capacity(n);
    while words.len() < n {
        match rng.range(0, 9) {
            0..=3 => words.push(*rng.pick(FUNCTION)),
            4..=6 => words.push(*rng.pick(CONTENT)),
            7 => words.push(*rng.pick(VERBS)),
            _ => words.push(*rng.pick(ADJ)),
        }
    }
    let mut s = words.join(" ");
    if let Some(first) = s.get(..1) {
        let up = first.to_uppercase();
        s.replace_range(..1, &up);
    }
    s.push(if rng.range(0, 4) == 0 { '?' } else { '.' });
    s
}

/// Two or three content words, as a search query.
pub fn query(rng: &mut Rng) -> String {
    let n = rng.range(2, 3);
    (0..n)
        .map(|_| *rng.pick(CONTENT))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn stmt(sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// One seeded workspace.
#[derive(Clone, Debug)]
pub struct Workspace {
    pub name: String,
    pub sessions: Vec<String>,
    pub messages_per_session: usize,
    pub peers: Vec<String>,
}

pub struct SeedOptions {
    pub pool: usize,
    pub peers: usize,
}

/// The indexes that make a bulk insert slow; dropped before it and built once after it, each from
/// the definition the migrations gave it.
const DEFERRED_INDEXES: [&str; 3] = [
    "ix_messages_embedding_hnsw",
    "ix_messages_content_trgm",
    "ix_messages_content_tsv",
];

/// Embeds `opts.pool` distinct sentences once and keeps them (with their vectors) in `bench_pool`;
/// every seeded message is one of them.
pub async fn pool(
    db: &DatabaseConnection,
    embedder: &Arc<dyn Embedder>,
    rng: &mut Rng,
    size: usize,
) -> anyhow::Result<()> {
    db.execute_unprepared(
        "CREATE TABLE bench_pool (idx INT PRIMARY KEY, content TEXT NOT NULL, \
         token_count INT NOT NULL, embedding vector(384) NOT NULL)",
    )
    .await?;
    let mut seen = std::collections::HashSet::new();
    let mut texts = Vec::with_capacity(size);
    while texts.len() < size {
        let s = sentence(rng);
        if seen.insert(s.clone()) {
            texts.push(s);
        }
    }
    let rows: Vec<(String, String)> = texts.into_iter().map(|t| (t.clone(), t)).collect();
    fill_pool(db, embedder, &rows).await
}

/// Writes `rows` into `bench_pool`, a hundred at a time: each its content, with the vector of
/// the text paired with it (the content itself, or what the server would embed for it).
pub async fn fill_pool(
    db: &DatabaseConnection,
    embedder: &Arc<dyn Embedder>,
    rows: &[(String, String)],
) -> anyhow::Result<()> {
    let pb = bar(rows.len() as u64, "embed pool");
    for (chunk_no, chunk) in rows.chunks(100).enumerate() {
        let texts: Vec<String> = chunk.iter().map(|(_, text)| text.clone()).collect();
        let vecs = embedder.embed(&texts).await.context("embedding the pool")?;
        let (mut idx, mut content, mut tokens, mut emb) = (vec![], vec![], vec![], vec![]);
        for (i, ((c, _), v)) in chunk.iter().zip(vecs).enumerate() {
            idx.push((chunk_no * 100 + i) as i32);
            tokens.push(honcho_graphql::store::tokens::count(c));
            content.push(c.clone());
            emb.push(vector_literal(&v));
        }
        db.execute_raw(stmt(
            "INSERT INTO bench_pool SELECT * FROM unnest($1::int[], $2::text[], $3::int[], $4::text[]::vector[])",
            vec![idx.into(), content.into(), tokens.into(), emb.into()],
        ))
        .await?;
        pb.inc(chunk.len() as u64);
    }
    pb.finish();
    Ok(())
}

pub fn vector_literal(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

pub async fn drop_deferred_indexes(db: &DatabaseConnection) -> anyhow::Result<Vec<String>> {
    let mut definitions = Vec::new();
    for name in DEFERRED_INDEXES {
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                format!("SELECT indexdef FROM pg_indexes WHERE indexname = '{name}'"),
            ))
            .await?
            .with_context(|| format!("index {name} does not exist"))?;
        definitions.push(row.try_get::<String>("", "indexdef")?);
        db.execute_unprepared(&format!("DROP INDEX {name}")).await?;
    }
    Ok(definitions)
}

pub async fn build_deferred_indexes(
    db: &DatabaseConnection,
    definitions: &[String],
) -> anyhow::Result<()> {
    let pb = bar(definitions.len() as u64, "indexes");
    db.execute_unprepared("SET maintenance_work_mem = '256MB'")
        .await?;
    for sql in definitions {
        db.execute_unprepared(sql).await?;
        pb.inc(1);
    }
    db.execute_unprepared("ANALYZE").await?;
    pb.finish();
    Ok(())
}

/// A workspace with `sessions` conversations of `per_session` messages between 2-4 of its peers.
pub async fn workspace(
    db: &DatabaseConnection,
    rng: &mut Rng,
    name: &str,
    sessions: usize,
    per_session: usize,
    opts: &SeedOptions,
) -> anyhow::Result<Workspace> {
    db.execute_raw(stmt(
        "INSERT INTO workspaces (id, name) VALUES ($1, $2)",
        vec![rng.nanoid().into(), name.into()],
    ))
    .await?;
    let peers: Vec<String> = (0..opts.peers).map(|i| format!("peer-{i}")).collect();
    for p in &peers {
        db.execute_raw(stmt(
            "INSERT INTO peers (id, name, workspace_name) VALUES ($1, $2, $3)",
            vec![rng.nanoid().into(), p.clone().into(), name.into()],
        ))
        .await?;
    }
    let session_names: Vec<String> = (0..sessions).map(|i| format!("s-{i}")).collect();
    let pb = bar((sessions * per_session) as u64, &format!("seed {name}"));
    let mut clock: i64 = 0;
    for s in &session_names {
        db.execute_raw(stmt(
            "INSERT INTO sessions (id, name, workspace_name) VALUES ($1, $2, $3)",
            vec![rng.nanoid().into(), s.clone().into(), name.into()],
        ))
        .await?;
        let k = rng.range(2, 4.min(peers.len()));
        let mut members: Vec<String> = Vec::new();
        while members.len() < k {
            let p = rng.pick(&peers).clone();
            if !members.contains(&p) {
                members.push(p);
            }
        }
        for m in &members {
            db.execute_raw(stmt(
                "INSERT INTO session_peers (workspace_name, session_name, peer_name) VALUES ($1, $2, $3)",
                vec![name.into(), s.clone().into(), m.clone().into()],
            ))
            .await?;
        }
        let mut seq = 1usize;
        while seq <= per_session {
            let n = (per_session - seq + 1).min(5000);
            let mut rows = MessageRows::default();
            let mut speaker = 0;
            for i in 0..n {
                let id = rng.nanoid();
                next_speaker(rng, &mut speaker, members.len());
                let idx = rng.range(0, opts.pool - 1) as i32;
                clock += rng.range(5, 120) as i64;
                rows.push(id, &members[speaker], (seq + i) as i64, idx, clock);
            }
            db.execute_raw(stmt(
                "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, \
                   content, token_count, created_at, embedding) \
                 SELECT u.pid, $6, $7, u.peer, u.seq, p.content, p.token_count, \
                   timestamptz '2026-01-01 00:00:00+00' + u.at * interval '1 second', p.embedding \
                 FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::bigint[]) AS u(pid, peer, seq, idx, at) \
                 JOIN bench_pool p ON p.idx = u.idx",
                rows.values([name.into(), s.clone().into()]),
            ))
            .await?;
            seq += n;
            pb.inc(n as u64);
        }
    }
    pb.finish();
    Ok(Workspace {
        name: name.to_owned(),
        sessions: session_names,
        messages_per_session: per_session,
        peers,
    })
}

/// The next message's speaker among `members`: mostly turn-taking, sometimes two messages in a
/// row.
pub fn next_speaker(rng: &mut Rng, speaker: &mut usize, members: usize) {
    if rng.range(0, 4) != 0 {
        *speaker = (*speaker + 1) % members;
    }
}

/// Messages written by one statement, column-wise: each its public id, speaker, seq, pool row
/// and seconds after 2026-01-01.
#[derive(Default)]
pub struct MessageRows {
    ids: Vec<String>,
    speakers: Vec<String>,
    seqs: Vec<i64>,
    idxs: Vec<i32>,
    at: Vec<i64>,
}

impl MessageRows {
    pub fn push(&mut self, id: String, speaker: &str, seq: i64, idx: i32, at: i64) {
        self.ids.push(id);
        self.speakers.push(speaker.to_owned());
        self.seqs.push(seq);
        self.idxs.push(idx);
        self.at.push(at);
    }

    /// The statement's values: the five columns as `$1`..`$5`, then `more`.
    pub fn values<const N: usize>(self, more: [Value; N]) -> Vec<Value> {
        let mut out = vec![
            self.ids.into(),
            self.speakers.into(),
            self.seqs.into(),
            self.idxs.into(),
            self.at.into(),
        ];
        out.extend(more);
        out
    }
}

/// Conclusions written by one statement, column-wise.
#[derive(Default)]
pub struct ConclusionRows {
    ids: Vec<String>,
    contents: Vec<String>,
    levels: Vec<String>,
    /// The ids each cites, comma-separated (empty for none).
    sources: Vec<String>,
    /// Seconds after 2026-01-01 it was created.
    at: Vec<i64>,
}

impl ConclusionRows {
    pub fn push(&mut self, id: String, content: String, level: &str, sources: String, at: i64) {
        self.ids.push(id);
        self.contents.push(content);
        self.levels.push(level.to_owned());
        self.sources.push(sources);
        self.at.push(at);
    }

    /// Writes them as `observer`'s about `observed` in `workspace`.
    pub async fn insert<C: ConnectionTrait>(
        self,
        db: &C,
        workspace: &str,
        observer: &str,
        observed: &str,
    ) -> anyhow::Result<()> {
        db.execute_raw(stmt(
            "INSERT INTO conclusions (id, workspace_name, observer, observed, content, level, source_ids, created_at) \
             SELECT u.id, $6, $7, $8, u.content, u.level, string_to_array(NULLIF(u.src, ''), ','), \
               timestamptz '2026-01-01 00:00:00+00' + u.at * interval '1 second' \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS u(id, content, level, src, at)",
            vec![
                self.ids.into(),
                self.contents.into(),
                self.levels.into(),
                self.sources.into(),
                self.at.into(),
                workspace.into(),
                observer.into(),
                observed.into(),
            ],
        ))
        .await?;
        Ok(())
    }
}

/// `n` conclusions of one observer about one peer, each but the first few citing 1-3 of the 30
/// before it; returns their ids in creation order.
pub async fn conclusions(
    db: &DatabaseConnection,
    rng: &mut Rng,
    ws: &Workspace,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let pb = bar(n as u64, "conclusions");
    let mut all: Vec<String> = Vec::with_capacity(n);
    let mut start = 0;
    while start < n {
        let m = (n - start).min(5000);
        let mut rows = ConclusionRows::default();
        for j in 0..m {
            let i = start + j;
            let id = rng.nanoid();
            let src = if i < 3 {
                String::new()
            } else {
                let k = rng.range(1, 3);
                let lo = i.saturating_sub(30);
                let mut picked: Vec<&str> = Vec::new();
                while picked.len() < k {
                    let c = all[rng.range(lo, i - 1)].as_str();
                    if !picked.contains(&c) {
                        picked.push(c);
                    }
                    if i - lo < k {
                        break;
                    }
                }
                picked.join(",")
            };
            let level = if src.is_empty() {
                "explicit"
            } else if rng.range(0, 1) == 0 {
                "deductive"
            } else {
                "inductive"
            };
            let content = format!("{} (#{i})", sentence(rng));
            rows.push(id.clone(), content, level, src, i as i64);
            all.push(id);
        }
        rows.insert(db, &ws.name, &ws.peers[0], &ws.peers[1])
            .await?;
        start += m;
        pb.inc(m as u64);
    }
    pb.finish();
    Ok(all)
}
