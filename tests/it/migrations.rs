use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::harness::blank_database;

async fn scalar(db: &sea_orm::DatabaseConnection, sql: &str) -> Option<String> {
    db.query_one_raw(Statement::from_string(DbBackend::Postgres, sql))
        .await
        .unwrap()
        .and_then(|r| r.try_get_by_index::<Option<String>>(0).unwrap())
}

#[tokio::test]
async fn migrations_go_up_down_to_zero_and_up_again() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(
        Migrator::get_pending_migrations(&db).await.unwrap().len(),
        0
    );
    Migrator::down(&db, None).await.unwrap();
    assert_eq!(
        scalar(&db, "SELECT to_regclass('public.messages')::text").await,
        None,
        "down() to zero drops the tables"
    );
    Migrator::up(&db, None).await.unwrap();
    assert!(
        scalar(&db, "SELECT to_regclass('public.conclusions')::text")
            .await
            .is_some()
    );
    db.close().await.unwrap();
}

#[tokio::test]
async fn conclusion_written_before_the_metadata_migration_reads_empty_object_after_it() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, Some(1)).await.unwrap();
    assert_eq!(
        scalar(
            &db,
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = 'conclusions' AND column_name = 'metadata'"
        )
        .await,
        None,
        "the initial schema has no public metadata on conclusions"
    );
    db.execute_unprepared(
        "INSERT INTO workspaces (id, name) VALUES ('wwwwwwwwwwwwwwwwwwwww', 'ws');
         INSERT INTO peers (id, name, workspace_name) VALUES ('ppppppppppppppppppppa', 'alice', 'ws');
         INSERT INTO conclusions (id, workspace_name, observer, observed, content)
           VALUES ('ccccccccccccccccccccc', 'ws', 'alice', 'alice', 'likes tea');",
    )
    .await
    .unwrap();
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(
        scalar(&db, "SELECT metadata::text FROM conclusions")
            .await
            .as_deref(),
        Some("{}")
    );
    assert_eq!(
        scalar(
            &db,
            "SELECT is_nullable::text FROM information_schema.columns \
             WHERE table_name = 'conclusions' AND column_name = 'metadata'"
        )
        .await
        .as_deref(),
        Some("NO")
    );
    let index = scalar(
        &db,
        "SELECT am.amname::text || ':' || i.indisvalid::text FROM pg_class c \
         JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_am am ON am.oid = c.relam \
         WHERE c.relname = 'ix_conclusions_metadata_gin'",
    )
    .await;
    assert_eq!(index.as_deref(), Some("gin:true"));

    // down() of the second migration (and of those after it) drops both and leaves the rest.
    let after_initial = Migrator::migrations().len() as u32 - 1;
    Migrator::down(&db, Some(after_initial)).await.unwrap();
    assert_eq!(
        scalar(
            &db,
            "SELECT to_regclass('public.ix_conclusions_metadata_gin')::text"
        )
        .await,
        None
    );
    assert_eq!(
        scalar(&db, "SELECT content FROM conclusions")
            .await
            .as_deref(),
        Some("likes tea")
    );
    db.close().await.unwrap();
}

#[tokio::test]
async fn initial_schema_has_the_search_and_provenance_indexes() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    for (index, method) in [
        ("ix_messages_embedding_hnsw", "hnsw"),
        ("ix_conclusions_embedding_hnsw", "hnsw"),
        ("ix_messages_content_tsv", "gin"),
        ("ix_messages_content_trgm", "gin"),
        ("ix_conclusions_source_ids_gin", "gin"),
        ("uq_messages_session_seq", "btree"),
    ] {
        let got = scalar(
            &db,
            &format!(
                "SELECT am.amname::text FROM pg_class c JOIN pg_am am ON am.oid = c.relam \
                 WHERE c.relname = '{index}'"
            ),
        )
        .await;
        assert_eq!(got.as_deref(), Some(method), "{index}");
    }
    assert_eq!(
        scalar(
            &db,
            "SELECT value FROM honcho_meta WHERE key = 'embedding_dims'"
        )
        .await
        .as_deref(),
        Some("384")
    );
    assert_eq!(
        scalar(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'messages'::regclass AND attname = 'embedding'"
        )
        .await
        .as_deref(),
        Some("vector(384)")
    );
    db.close().await.unwrap();
}

