//! The only way the database schema changes. Every migration has a working `down()`.

pub use sea_orm_migration::prelude::*;

/// A migration that is SQL alone: `up` and `down` each run their statements in order.
macro_rules! sql_migration {
    (up: $up:expr, down: $down:expr $(,)?) => {
        #[derive(DeriveMigrationName)]
        pub struct Migration;

        #[async_trait::async_trait]
        impl MigrationTrait for Migration {
            async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
                $crate::run_sql(manager, $up).await
            }

            async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
                $crate::run_sql(manager, $down).await
            }
        }
    };
}

mod m20261130_000001_initial;
mod m20261130_000002_conclusion_public_metadata;
mod m20261201_000010_search_term_stats;
mod m20261201_000011_author_in_search_text;
mod m20261201_000040_deriver_queue;
mod m20261201_000050_drop_session_is_active;
mod m20261201_000060_conclusion_search_text;
mod m20261201_000061_embedding_text_marker;
mod m20261201_000070_binary_quantized_message_index;
mod m20261201_000080_session_list_indexes;
mod m20261202_000090_lighter_message_graph;
mod m20261203_000140_webhooks;
mod m20261203_000150_erasure;
mod m20261203_000160_erasure_forgets_webhook_deliveries;
mod m20261203_000200_import_checkpoints;
mod m20261203_000210_scopes;
mod m20261203_000220_session_summaries;
mod m20261203_000221_peer_card_entries;
mod m20261203_000230_dreams;
mod m20261203_000250_peer_card_entry_positions;
mod m20261205_000260_wider_message_graph_beam;
mod m20261206_000270_message_graph_beam_back_to_24;
mod m20261206_000280_message_blocks;
mod m20261207_000290_block_update_skips_first_vectors;
mod m20261207_000300_message_session_sums;
mod m20261207_000310_session_author_seq_index;

use std::sync::atomic::{AtomicU32, Ordering};

/// Runs each statement in order on the migration's connection: most migrations are SQL alone.
pub(crate) async fn run_sql<S: AsRef<str>>(
    manager: &SchemaManager<'_>,
    statements: &[S],
) -> Result<(), DbErr> {
    let db = manager.get_connection();
    for sql in statements {
        db.execute_unprepared(sql.as_ref()).await?;
    }
    Ok(())
}

/// Dimension of the `vector` columns created by the initial migration. The server sets it from its
/// embedder before migrating; the migration records it in `honcho_meta` so later starts can check it.
static EMBEDDING_DIMS: AtomicU32 = AtomicU32::new(DEFAULT_EMBEDDING_DIMS);

/// all-MiniLM-L6-v2, the default embedder.
pub const DEFAULT_EMBEDDING_DIMS: u32 = 384;

pub fn set_embedding_dims(dims: u32) {
    EMBEDDING_DIMS.store(dims, Ordering::SeqCst);
}

pub(crate) fn embedding_dims() -> u32 {
    EMBEDDING_DIMS.load(Ordering::SeqCst)
}

/// The most dimensions pgvector's HNSW indexes a `vector` of.
pub const MAX_FULL_PRECISION_DIMS: u32 = 2000;
/// The most dimensions the vector columns may have: conclusions' vectors wider than
/// [`MAX_FULL_PRECISION_DIMS`] are indexed by their half-precision cast, and pgvector's HNSW
/// indexes a `halfvec` of at most this many. (The messages' bit index would take 64,000.)
pub const MAX_EMBEDDING_DIMS: u32 = 4000;

/// Refuses a dimension the vector indexes cannot be built for, in one line that says what to do.
pub fn check_embedding_dims(dims: u32) -> Result<(), String> {
    if (1..=MAX_EMBEDDING_DIMS).contains(&dims) {
        return Ok(());
    }
    Err(format!(
        "{dims}-dimensional embeddings cannot be indexed: pgvector's HNSW takes at most \
         {MAX_EMBEDDING_DIMS} dimensions (as halfvec); choose an embedder of at most \
         {MAX_EMBEDDING_DIMS} dimensions (HONCHO_EMBEDDER, HONCHO_OPENAI_MODEL, HONCHO_OPENAI_DIMS)"
    ))
}

/// The text-search configuration the stored `content_tsv` columns and the `search_terms`
/// statistics are built with. A query must parse its text with the same one, or its stemming and
/// stop words differ from what is stored and nothing matches. The migrations spell the name out:
/// each is fixed once applied, and changing the configuration would take a new migration that
/// rebuilds the columns, the statistics and their triggers.
pub const TEXT_SEARCH_CONFIG: &str = "english";

/// The lexemes of `text` (an SQL expression) as a `tsvector`, parsed as the stored columns are.
pub fn to_tsvector(text: &str) -> String {
    format!("to_tsvector('{TEXT_SEARCH_CONFIG}', {text})")
}

/// A `tsquery` matched by any of `text`'s lexemes (an SQL expression), parsed as the stored
/// columns are. `plainto_tsquery` ANDs them; a search wants the disjunction, ranked.
pub fn any_lexeme_tsquery(text: &str) -> String {
    format!("replace(plainto_tsquery('{TEXT_SEARCH_CONFIG}', {text})::text, ' & ', ' | ')::tsquery")
}

