//! honcho-eval (`make eval`): how well search finds the evidence of natural-language questions
//! about long two-person conversations. The conversations and labelled questions are generated
//! from a seed (`corpus`), ingested through the GraphQL API (`createMessages`, one workspace per
//! conversation, one session per sitting), and every question is asked as
//! `workspace.search(query, limit: 10, includeContext: true, contextWindow: 2)`.
//!
//! Systems compared, all on the same stored turns:
//! - `fused`: the server as configured (MiniLM + full text, fused).
//! - `full text`: the same server without an embedder (`HONCHO_EMBEDDER=none`): the text leg alone.
//! - `vector`: the stored vectors alone: the question embedded by MiniLM, nearest stored
//!   embeddings of the workspace by cosine (the vector leg's own SQL, run directly).
//! - `vector, by the index`: the vector leg as the server runs it: candidates from the HNSW index
//!   over the sign bits, with the server's scan settings, ranked by exact cosine. Against
//!   `vector`, it shows what the index loses.
//! - `bm25`: plain BM25 (the `bm25` crate: English stemming and stop words) over the turns'
//!   content, in memory: the baseline to beat.
//! - `fused, names in the query`: the server as its legs read a query before 2026-12-07, with
//!   the words naming a peer (docs/search.md, "The legs read a question without the names").
//! - `fused, speaker weight W`: the server weighing a named speaker's turns by `1 + W` instead
//!   of `1 + SPEAKER_WEIGHT`, for each W of `--speaker-weights` (default 1, the weight before
//!   2026-12-07).
//! - with `--one-workspace`, `fused, names out among any peers`: the server taking a query's
//!   names out of its legs whatever the number of peers, as on 2026-12-07 before
//!   `NAMES_OUT_MAX_PEERS` (docs/search.md, "Among more than two peers the legs keep the names");
//!   and `fused, names out among two peers only`: the server before `NAMES_OUT_MIN_SHARE`
//!   (docs/search.md, "Names out where a name is common").
//! - with `--derive`, `fused, no conclusion keys`: the server with HONCHO_SEARCH_CONCLUSION_KEYS
//!   off, over the same stored turns and conclusions (`fused` then ranks by the keys too).
//!
//! See bench/README.md ("Search quality") for the figures and how to read them.

#[allow(dead_code)]
#[path = "../common.rs"]
mod common;
mod corpus;
mod derive;
#[allow(dead_code)]
#[path = "../plot.rs"]
mod plot;
#[allow(dead_code)]
#[path = "../seed.rs"]
mod seed;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use honcho_graphql::embed::{Embedder, EmbedderKind};
use honcho_graphql::store::Store;
use honcho_graphql::store::search::{NameRule, name_messages_sql};
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;
use serde_json::{Value, json};

use common::{bar, connect, embedder, serve, stats};
use corpus::{Category, Conversation, Question, Shape};