/// `honcho-graphql migrate up` gives a fresh database's vector columns the configured embedder's
/// dimension, as `serve` does (it used to create `vector(384)` whatever the embedder).
#[tokio::test]
async fn the_migrate_command_sizes_vectors_for_the_configured_embedder() {
    for (env, dims) in [
        (
            vec![
                ("HONCHO_EMBEDDER", "openai"),
                ("HONCHO_OPENAI_DIMS", "1536"),
                ("HONCHO_OPENAI_API_KEY", "unused"),
            ],
            "1536",
        ),
        (vec![("HONCHO_EMBEDDER", "none")], "384"),
    ] {
        let guard = blank_database().await;
        let out = crate::harness::run_binary(&["migrate", "up"], &guard.url(), &env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let db = Database::connect(guard.url()).await.unwrap();
        assert_eq!(
            scalar(
                &db,
                "SELECT value FROM honcho_meta WHERE key = 'embedding_dims'"
            )
            .await,
            Some(dims.to_owned())
        );
        for table in ["messages", "conclusions"] {
            let ty = scalar(
                &db,
                &format!(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
                     WHERE attrelid = '{table}'::regclass AND attname = 'embedding'"
                ),
            )
            .await;
            assert_eq!(ty, Some(format!("vector({dims})")), "{table}");
        }
        db.close().await.unwrap();
    }
}

#[tokio::test]
async fn the_deriver_queue_migration_goes_down_and_up_with_the_rows_it_depends_on() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    for table in ["deriver_units", "deriver_items", "conclusion_messages"] {
        assert!(
            scalar(&db, &format!("SELECT to_regclass('public.{table}')::text"))
                .await
                .is_some(),
            "{table}"
        );
    }
    Migrator::down(&db, Some(steps_down_through("_000040_deriver_queue")))
        .await
        .unwrap();
    for table in ["deriver_units", "deriver_items", "conclusion_messages"] {
        assert_eq!(
            scalar(&db, &format!("SELECT to_regclass('public.{table}')::text")).await,
            None,
            "{table}"
        );
    }
    assert!(
        scalar(&db, "SELECT to_regclass('public.conclusions')::text")
            .await
            .is_some()
    );
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(
        Migrator::get_pending_migrations(&db).await.unwrap().len(),
        0
    );
    db.close().await.unwrap();
}

#[tokio::test]
async fn the_message_graph_migrations_rebuild_the_bit_index_both_ways() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    let shape = "SELECT array_to_string(c.reloptions, ',') || ' ' || i.indisvalid \
                 || ' ' || (pg_get_indexdef(c.oid) LIKE '%binary_quantize%') \
                 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid \
                 WHERE c.relname = 'ix_messages_embedding_hnsw'";
    let current = format!(
        "m={},ef_construction={} true true",
        migration::MESSAGE_GRAPH_M,
        migration::MESSAGE_GRAPH_EF_CONSTRUCTION
    );
    assert_eq!(scalar(&db, shape).await.as_deref(), Some(current.as_str()));
    // Each step down restores the graph the migration before it built.
    let mut taken = 0;
    for (through, graph) in [
        (
            "_000270_message_graph_beam_back_to_24",
            "m=12,ef_construction=64",
        ),
        (
            "_000260_wider_message_graph_beam",
            "m=12,ef_construction=24",
        ),
        ("_000090_lighter_message_graph", "m=16,ef_construction=64"),
    ] {
        let steps = steps_down_through(through) - taken;
        Migrator::down(&db, Some(steps)).await.unwrap();
        taken += steps;
        assert_eq!(
            scalar(&db, shape).await.as_deref(),
            Some(format!("{graph} true true").as_str()),
            "down through {through}"
        );
    }
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(scalar(&db, shape).await.as_deref(), Some(current.as_str()));
    // Each graph built beside the old one took its name: nothing is left under another.
    assert_eq!(
        scalar(
            &db,
            "SELECT count(*)::text FROM pg_class WHERE relname LIKE 'ix_messages_embedding_hnsw%'"
        )
        .await
        .as_deref(),
        Some("1")
    );
    db.close().await.unwrap();
}

/// A database migrated by an earlier server records every migration that server ran; one missing
/// from the list would stop the server at start ("this migration has been applied but its file
/// is missing"), so a migration that landed is never taken out, only undone by a later one.
#[tokio::test]
async fn a_database_that_ran_the_wider_graph_beam_migration_still_migrates() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    Migrator::down(
        &db,
        Some(steps_down_through("_000270_message_graph_beam_back_to_24")),
    )
    .await
    .unwrap();
    let recorded = scalar(
        &db,
        "SELECT count(*)::text FROM seaql_migrations WHERE version LIKE '%_000260_wider_message_graph_beam'",
    )
    .await;
    assert_eq!(recorded.as_deref(), Some("1"));
    Migrator::up(&db, None).await.unwrap();
    assert!(
        Migrator::get_pending_migrations(&db)
            .await
            .unwrap()
            .is_empty()
    );
    db.close().await.unwrap();
}

/// How many `down` steps revert the migration whose name holds `fragment` and those after it,
/// wherever it is in the list.
pub(crate) fn steps_down_through(fragment: &str) -> u32 {
    let names: Vec<String> = Migrator::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .collect();
    let at = names
        .iter()
        .position(|n| n.contains(fragment))
        .unwrap_or_else(|| panic!("no migration named *{fragment}*"));
    (names.len() - at) as u32
}

#[tokio::test]
async fn the_erasure_migration_goes_down_and_up_again_with_the_term_statistics() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    let jobs = "SELECT to_regclass('public.erasure_jobs')::text";
    let forgets = "SELECT (prosrc LIKE '%DELETE FROM search_terms%')::text FROM pg_proc \
                   WHERE proname = 'search_stats_remove'";
    assert_eq!(scalar(&db, forgets).await.as_deref(), Some("true"));
    Migrator::down(&db, Some(steps_down_through("_000150_erasure")))
        .await
        .unwrap();
    assert_eq!(scalar(&db, jobs).await, None);
    assert_eq!(scalar(&db, forgets).await.as_deref(), Some("false"));
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(scalar(&db, jobs).await.as_deref(), Some("erasure_jobs"));
    assert_eq!(scalar(&db, forgets).await.as_deref(), Some("true"));
    db.close().await.unwrap();
}
