//! A deleted message or conclusion takes its `message.created` or `conclusion.created` deliveries
//! with it (docs/erasure.md): a delivery's body is the row as it was written, so a delivery left
//! behind would keep an erased text, and a pending one would still send it. Statement triggers, as
//! for the search statistics, so that every way of deleting (erasure, `deleteSession`, cascades)
//! is covered; each reads the workspace's deliveries through their workspace index only.

use sea_orm_migration::prelude::*;

const UP: &[&str] = &[
    "CREATE FUNCTION webhook_deliveries_forget_messages() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       DELETE FROM webhook_deliveries d USING old_rows o
       WHERE d.workspace_name = o.workspace_name AND d.event_type = 'message.created'
         AND (d.body::jsonb -> 'data' ->> 'message_id') = o.public_id;
       RETURN NULL;
     END $$",
    "CREATE FUNCTION webhook_deliveries_forget_conclusions() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       DELETE FROM webhook_deliveries d USING old_rows o
       WHERE d.workspace_name = o.workspace_name AND d.event_type = 'conclusion.created'
         AND (d.body::jsonb -> 'data' ->> 'conclusion_id') = o.id;
       RETURN NULL;
     END $$",
    "CREATE TRIGGER messages_webhook_deliveries_forget AFTER DELETE ON messages
       REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
       EXECUTE FUNCTION webhook_deliveries_forget_messages()",
    "CREATE TRIGGER conclusions_webhook_deliveries_forget AFTER DELETE ON conclusions
       REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
       EXECUTE FUNCTION webhook_deliveries_forget_conclusions()",
];

sql_migration!(
    up: UP,
    down: &[
        "DROP TRIGGER IF EXISTS messages_webhook_deliveries_forget ON messages;
         DROP TRIGGER IF EXISTS conclusions_webhook_deliveries_forget ON conclusions;
         DROP FUNCTION IF EXISTS webhook_deliveries_forget_messages(),
           webhook_deliveries_forget_conclusions()",
    ],
);