#[derive(Parser, Debug, Clone)]
#[command(about = "search recall on generated conversational-memory QA (see bench/README.md)")]
struct Args {
    /// Conversations (one workspace each).
    #[arg(long, default_value_t = 10)]
    conversations: usize,
    /// Sittings per conversation (one session each).
    #[arg(long, default_value_t = 16)]
    sessions: usize,
    /// Questions per conversation.
    #[arg(long, default_value_t = 60)]
    questions: usize,
    /// Inference questions per conversation, beside `--questions` (0 gives the corpus of
    /// before this kind existed, 2026-12-06).
    #[arg(long, default_value_t = 6)]
    inferences: usize,
    /// Second-hand questions per conversation (the evidence is the other speaker's turn), beside
    /// the others (0 gives the corpus of before this kind existed, 2026-12-07).
    #[arg(long, default_value_t = 6)]
    second_hand: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Results are written to `<out>/<label>.json` and `<out>/<label>.svg`.
    #[arg(long, default_value = "latest")]
    label: String,
    #[arg(long, default_value = "bench/results/eval")]
    out: std::path::PathBuf,
    /// Also simulate Reciprocal Rank Fusion of the two legs over a grid of k, pool and weights
    /// (from each leg's top 50) and print the best settings.
    #[arg(long)]
    sweep: bool,
    /// Keep the database instead of dropping it.
    #[arg(long)]
    keep: bool,
    /// Also derive: after ingest, a deterministic fake deriver writes each conversation's
    /// explicit conclusions through the deriver's own store calls (the facts its turns tell,
    /// replies in their context, topics mentioned: `Turn::fact`, never a question's words), and
    /// the server is measured with conclusion keys and without them.
    #[arg(long)]
    derive: bool,
    /// The embedder of the fused server and the vector leg: `minilm`, or `openai` for any
    /// OpenAI-compatible endpoint (HONCHO_OPENAI_BASE_URL, HONCHO_OPENAI_MODEL,
    /// HONCHO_OPENAI_DIMS), so another model is measured on the same questions.
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderKind,
    /// The fused server's narrowest HNSW scan beam (HONCHO_SEARCH_BEAM); 40 is the beam before
    /// that setting existed.
    #[arg(long, default_value_t = honcho_graphql::store::search::DEFAULT_SEARCH_BEAM)]
    search_beam: u16,
    /// Speaker weights served beside the server, each as its own system on the same stored turns
    /// ("fused, speaker weight W"; the server's is `SPEAKER_WEIGHT`).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    speaker_weights: Vec<f64>,
    /// Store every conversation in one workspace (a session per sitting), as an app's workspace
    /// holds many conversations, and ask each question of the whole workspace. Only the
    /// conversations whose people no earlier conversation names are kept, so that a question's
    /// name means one person. Also serves `fused, names out among any peers` and `fused, names
    /// out among two peers only`, and prints the peers' name shares.
    #[arg(long)]
    one_workspace: bool,
}

/// Where a stored turn is: its conversation, session and seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Place {
    conversation: usize,
    session: usize,
    seq: i64,
}

const M_CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
  createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id seqInSession } }";

const Q_SEARCH: &str = "query($w: ID!, $q: String!, $limit: Int!) { workspace(id: $w) { \
  search(query: $q, limit: $limit, includeContext: true, contextWindow: 2) { \
  ... on SnippetHits { results { id } snippets { context { id } } } } } }";

/// How many results a question looks at, and the per-leg depth kept for the fusion sweep.
const TOP: usize = 10;
const DEPTH: usize = 50;
const WINDOW: i64 = 2;

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main: no other thread exists yet.
    unsafe { honcho_graphql::runtime() }?.block_on(async {
        let args = Args::parse();
        let keep = args.keep;
        common::with_database("eval", keep, |url| async move { run(&args, &url).await }).await
    })
}

struct Client {
    http: reqwest::Client,
}

impl Client {
    /// Result ids (best first) and the ids of every snippet's context.
    async fn search(
        &self,
        url: &str,
        workspace: &str,
        q: &str,
        limit: usize,
    ) -> anyhow::Result<(Vec<String>, Vec<String>)> {
        let vars = json!({"w": workspace, "q": q, "limit": limit});
        let d = common::graphql_data(&self.http, url, Q_SEARCH, vars).await?;
        Ok(common::search_ids(&d["workspace"]["search"]))
    }

    /// A server's top `TOP` with its snippets' context, and how long the request took.
    async fn timed(
        &self,
        url: &str,
        workspace: &str,
        q: &str,
    ) -> anyhow::Result<(Answer, Duration)> {
        let t = Instant::now();
        let (ranked, context) = self.search(url, workspace, q, TOP).await?;
        let answer = Answer {
            ranked,
            context: Some(context),
        };
        Ok((answer, t.elapsed()))
    }
}

/// Where the conversations are stored: a workspace each, or all in one (`--one-workspace`).
#[derive(Clone, Copy)]
struct Stored {
    one_workspace: bool,
}

impl Stored {
    fn workspace(self, c: usize) -> String {
        if self.one_workspace {
            "all".to_owned()
        } else {
            format!("conv{c}")
        }
    }

    fn session(self, c: usize, s: usize) -> String {
        if self.one_workspace {
            format!("c{c}-s{s}")
        } else {
            format!("s{s}")
        }
    }
}

