//! Records what the stored vectors were embedded from (`honcho_meta.embedding_text`): `plain`
//! when vectors written by an older server exist (a message alone, a conclusion without its
//! peers' ids), `contextual` otherwise. Nothing tells an old vector from a new one, so any vector
//! present when this runs counts as old. `serve` warns while it is `plain`;
//! `honcho-graphql reembed --all` recomputes every vector and records `contextual`.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &["INSERT INTO honcho_meta (key, value)
         SELECT 'embedding_text',
                CASE WHEN EXISTS (SELECT 1 FROM messages WHERE embedding IS NOT NULL)
                       OR EXISTS (SELECT 1 FROM conclusions WHERE embedding IS NOT NULL)
                     THEN 'plain' ELSE 'contextual' END
         ON CONFLICT (key) DO NOTHING"],
    down: &["DELETE FROM honcho_meta WHERE key = 'embedding_text'"],
);
