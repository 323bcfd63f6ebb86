//! Embedders wider than pgvector indexes at full precision (2,000 dimensions), such as OpenAI's
//! text-embedding-3-large (3,072): a fresh database migrated for one, written and searched through
//! its indexes; a database converted to one by `reembed --resize`; and the one-line refusal of a
//! width no index takes.

use std::sync::Arc;

use async_graphql::Request;
use honcho_graphql::embed::{EmbedError, Embedder};
use honcho_graphql::graphql::{self, AppSchema, Limits};
use honcho_graphql::store::Store;
use honcho_graphql::store::filter::{self, Resource};
use honcho_graphql::store::search::{NEAREST_BLOCKS, SearchScope, hybrid_query};
use honcho_graphql::store::search_keys::SearchKeys;
use sea_orm::sea_query::PostgresQueryBuilder;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, TransactionTrait};
use serde_json::Value;

use crate::harness::{TestApp, blank_database, run_binary};

/// OpenAI's text-embedding-3-large.
const WIDE: usize = 3072;

/// A deterministic embedder of any width standing in for a model: each character trigram of the
/// lower-cased text adds 1 to a coordinate picked by its hash, so texts that share trigrams
/// ("honeybees", "bees … honey") are near while sharing no lexeme for full-text search.
struct Trigrams(usize);

fn trigram_vector(text: &str, dims: usize) -> Vec<f32> {
    let chars: Vec<char> = format!(" {} ", text.to_lowercase()).chars().collect();
    let mut v = vec![0.0f32; dims];
    for w in chars.windows(3) {
        // FNV-1a over the trigram.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for c in w {
            h = (h ^ u64::from(*c)).wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % dims as u64) as usize] += 1.0;
    }
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

#[async_trait::async_trait]
impl Embedder for Trigrams {
    fn dims(&self) -> usize {
        self.0
    }
    fn model_id(&self) -> &str {
        "test:trigrams"
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| trigram_vector(t, self.0)).collect())
    }
}

async fn ok(schema: &AppSchema, query: &str) -> Value {
    let resp = serde_json::to_value(graphql::execute(schema, Request::new(query)).await).unwrap();
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"].clone()
}

async fn text(db: &DatabaseConnection, sql: &str) -> String {
    db.query_one_raw(sea_orm::Statement::from_string(
        sea_orm::DbBackend::Postgres,
        sql,
    ))
    .await
    .unwrap()
    .unwrap()
    .try_get_by_index(0)
    .unwrap()
}