/// The share of the one workspace's messages holding each peer's name, as the server reads it
/// to take a query's names out of its legs (`NAMES_OUT_MIN_SHARE`): least, median and most.
async fn print_name_shares(db: &DatabaseConnection) -> anyhow::Result<()> {
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            format!(
                "SELECT COALESCE({}, 0)::float8 / c.docs AS share FROM peers p \
                 JOIN search_corpus c ON c.workspace_name = p.workspace_name \
                 WHERE p.workspace_name = 'all' ORDER BY 1",
                name_messages_sql("p.name", "p.workspace_name")
            ),
        ))
        .await?;
    let shares: Vec<f64> = rows
        .iter()
        .map(|r| r.try_get::<f64>("", "share"))
        .collect::<Result<_, _>>()?;
    if let (Some(least), Some(most)) = (shares.first(), shares.last()) {
        eprintln!(
            "the peers' names are in {least:.3} / {:.3} / {most:.3} of the messages (least / median / most)",
            shares[shares.len() / 2]
        );
    }
    Ok(())
}

/// The conversations none of whose people an earlier one names, and their questions
/// (renumbered).
fn distinct_people(
    conversations: Vec<Conversation>,
    questions: Vec<Question>,
) -> (Vec<Conversation>, Vec<Question>) {
    let mut seen = std::collections::HashSet::new();
    let mut renumbered = HashMap::new();
    let mut kept = Vec::new();
    for (i, c) in conversations.into_iter().enumerate() {
        if c.names.iter().any(|n| seen.contains(n)) {
            continue;
        }
        seen.extend(c.names);
        renumbered.insert(i, kept.len());
        kept.push(c);
    }
    let questions = questions
        .into_iter()
        .filter_map(|mut q| {
            q.conversation = *renumbered.get(&q.conversation)?;
            Some(q)
        })
        .collect();
    (kept, questions)
}

/// Writes every conversation through `createMessages` (batches of at most 100), one message per
/// turn, `createdAt` the sitting's date plus a minute per turn. Returns each stored id's place and
/// each turn's id.
async fn ingest(
    client: &Client,
    url: &str,
    conversations: &[Conversation],
    stored: Stored,
) -> anyhow::Result<(
    HashMap<String, Place>,
    HashMap<(usize, usize, usize), String>,
    f64,
)> {
    let start = chrono::DateTime::parse_from_rfc3339("2023-01-02T10:00:00Z")?.to_utc();
    let mut places = HashMap::new();
    let mut ids = HashMap::new();
    let total: usize = conversations
        .iter()
        .flat_map(|c| c.sessions.iter().map(|s| s.turns.len()))
        .sum();
    let bar = bar(total as u64, "ingest");
    let t = Instant::now();
    for (ci, c) in conversations.iter().enumerate() {
        for (si, s) in c.sessions.iter().enumerate() {
            let day = start + chrono::Duration::days(i64::from(s.day));
            for (chunk_no, chunk) in s.turns.chunks(100).enumerate() {
                let m: Vec<Value> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, turn)| {
                        let at = day + chrono::Duration::minutes((chunk_no * 100 + i) as i64);
                        json!({"peerId": c.peer_id(turn.speaker), "content": turn.text,
                               "createdAt": at.to_rfc3339()})
                    })
                    .collect();
                let vars = json!({"w": stored.workspace(ci), "s": stored.session(ci, si), "m": m});
                let d = common::graphql_data(&client.http, url, M_CREATE, vars).await?;
                for (i, made) in d["createMessages"]
                    .as_array()
                    .context("createMessages")?
                    .iter()
                    .enumerate()
                {
                    let id = made["id"].as_str().context("id")?.to_owned();
                    let seq = made["seqInSession"].as_i64().context("seq")?;
                    places.insert(
                        id.clone(),
                        Place {
                            conversation: ci,
                            session: si,
                            seq,
                        },
                    );
                    ids.insert((ci, si, chunk_no * 100 + i), id);
                }
                bar.inc(chunk.len() as u64);
            }
        }
    }
    bar.finish();
    let rate = total as f64 / t.elapsed().as_secs_f64();
    Ok((places, ids, rate))
}

/// How the vector leg finds a question's nearest stored embeddings.
#[derive(Clone, Copy)]
enum Scan {
    /// Every embedding of the workspace, by exact cosine.
    Exact,
    /// As the server runs it: `vector_candidates(TOP)` rows of the workspace from the bit index
    /// in Hamming order, with the search's `SET LOCAL`s, then ranked by exact cosine.
    Index,
}