/// Whether the index over `dims`-dimensional vectors is over their half-precision cast (wider
/// than pgvector indexes at full precision). A query orders by [`indexed_distance`] to use it.
pub fn indexes_half_precision(dims: u32) -> bool {
    dims > MAX_FULL_PRECISION_DIMS
}

/// The cosine distance between `column` and `query` as the index over `dims`-dimensional
/// vectors orders it: the vectors themselves, or their half-precision casts.
pub fn indexed_distance(column: &str, query: &str, dims: u32) -> String {
    if indexes_half_precision(dims) {
        format!("({column})::halfvec({dims}) <=> ({query})::halfvec({dims})")
    } else {
        format!("{column} <=> {query}")
    }
}

/// The HNSW index (cosine) over a table's `dims`-dimensional vectors, as conclusions have it: over
/// the vectors themselves up to [`MAX_FULL_PRECISION_DIMS`], over their half-precision casts
/// above (which keep about three significant digits: a search ranks the candidates it reads by
/// the exact distance).
pub fn vector_index(table: &str, dims: u32) -> String {
    let (indexed, ops) = if indexes_half_precision(dims) {
        (
            format!("(embedding::halfvec({dims}))"),
            "halfvec_cosine_ops",
        )
    } else {
        ("embedding".to_owned(), "vector_cosine_ops")
    };
    format!(
        "CREATE INDEX ix_{table}_embedding_hnsw ON {table} USING hnsw ({indexed} {ops}) \
         WITH (m = 16, ef_construction = 64)"
    )
}

/// Consecutive turns of a session whose vectors `message_blocks` sums into one row (see
/// migration m20261206_000280): about one sitting of a conversation, so a block's sum points at
/// what it was about, and few enough rows that a search ranks all of a block's turns.
pub const MESSAGE_BLOCK_TURNS: i64 = 32;

/// Links per element of the messages' bit graph (twice as many on its bottom layer). An
/// insertion relinks each neighbour it joins, so its cost grows with about the square of `m`.
/// See migration m20261202_000090 for why it is not pgvector's 16.
pub const MESSAGE_GRAPH_M: u32 = 12;
/// The beam an insertion into the messages' bit graph searches for its neighbours with
/// (pgvector requires at least `2 · m`). See migration m20261206_000270 for why it is 24 again.
pub const MESSAGE_GRAPH_EF_CONSTRUCTION: u32 = 24;

/// The messages' vector index: HNSW over the embeddings' sign bits (Hamming distance). A query
/// must order by the same expression, `binary_quantize(embedding)::bit(dims)`, to use it.
pub fn message_vector_index(dims: u32) -> String {
    message_vector_index_shaped(
        "ix_messages_embedding_hnsw",
        dims,
        MESSAGE_GRAPH_M,
        MESSAGE_GRAPH_EF_CONSTRUCTION,
    )
}

/// [`message_vector_index`] under another name or with a graph of another shape (what earlier
/// migrations built).
fn message_vector_index_shaped(name: &str, dims: u32, m: u32, ef_construction: u32) -> String {
    format!(
        "CREATE INDEX {name} ON messages \
         USING hnsw ((binary_quantize(embedding)::bit({dims})) bit_hamming_ops) \
         WITH (m = {m}, ef_construction = {ef_construction})"
    )
}

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_initial::Migration),
            Box::new(m20261130_000002_conclusion_public_metadata::Migration),
            Box::new(m20261201_000040_deriver_queue::Migration),
            Box::new(m20261201_000010_search_term_stats::Migration),
            Box::new(m20261201_000011_author_in_search_text::Migration),
            Box::new(m20261201_000050_drop_session_is_active::Migration),
            Box::new(m20261201_000060_conclusion_search_text::Migration),
            Box::new(m20261201_000061_embedding_text_marker::Migration),
            Box::new(m20261201_000070_binary_quantized_message_index::Migration),
            Box::new(m20261201_000080_session_list_indexes::Migration),
            Box::new(m20261202_000090_lighter_message_graph::Migration),
            Box::new(m20261203_000140_webhooks::Migration),
            Box::new(m20261203_000150_erasure::Migration),
            Box::new(m20261203_000160_erasure_forgets_webhook_deliveries::Migration),
            Box::new(m20261203_000200_import_checkpoints::Migration),
            Box::new(m20261203_000210_scopes::Migration),
            Box::new(m20261203_000220_session_summaries::Migration),
            Box::new(m20261203_000221_peer_card_entries::Migration),
            Box::new(m20261203_000230_dreams::Migration),
            Box::new(m20261203_000250_peer_card_entry_positions::Migration),
            Box::new(m20261205_000260_wider_message_graph_beam::Migration),
            Box::new(m20261206_000270_message_graph_beam_back_to_24::Migration),
            Box::new(m20261206_000280_message_blocks::Migration),
            Box::new(m20261207_000290_block_update_skips_first_vectors::Migration),
            Box::new(m20261207_000300_message_session_sums::Migration),
            Box::new(m20261207_000310_session_author_seq_index::Migration),
        ]
    }
}
