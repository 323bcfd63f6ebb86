//! Conclusions get a full-text index of their content and of both peers' ids (observer and
//! observed), so that "what do we know about caroline?" finds conclusions about caroline by her
//! id as well as by meaning. A generated column (the table is rewritten once) and its GIN index.

use sea_orm_migration::prelude::*;

sql_migration!(
    up: &[
        "ALTER TABLE conclusions ADD COLUMN content_tsv TSVECTOR GENERATED ALWAYS AS \
         (to_tsvector('english', content) || to_tsvector('english', observer) \
          || to_tsvector('english', observed)) STORED",
        "CREATE INDEX ix_conclusions_content_tsv ON conclusions USING gin (content_tsv)",
    ],
    down: &["ALTER TABLE conclusions DROP COLUMN content_tsv"],
);