/// The vector leg's own ranking of the workspace's messages for `q`, best first.
async fn vector_leg(
    db: &DatabaseConnection,
    minilm: &dyn Embedder,
    workspace: &str,
    q: &str,
    scan: Scan,
) -> anyhow::Result<Vec<String>> {
    use honcho_graphql::store::search::vector_candidates;
    use honcho_graphql::store::{IterativeScan, TxOptions};
    let v = minilm.embed(&[q.to_owned()]).await?.remove(0);
    let dims = v.len();
    let candidates = vector_candidates(TOP as u64) as i64;
    let (sql, mut values): (String, Vec<sea_orm::Value>) = match scan {
        Scan::Exact => (
            "SELECT public_id FROM messages WHERE workspace_name = $1 AND embedding IS NOT NULL \
             ORDER BY embedding <=> $2 LIMIT $3"
                .into(),
            Vec::new(),
        ),
        Scan::Index => (
            format!(
                "SELECT public_id FROM (SELECT public_id, embedding FROM messages \
                 WHERE workspace_name = $1 AND embedding IS NOT NULL \
                 ORDER BY binary_quantize(embedding)::bit({dims}) <~> binary_quantize($2)::bit({dims}) \
                 LIMIT $4) c ORDER BY embedding <=> $2 LIMIT $3"
            ),
            vec![candidates.into()],
        ),
    };
    let mut all = vec![
        workspace.into(),
        pgvector::Vector::from(v).into(),
        (DEPTH as i64).into(),
    ];
    all.append(&mut values);
    // The scan settings through the store's own transaction helper, as the search sets them.
    let options = match scan {
        Scan::Exact => TxOptions::default(),
        Scan::Index => TxOptions::default()
            .iterative_scan(IterativeScan::Relaxed)
            .ef_search_for(candidates as u64),
    };
    let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, all);
    let rows = Store::new(db.clone())
        .read_transaction(options, |txn| {
            let statement = statement.clone();
            async move { Ok(txn.query_all_raw(statement).await?) }
        })
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.try_get::<String>("", "public_id"))
        .collect::<Result<_, _>>()?)
}

/// What one system returned for one question.
#[derive(Default, Clone)]
struct Answer {
    /// Best first, at least `TOP` deep when the system found that many.
    ranked: Vec<String>,
    /// Ids of the snippets' context when the server gave them; else computed from `ranked`.
    context: Option<Vec<String>>,
}

#[derive(Default, Clone, Copy, Serialize)]
struct Recall {
    at5_any: f64,
    at5_all: f64,
    at10_any: f64,
    at10_all: f64,
    context_any: f64,
}

#[derive(Serialize)]
struct SystemResult {
    system: String,
    overall: Recall,
    per_category: BTreeMap<&'static str, Recall>,
    search_p50_ms: Option<f64>,
}

/// Whether `evidence` is within `WINDOW` turns (same session) of a result or in the context.
fn within_context(answer: &Answer, evidence: &Place, places: &HashMap<String, Place>) -> bool {
    match &answer.context {
        Some(ctx) => ctx.iter().any(|id| places.get(id) == Some(evidence)),
        None => answer.ranked.iter().take(TOP).any(|id| {
            places.get(id).is_some_and(|p| {
                p.conversation == evidence.conversation
                    && p.session == evidence.session
                    && (p.seq - evidence.seq).abs() <= WINDOW
            })
        }),
    }
}

fn score(
    questions: &[Question],
    evidence: &[Vec<Place>],
    answers: &[Answer],
    places: &HashMap<String, Place>,
    only: Option<Category>,
) -> Recall {
    let mut r = Recall::default();
    let mut n = 0.0;
    for ((q, ev), a) in questions.iter().zip(evidence).zip(answers) {
        if only.is_some_and(|c| c != q.category) {
            continue;
        }
        n += 1.0;
        let found = |k: usize| -> Vec<bool> {
            ev.iter()
                .map(|e| a.ranked.iter().take(k).any(|id| places.get(id) == Some(e)))
                .collect()
        };
        let (f5, f10) = (found(5), found(TOP));
        let hit = |v: &[bool], all: bool| {
            f64::from(u8::from(if all {
                v.iter().all(|x| *x)
            } else {
                v.iter().any(|x| *x)
            }))
        };
        r.at5_any += hit(&f5, false);
        r.at5_all += hit(&f5, true);
        r.at10_any += hit(&f10, false);
        r.at10_all += hit(&f10, true);
        r.context_any += f64::from(u8::from(ev.iter().any(|e| within_context(a, e, places))));
    }
    let n = f64::max(n, 1.0);
    Recall {
        at5_any: r.at5_any / n,
        at5_all: r.at5_all / n,
        at10_any: r.at10_any / n,
        at10_all: r.at10_all / n,
        context_any: r.context_any / n,
    }
}

