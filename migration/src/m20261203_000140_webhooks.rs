//! Webhooks: the endpoints a workspace registers, and the outbox of their deliveries.
//!
//! - `webhook_endpoints`: one row per (workspace, URL), as Honcho v3.0.12's `webhook_endpoints`.
//! - `webhook_deliveries`: one row per event and endpoint, inserted by the transaction that makes
//!   the change the event reports, so an event exists exactly when its change committed. The row
//!   holds the body sent on every attempt (its id is the delivery id receivers deduplicate by),
//!   its state (`pending`, `delivered`, `dead`), the attempts made, when the next one is due and
//!   the worker that holds it (`lease_owner`; `next_attempt_at` doubles as the lease's end).

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE TABLE webhook_endpoints (
       id TEXT PRIMARY KEY,
       workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
       url TEXT NOT NULL CHECK (length(url) <= 2048),
       created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       CONSTRAINT uq_webhook_endpoints_url UNIQUE (workspace_name, url)
     )",
    "CREATE TABLE webhook_deliveries (
       id TEXT PRIMARY KEY,
       workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE ON UPDATE CASCADE,
       endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
       event_type TEXT NOT NULL,
       body TEXT NOT NULL,
       status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
       attempts INTEGER NOT NULL DEFAULT 0,
       next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       lease_owner TEXT,
       last_status INTEGER,
       last_error TEXT,
       created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       delivered_at TIMESTAMPTZ
     )",
    // What a claim scans: pending rows, the most overdue first.
    "CREATE INDEX ix_webhook_deliveries_due ON webhook_deliveries (next_attempt_at) \
     WHERE status = 'pending'",
    "CREATE INDEX ix_webhook_deliveries_workspace ON webhook_deliveries (workspace_name, created_at)",
    "CREATE INDEX ix_webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id)",
];

sql_migration!(
    up: UP,
    down: &["DROP TABLE IF EXISTS webhook_deliveries, webhook_endpoints"],
);