/// Peers, a few messages and conclusions (one of each about bees), written with the store's
/// embedder.
async fn write_memory(schema: &AppSchema) {
    ok(
        schema,
        "mutation { a: getOrCreatePeer(workspaceId: \"ws\", id: \"alice\") { id }
                    b: getOrCreatePeer(workspaceId: \"ws\", id: \"bob\") { id } }",
    )
    .await;
    ok(
        schema,
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [
            {peerId: \"alice\", content: \"My bees make honey every summer\"},
            {peerId: \"bob\", content: \"I work night shifts at the station\"},
            {peerId: \"alice\", content: \"Green tea in the morning\"}]) { id } }",
    )
    .await;
    ok(
        schema,
        "mutation { createConclusions(workspaceId: \"ws\", conclusions: [
            {content: \"keeps bees for their honey\", observerId: \"bob\", observedId: \"alice\"},
            {content: \"works night shifts\", observerId: \"alice\", observedId: \"bob\"},
            {content: \"drinks green tea\", observerId: \"bob\", observedId: \"alice\"}]) { id } }",
    )
    .await;
}

/// "honeybees" shares no lexeme with what is written about bees (full text stems it to
/// `honeybe`), so only the vector legs can find it.
async fn search_finds_the_bees(store: &Store) {
    let found = store
        .search(
            SearchScope::Workspace("ws"),
            "honeybees",
            &Value::Null,
            3,
            SearchKeys::WithConclusions,
        )
        .await
        .unwrap();
    assert_eq!(
        found.first().map(|m| m.content.as_str()),
        Some("My bees make honey every summer"),
        "{found:?}"
    );
    let found = store
        .query_conclusions("ws", "honeybees", 3, None, &Value::Null)
        .await
        .unwrap();
    assert_eq!(
        found.first().map(|c| c.content.as_str()),
        Some("keeps bees for their honey"),
        "{found:?}"
    );
}

/// The plan of `sql` with sorting priced out, so that an `ORDER BY … LIMIT` is read from an index
/// whenever one can serve it (at a few rows the planner rightly prefers to sort).
async fn plan_without_sorts(db: &DatabaseConnection, sql: &str, values: sea_orm::Values) -> String {
    let txn = db.begin().await.unwrap();
    txn.execute_unprepared(
        "SET LOCAL enable_sort = off; SET LOCAL hnsw.iterative_scan = relaxed_order",
    )
    .await
    .unwrap();
    crate::harness::explain(&txn, sql, values).await
}

/// Both vector legs' orderings at `dims` are served by their indexes: the messages' as the search
/// builds it, the conclusions' by the distance the server orders them by.
async fn vector_legs_read_their_indexes(db: &DatabaseConnection, dims: usize) {
    let none = filter::parse(Resource::Message, &Value::Null).unwrap();
    let q = trigram_vector("honeybees", dims);
    let (sql, values) = hybrid_query(
        SearchScope::Workspace("ws"),
        "honeybees",
        Some(q.clone()),
        NEAREST_BLOCKS,
        &none,
        10,
        true,
    )
    .build(PostgresQueryBuilder);
    let plan = plan_without_sorts(db, &sql, values).await;
    assert!(plan.contains("ix_messages_embedding_hnsw"), "plan:\n{plan}");
    // The conclusion keys' leg reads the conclusions' index too.
    assert!(
        plan.contains("ix_conclusions_embedding_hnsw"),
        "plan:\n{plan}"
    );
    let sql = format!(
        "SELECT id FROM conclusions WHERE workspace_name = 'ws' AND deleted_at IS NULL \
         AND embedding IS NOT NULL ORDER BY {} LIMIT 20",
        migration::indexed_distance("conclusions.embedding", "$1", dims as u32)
    );
    let values = sea_orm::Values(vec![pgvector::Vector::from(q).into()]);
    let plan = plan_without_sorts(db, &sql, values).await;
    assert!(
        plan.contains("ix_conclusions_embedding_hnsw"),
        "plan:\n{plan}"
    );
}

#[tokio::test]
async fn a_3072_dimension_embedder_migrates_writes_and_searches_through_its_indexes() {
    let guard = blank_database().await;
    let dims = WIDE.to_string();
    let out = run_binary(
        &["migrate", "up"],
        &guard.url(),
        &[
            ("HONCHO_EMBEDDER", "openai"),
            ("HONCHO_OPENAI_MODEL", "text-embedding-3-large"),
            ("HONCHO_OPENAI_DIMS", &dims),
            ("HONCHO_OPENAI_API_KEY", "unused"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = Database::connect(guard.url()).await.unwrap();
    for (index, indexed) in [
        (
            "ix_conclusions_embedding_hnsw",
            "halfvec(3072)) halfvec_cosine_ops",
        ),
        ("ix_messages_embedding_hnsw", "bit(3072)) bit_hamming_ops"),
    ] {
        let def = text(&db, &format!("SELECT pg_get_indexdef('{index}'::regclass)")).await;
        assert!(def.contains(indexed), "{def}");
    }

    let store = Store::new(db.clone()).with_embedder(Some(Arc::new(Trigrams(WIDE))));
    store.check_embedder().await.unwrap();
    let schema = graphql::build_schema(store.clone(), &Limits::default());
    write_memory(&schema).await;
    search_finds_the_bees(&store).await;
    vector_legs_read_their_indexes(&db, WIDE).await;
    db.close().await.unwrap();
}

#[tokio::test]
async fn reembed_resize_converts_a_database_to_3072_dimensions() {
    let mut app = TestApp::new().await; // vector(384), written without an embedder
    write_memory(&app.schema).await;
    app.store = app
        .store
        .clone()
        .with_embedder(Some(Arc::new(Trigrams(WIDE))));
    assert!(app.store.check_embedder().await.is_err(), "384 ≠ 3072");
    app.store.reembed(false, true, &()).await.unwrap();
    app.store.check_embedder().await.unwrap();
    for table in ["messages", "conclusions"] {
        let ty = text(
            app.store.db(),
            &format!(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
                 WHERE attrelid = '{table}'::regclass AND attname = 'embedding'"
            ),
        )
        .await;
        assert_eq!(ty, "vector(3072)", "{table}");
    }
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE embedding IS NULL")
            .await,
        0
    );
    search_finds_the_bees(&app.store).await;
    vector_legs_read_their_indexes(app.store.db(), WIDE).await;
}

#[tokio::test]
async fn a_width_no_index_takes_is_refused_in_one_line_that_says_what_to_do() {
    let guard = blank_database().await;
    for args in [&["migrate", "up"][..], &["serve"]] {
        let command = args[0];
        let out = run_binary(
            args,
            &guard.url(),
            &[
                ("HONCHO_LISTEN", "127.0.0.1:0"),
                ("HONCHO_EMBEDDER", "openai"),
                ("HONCHO_OPENAI_DIMS", "4001"),
                ("HONCHO_OPENAI_API_KEY", "unused"),
                ("RUST_BACKTRACE", "1"),
                ("RUST_LOG", "off"),
            ],
        );
        assert!(!out.status.success(), "{command}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{command}: {stderr}");
        assert!(
            lines[0].contains("4001") && lines[0].contains("at most 4000 dimensions"),
            "{command}: {stderr}"
        );
        assert!(
            lines[0].contains("HONCHO_OPENAI_DIMS"),
            "names the fix: {stderr}"
        );
    }
    let db = Database::connect(guard.url()).await.unwrap();
    assert_eq!(
        text(
            &db,
            "SELECT coalesce(to_regclass('public.messages')::text, 'none')"
        )
        .await,
        "none",
        "nothing was migrated"
    );
    db.close().await.unwrap();

    // `reembed --resize` to such an embedder changes nothing.
    let app = TestApp::new().await;
    let store = app
        .store
        .clone()
        .with_embedder(Some(Arc::new(Trigrams(4001))));
    let err = store
        .reembed(false, true, &())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 4000 dimensions"), "{err}");
    assert_eq!(
        text(
            app.store.db(),
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'conclusions'::regclass AND attname = 'embedding'"
        )
        .await,
        "vector(384)"
    );
}