/// Reciprocal Rank Fusion as the server computes it: each leg's first `pool` ids, score
/// `w / (k + rank)` summed over the legs, ties by id.
fn rrf(vector: &[String], text: &[String], k: f64, pool: usize, w_text: f64) -> Vec<String> {
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for (w, leg) in [(1.0, vector), (w_text, text)] {
        for (i, id) in leg.iter().take(pool).enumerate() {
            *scores.entry(id).or_default() += w / (k + i as f64 + 1.0);
        }
    }
    let mut v: Vec<(&str, f64)> = scores.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter()
        .take(TOP)
        .map(|(id, _)| id.to_owned())
        .collect()
}

async fn run(args: &Args, db_url: &str) -> anyhow::Result<()> {
    let shape = Shape {
        conversations: args.conversations,
        sessions: args.sessions,
        questions: args.questions,
        inferences: args.inferences,
        second_hand: args.second_hand,
    };
    let (conversations, questions) = corpus::generate(args.seed, &shape);
    let stored = Stored {
        one_workspace: args.one_workspace,
    };
    let (conversations, questions) = if stored.one_workspace {
        distinct_people(conversations, questions)
    } else {
        (conversations, questions)
    };
    let turns: usize = conversations
        .iter()
        .flat_map(|c| c.sessions.iter().map(|s| s.turns.len()))
        .sum();
    eprintln!(
        "{} conversations, {turns} turns, {} questions",
        conversations.len(),
        questions.len()
    );

    let minilm = embedder(args.embedder)?.context("--embedder none measures no vector leg")?;
    migration::set_embedding_dims(minilm.dims() as u32);
    let db = connect(db_url, 8).await?;
    Migrator::up(&db, None).await.context("migrating")?;
    let fused = Store::new(db.clone())
        .with_embedder(Some(minilm.clone()))
        .with_derivation(args.derive)
        .with_search_beam(args.search_beam);
    let no_keys_url = if args.derive {
        Some(serve(fused.clone().with_conclusion_keys(false)).await?)
    } else {
        None
    };
    let systems = Systems {
        client: Client {
            http: honcho_graphql::outbound::client(),
        },
        fused_url: serve(fused.clone()).await?,
        names_url: serve(fused.clone().with_names(NameRule {
            in_query: true,
            ..NameRule::default()
        }))
        .await?,
        weighted: {
            let mut served = Vec::new();
            for &w in &args.speaker_weights {
                let url = serve(fused.clone().with_names(NameRule {
                    speaker_weight: w,
                    ..NameRule::default()
                }))
                .await?;
                served.push((format!("fused, speaker weight {w}"), url));
            }
            if stored.one_workspace {
                let url = serve(fused.clone().with_names(NameRule {
                    out_max_peers: i64::MAX,
                    ..NameRule::default()
                }))
                .await?;
                served.push(("fused, names out among any peers".to_owned(), url));
                let url = serve(fused.clone().with_names(NameRule {
                    out_min_share: f64::INFINITY,
                    ..NameRule::default()
                }))
                .await?;
                served.push(("fused, names out among two peers only".to_owned(), url));
            }
            served
        },
        // The text leg alone: no conclusions ranking with it.
        text_url: serve(Store::new(db.clone()).with_conclusion_keys(false)).await?,
        no_keys_url,
        stored,
        db,
        minilm,
    };

    let (places, ids, ingest_rate) =
        ingest(&systems.client, &systems.fused_url, &conversations, stored).await?;
    if stored.one_workspace {
        print_name_shares(&systems.db).await?;
    }
    let derived = if args.derive {
        Some(derive::run(&fused, &conversations, &ids).await?)
    } else {
        None
    };
    let evidence: Vec<Vec<Place>> = questions
        .iter()
        .map(|q| {
            q.evidence
                .iter()
                .map(|&(s, t)| places[&ids[&(q.conversation, s, t)]])
                .collect()
        })
        .collect();
    let engines = bm25_engines(&conversations, &ids, stored);
    let answers = systems.ask_all(&questions, &engines).await?;

    let scoring = Scoring {
        questions: &questions,
        evidence: &evidence,
        places: &places,
    };
    let mut results = vec![scoring.system(
        "fused (server)",
        &answers.fused,
        Some(answers.fused_ms.clone()),
    )];
    results.push(scoring.system(
        "fused, names in the query",
        &answers.names,
        Some(answers.names_ms.clone()),
    ));
    for ((name, _), (answers, times)) in systems.weighted.iter().zip(&answers.weighted) {
        results.push(scoring.system(name, answers, Some(times.clone())));
    }
    if systems.no_keys_url.is_some() {
        results.push(scoring.system(
            "fused, no conclusion keys",
            &answers.no_keys,
            Some(answers.no_keys_ms.clone()),
        ));
    }
    results.extend([
        scoring.system("vector leg", &answers.vector, None),
        scoring.system("vector leg, by the index", &answers.vector_indexed, None),
        scoring.system(
            "full-text leg",
            &answers.text,
            Some(answers.text_ms.clone()),
        ),
        scoring.system("BM25 (bm25 crate)", &answers.plain, None),
    ]);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for q in &questions {
        *counts.entry(q.category.name()).or_default() += 1;
    }
    println!(
        "\n{} questions ({}) over {turns} turns in {} conversations; ingest {ingest_rate:.0} msg/s\n",
        questions.len(),
        counts
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        conversations.len()
    );
    if let Some(d) = &derived {
        println!("{d}\n");
    }
    print_table(&results);
    let sweep = if args.sweep {
        scoring.rrf_sweep(&answers)
    } else {
        Vec::new()
    };

    let out = json!({
        "label": args.label,
        "args": {"conversations": args.conversations, "sessions": args.sessions,
                 "questions": args.questions, "inferences": args.inferences,
                 "second_hand": args.second_hand, "seed": args.seed,
                 "speaker_weights": args.speaker_weights, "one_workspace": args.one_workspace},
        "embedder": systems.minilm.model_id(),
        "turns": turns,
        "questions": questions.len(),
        "categories": counts,
        "ingest_messages_per_s": ingest_rate,
        "derived": derived,
        "systems": results,
        "sweep": sweep,
    });
    write_results(args, &out, &results)
}

