//! Dreams: the consolidation passes the deriver's workers run over one observer's conclusions
//! about one observed peer.
//!
//! `dream_units` holds one row per (observer, observed) that has ever been asked to dream: whether
//! a dream is pending (`requested_at`) and why, the lease of the worker running it, its failure
//! (the unit stops until retried, as a deriver unit does), and what the next scheduled dream
//! compares against (`last_dream_at`, the live explicit conclusions counted after the last one).

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE dream_units (
       id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       workspace_name TEXT NOT NULL,
       observer TEXT NOT NULL,
       observed TEXT NOT NULL,
       requested_at TIMESTAMPTZ,
       reason TEXT,
       lease_owner TEXT,
       lease_until TIMESTAMPTZ,
       failed_at TIMESTAMPTZ,
       last_error TEXT,
       last_error_at TIMESTAMPTZ,
       last_dream_at TIMESTAMPTZ,
       explicit_at_last_dream BIGINT NOT NULL DEFAULT 0,
       CONSTRAINT uq_dream_units_key UNIQUE (workspace_name, observer, observed),
       FOREIGN KEY (observer, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE,
       FOREIGN KEY (observed, workspace_name) REFERENCES peers (name, workspace_name) ON DELETE CASCADE
     )",
    // What a claim scans: pending dreams with no failure, oldest request first.
    "CREATE INDEX ix_dream_units_ready ON dream_units (requested_at) \
     WHERE requested_at IS NOT NULL AND failed_at IS NULL",
];

sql_migration!(
    up: UP,
    down: &["DROP TABLE IF EXISTS dream_units"],
);
