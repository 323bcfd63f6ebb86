//! Document frequencies for BM25: per workspace, how many messages there are and how many
//! lexemes they hold in all (`search_corpus`), and in how many messages each lexeme occurs
//! (`search_terms`). Statement-level triggers on `messages` keep both current for every write
//! path (createMessages, cloneSession, deletes and their cascades); the full-text leg of search
//! reads them to weigh a query's words by how rare they are in the workspace.
//!
//! The upserts go in lexeme order, so two batches in one workspace lock shared rows in the same
//! order and wait for each other instead of deadlocking.

use sea_orm_migration::prelude::*;

/// The statistics of the current `content_tsv` of every message (also run again by a later
/// migration that changes what `content_tsv` holds).
pub const BACKFILL: &[&str] = &[
    "DELETE FROM search_terms",
    "DELETE FROM search_corpus",
    "INSERT INTO search_corpus (workspace_name, docs, lexemes)
     SELECT workspace_name, count(*), COALESCE(sum(length(content_tsv)), 0) FROM messages
     GROUP BY workspace_name",
    "INSERT INTO search_terms (workspace_name, lexeme, docs)
     SELECT m.workspace_name, l.lexeme, count(*)
     FROM messages m, unnest(tsvector_to_array(m.content_tsv)) AS l(lexeme)
     GROUP BY m.workspace_name, l.lexeme",
];

/// The trigger function that counts deleted messages out (a later migration rewrites it).
pub const REMOVE: &str = "CREATE FUNCTION search_stats_remove() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       UPDATE search_corpus c SET docs = c.docs - o.docs, lexemes = c.lexemes - o.lexemes
       FROM (SELECT workspace_name, count(*) AS docs, COALESCE(sum(length(content_tsv)), 0) AS lexemes
             FROM old_rows GROUP BY workspace_name) o
       WHERE c.workspace_name = o.workspace_name;
       UPDATE search_terms t SET docs = t.docs - o.docs
       FROM (SELECT r.workspace_name, l.lexeme, count(*) AS docs
             FROM old_rows r, unnest(tsvector_to_array(r.content_tsv)) AS l(lexeme)
             GROUP BY r.workspace_name, l.lexeme) o
       WHERE t.workspace_name = o.workspace_name AND t.lexeme = o.lexeme;
       RETURN NULL;
     END $$";

const UP: &[&str] = &[
    "CREATE TABLE search_corpus (
       workspace_name TEXT PRIMARY KEY REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
       docs BIGINT NOT NULL DEFAULT 0,
       lexemes BIGINT NOT NULL DEFAULT 0
     )",
    "CREATE TABLE search_terms (
       workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
       lexeme TEXT NOT NULL,
       docs BIGINT NOT NULL,
       PRIMARY KEY (workspace_name, lexeme)
     )",
    "CREATE FUNCTION search_stats_add() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO search_corpus AS c (workspace_name, docs, lexemes)
         SELECT workspace_name, count(*), COALESCE(sum(length(content_tsv)), 0) FROM new_rows
         GROUP BY workspace_name ORDER BY workspace_name
       ON CONFLICT (workspace_name) DO UPDATE
         SET docs = c.docs + EXCLUDED.docs, lexemes = c.lexemes + EXCLUDED.lexemes;
       INSERT INTO search_terms AS t (workspace_name, lexeme, docs)
         SELECT n.workspace_name, l.lexeme, count(*)
         FROM new_rows n, unnest(tsvector_to_array(n.content_tsv)) AS l(lexeme)
         GROUP BY n.workspace_name, l.lexeme ORDER BY n.workspace_name, l.lexeme
       ON CONFLICT (workspace_name, lexeme) DO UPDATE SET docs = t.docs + EXCLUDED.docs;
       RETURN NULL;
     END $$",
    REMOVE,
    "CREATE TRIGGER messages_search_stats_add AFTER INSERT ON messages
       REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_stats_add()",
    "CREATE TRIGGER messages_search_stats_remove AFTER DELETE ON messages
       REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_stats_remove()",
];

sql_migration!(
    up: &[UP, BACKFILL].concat(),
    down: &[
        "DROP TRIGGER IF EXISTS messages_search_stats_add ON messages;
         DROP TRIGGER IF EXISTS messages_search_stats_remove ON messages;
         DROP FUNCTION IF EXISTS search_stats_add(), search_stats_remove();
         DROP TABLE IF EXISTS search_terms, search_corpus",
    ],
);