/// The systems compared: the server with and without an embedder, the vector leg run directly.
struct Systems {
    client: Client,
    fused_url: String,
    /// The server reading the peers' names in the query, as before 2026-12-07.
    names_url: String,
    /// Other servers on the same turns: the speaker weights of `--speaker-weights`, and with
    /// `--one-workspace` the names out among any number of peers and among two only: (system
    /// name, url).
    weighted: Vec<(String, String)>,
    stored: Stored,
    text_url: String,
    /// The server without conclusion keys (with `--derive`).
    no_keys_url: Option<String>,
    db: DatabaseConnection,
    minilm: std::sync::Arc<dyn Embedder>,
}

/// Each system's answers, in question order, and the server's search times.
#[derive(Default)]
struct Answers {
    fused: Vec<Answer>,
    text: Vec<Answer>,
    vector: Vec<Answer>,
    vector_indexed: Vec<Answer>,
    plain: Vec<Answer>,
    fused_ms: Vec<Duration>,
    names: Vec<Answer>,
    names_ms: Vec<Duration>,
    /// Per `Systems::weighted`, its answers and search times.
    weighted: Vec<(Vec<Answer>, Vec<Duration>)>,
    text_ms: Vec<Duration>,
    no_keys: Vec<Answer>,
    no_keys_ms: Vec<Duration>,
}

impl Systems {
    /// Every question to every system, one at a time (`plain`: the conversation's BM25 engine).
    async fn ask_all(
        &self,
        questions: &[Question],
        engines: &[bm25::SearchEngine<String>],
    ) -> anyhow::Result<Answers> {
        let mut answers = Answers {
            weighted: self.weighted.iter().map(|_| Default::default()).collect(),
            ..Answers::default()
        };
        let bar = bar(questions.len() as u64, "questions");
        for q in questions {
            let ws = self.stored.workspace(q.conversation);
            let (answer, took) = self.client.timed(&self.fused_url, &ws, &q.text).await?;
            answers.fused.push(answer);
            answers.fused_ms.push(took);
            let (answer, took) = self.client.timed(&self.names_url, &ws, &q.text).await?;
            answers.names.push(answer);
            answers.names_ms.push(took);
            for ((_, url), (got, times)) in self.weighted.iter().zip(&mut answers.weighted) {
                let (answer, took) = self.client.timed(url, &ws, &q.text).await?;
                got.push(answer);
                times.push(took);
            }
            if let Some(url) = &self.no_keys_url {
                let (answer, took) = self.client.timed(url, &ws, &q.text).await?;
                answers.no_keys.push(answer);
                answers.no_keys_ms.push(took);
            }
            let t = Instant::now();
            let (ranked, _) = self
                .client
                .search(&self.text_url, &ws, &q.text, DEPTH)
                .await?;
            answers.text_ms.push(t.elapsed());
            answers.text.push(Answer {
                ranked,
                context: None,
            });
            answers.vector.push(Answer {
                ranked: vector_leg(&self.db, self.minilm.as_ref(), &ws, &q.text, Scan::Exact)
                    .await?,
                context: None,
            });
            answers.vector_indexed.push(Answer {
                ranked: vector_leg(&self.db, self.minilm.as_ref(), &ws, &q.text, Scan::Index)
                    .await?,
                context: None,
            });
            answers.plain.push(Answer {
                ranked: engines[if self.stored.one_workspace {
                    0
                } else {
                    q.conversation
                }]
                .search(&q.text, DEPTH)
                .into_iter()
                .map(|r| r.document.id)
                .collect(),
                context: None,
            });
            bar.inc(1);
        }
        bar.finish();
        Ok(answers)
    }
}

/// BM25 over each conversation's turns, in memory, one engine per conversation (one for all
/// with `--one-workspace`).
fn bm25_engines(
    conversations: &[Conversation],
    ids: &HashMap<(usize, usize, usize), String>,
    stored: Stored,
) -> Vec<bm25::SearchEngine<String>> {
    let docs = |ci: usize, c: &Conversation| -> Vec<bm25::Document<String>> {
        c.sessions
            .iter()
            .enumerate()
            .flat_map(|(si, s)| {
                s.turns
                    .iter()
                    .enumerate()
                    .map(move |(ti, t)| bm25::Document {
                        id: ids[&(ci, si, ti)].clone(),
                        contents: t.text.clone(),
                    })
            })
            .collect()
    };
    let build = |docs: Vec<bm25::Document<String>>| {
        bm25::SearchEngineBuilder::<String>::with_documents(bm25::Language::English, docs).build()
    };
    let each = conversations.iter().enumerate().map(|(ci, c)| docs(ci, c));
    if stored.one_workspace {
        vec![build(each.flatten().collect())]
    } else {
        each.map(build).collect()
    }
}

/// What answers are scored against: the questions, their evidence, where each stored turn is.
struct Scoring<'a> {
    questions: &'a [Question],
    evidence: &'a [Vec<Place>],
    places: &'a HashMap<String, Place>,
}

impl Scoring<'_> {
    fn recall(&self, answers: &[Answer], only: Option<Category>) -> Recall {
        score(self.questions, self.evidence, answers, self.places, only)
    }

    /// A system's recall, overall and per category, and its search p50 when timed.
    fn system(&self, name: &str, answers: &[Answer], times: Option<Vec<Duration>>) -> SystemResult {
        SystemResult {
            system: name.to_owned(),
            overall: self.recall(answers, None),
            per_category: Category::ALL
                .iter()
                .map(|c| (c.name(), self.recall(answers, Some(*c))))
                .collect(),
            search_p50_ms: times.map(|d| stats(d).p50_ms),
        }
    }

    /// RRF simulated from the legs' top `DEPTH` (vector weight 1) over a grid of k, pool and
    /// text weight; prints the best ten and returns every point, best first.
    fn rrf_sweep(&self, answers: &Answers) -> Vec<Value> {
        let mut sweep = Vec::new();
        for k in [1.0, 5.0, 10.0, 20.0, 40.0, 60.0] {
            for pool in [10, 20, 30, 50] {
                for w_text in [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0] {
                    let fused: Vec<Answer> = answers
                        .vector
                        .iter()
                        .zip(&answers.text)
                        .map(|(v, t)| Answer {
                            ranked: rrf(&v.ranked, &t.ranked, k, pool, w_text),
                            context: None,
                        })
                        .collect();
                    let r = self.recall(&fused, None);
                    sweep.push(json!({"k": k, "pool": pool, "w_text": w_text,
                                      "at10_any": r.at10_any, "at5_any": r.at5_any,
                                      "context_any": r.context_any}));
                }
            }
        }
        let key = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        sweep.sort_by(|a, b| {
            key(b, "at10_any")
                .total_cmp(&key(a, "at10_any"))
                .then(key(b, "at5_any").total_cmp(&key(a, "at5_any")))
        });
        println!("\nRRF simulated from the legs' top {DEPTH} (vector weight 1), best first:");
        for s in sweep.iter().take(10) {
            println!("  {s}");
        }
        sweep
    }
}

fn print_table(results: &[SystemResult]) {
    println!(
        "| system | r@5 any | r@5 all | r@10 any | r@10 all | within context | {} | search p50 |",
        Category::ALL
            .map(|c| format!("r@10 {}", c.name()))
            .join(" | ")
    );
    println!(
        "|---|---|---|---|---|---|{}---|",
        "---|".repeat(Category::ALL.len())
    );
    for r in results {
        let o = &r.overall;
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} |",
            r.system,
            o.at5_any,
            o.at5_all,
            o.at10_any,
            o.at10_all,
            o.context_any,
            Category::ALL
                .map(|c| format!("{:.3}", r.per_category[c.name()].at10_any))
                .join(" | "),
            r.search_p50_ms
                .map_or("".to_owned(), |ms| format!("{ms:.1} ms")),
        );
    }
}

/// The run as JSON and its recall chart as SVG, both named after the label, in `args.out`.
fn write_results(args: &Args, out: &Value, results: &[SystemResult]) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let json_path = args.out.join(format!("{}.json", args.label));
    std::fs::write(&json_path, serde_json::to_string_pretty(out)?)?;
    let rows: Vec<(String, f64, f64)> = results
        .iter()
        .map(|r| (r.system.clone(), r.overall.at10_any, r.overall.context_any))
        .collect();
    let svg_path = args.out.join(format!("{}.svg", args.label));
    std::fs::write(&svg_path, plot::recall(&rows))?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_workspace_keeps_the_conversations_whose_people_no_earlier_one_names() {
        let shape = Shape {
            conversations: 10,
            sessions: 4,
            questions: 12,
            inferences: 2,
            second_hand: 2,
        };
        let (conversations, questions) = corpus::generate(7, &shape);
        let all: Vec<[&str; 2]> = conversations.iter().map(|c| c.names).collect();
        let texts: Vec<(usize, String)> = questions
            .iter()
            .map(|q| (q.conversation, q.text.clone()))
            .collect();
        let (kept, asked) = distinct_people(conversations, questions);
        assert!(kept.len() > 1 && kept.len() < all.len(), "{all:?}");
        let mut people: Vec<&str> = kept.iter().flat_map(|c| c.names).collect();
        let n = people.len();
        people.sort();
        people.dedup();
        assert_eq!(people.len(), n, "one person, one conversation");
        // Each kept question still names its own conversation's people, in the same order.
        for q in &asked {
            let [a, b] = kept[q.conversation].names;
            assert!(q.text.contains(a) || q.text.contains(b), "{}", q.text);
        }
        let before: Vec<&String> = texts
            .iter()
            .filter(|(c, _)| kept.iter().any(|k| k.names == all[*c]))
            .map(|(_, t)| t)
            .collect();
        assert_eq!(asked.iter().map(|q| &q.text).collect::<Vec<_>>(), before);
    }
}
