//! Conclusions as search keys (docs/search.md, "Conclusions as search keys"): what the deriver
//! concluded from a message makes that message findable. A live explicit conclusion is a key of
//! the messages it cites (`conclusion_messages`), read through the conclusions' own vector and
//! full-text indexes: no table of its own, so the deriver writes nothing more for it.
//!
//! The keys are one more leg of the message search's fusion. It ranks conclusions (by cosine
//! distance to the query's vector, or without one by their full-text rank), maps each to the
//! messages it cites, and keeps the messages of the search's scope that pass its filters, each at
//! the rank of the best conclusion citing it:
//!
//! ```sql
//! "key_near" AS MATERIALIZED (                    -- the conclusions nearest the query
//!   SELECT "c"."id", "c"."embedding" <=> $q AS "dist" FROM "conclusions" AS "c"
//!   WHERE "c"."workspace_name" = $w AND "c"."deleted_at" IS NULL AND "c"."level" = 'explicit'
//!     AND "c"."embedding" IS NOT NULL AND EXISTS (SELECT 1 FROM "terms")
//!     AND EXISTS (SELECT 1 FROM "messages" AS "m" JOIN "conclusion_messages" AS "cm"
//!                 ON "cm"."message_id" = "m"."id" WHERE <scope> AND <filters>
//!                 AND "cm"."conclusion_id" = "c"."id")
//!   ORDER BY <the index's distance> LIMIT pool),
//! "key_hits" AS MATERIALIZED (                    -- the messages they cite, in scope
//!   SELECT "m"."id", min("k"."dist") AS "dist" FROM "messages" AS "m"
//!   JOIN "conclusion_messages" AS "cm" ON "cm"."message_id" = "m"."id"
//!   JOIN "key_near" AS "k" ON "k"."id" = "cm"."conclusion_id"
//!   WHERE <scope> AND <filters> GROUP BY "m"."id" ORDER BY "dist", "id" LIMIT pool)
//! ```
//!
//! A key only ranks: the messages it brings are those the search's scope and filters already
//! allow. Who may rank by conclusions at all is the caller's right to read them
//! ([`SearchKeys`], decided by the access layer), and the server may turn keys off
//! ([`super::search::SearchArgs`]).

use sea_orm::sea_query::{
    Condition, Expr, ExprTrait, JoinType, Order, Query, SelectStatement, Value as SqlValue,
    WithClause,
};

use super::filter::Filter;
use super::search::{HAS_TERMS, SearchScope, a, cte, leg, m, ranked};
use crate::entity::message;

/// What one message search may rank by besides the messages themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchKeys {
    /// The messages' own text and vectors.
    Messages,
    /// Also the live explicit conclusions citing them (when the server's setting allows it):
    /// for a caller who may read the workspace's conclusions.
    WithConclusions,
}

/// The key leg's fusion weight (the message legs' is 1 each).
pub const KEY_WEIGHT: f64 = 1.0;

/// The key leg: its CTEs go into `with`; the answer ranks its hits. `vector` is the query's
/// (bound as given), with its dimension; without one the conclusions are ranked by full text.
pub(super) fn key_leg(
    with: &mut WithClause,
    scope: SearchScope<'_>,
    text: &str,
    vector: Option<(&SqlValue, usize)>,
    filter: &Filter,
    pool: u64,
) -> SelectStatement {
    // Driven by the conclusion's own links (the primary key of `conclusion_messages`), then each
    // message by its id: a conclusion cites a few messages.
    let cited_in_scope = {
        let mut q = leg(
            scope,
            filter,
            Condition::all().add(Expr::cust(r#""cm"."conclusion_id" = "c"."id""#)),
        );
        q.expr(Expr::cust("1")).join_as(
            JoinType::InnerJoin,
            a("conclusion_messages"),
            a("cm"),
            Expr::col((a("cm"), a("message_id"))).equals((m(), message::Column::Id)),
        );
        q
    };
    let mut near = Query::select();
    near.column((a("c"), a("id")))
        .from_as(a("conclusions"), a("c"))
        .cond_where(
            Condition::all()
                .add(Expr::col((a("c"), a("workspace_name"))).eq(scope.workspace()))
                .add(Expr::cust(
                    r#""c"."deleted_at" IS NULL AND "c"."level" = 'explicit'"#,
                ))
                .add(Expr::cust(HAS_TERMS))
                .add(Expr::exists(cited_in_scope)),
        )
        .limit(pool);
    match vector {
        Some((q, dims)) => {
            let dims = u32::try_from(dims).unwrap_or(u32::MAX);
            near.expr_as(
                Expr::cust_with_values(r#""c"."embedding" <=> $1"#, [q.clone()]),
                a("dist"),
            )
            .and_where(Expr::col((a("c"), a("embedding"))).is_not_null())
            // Distance alone in ORDER BY, as the index orders: a second key would keep the
            // HNSW index from ordering.
            .order_by_expr(
                Expr::cust_with_values(
                    migration::indexed_distance(r#""c"."embedding""#, "$1", dims),
                    [q.clone()],
                ),
                Order::Asc,
            );
        }
        None => {
            // Any of the query's lexemes, in the content or either peer's id (`content_tsv`),
            // as `queryConclusions` matches them; the best rank is the smallest "dist".
            let any_lexeme = migration::any_lexeme_tsquery("$1");
            near.expr_as(
                Expr::cust_with_values(
                    format!(r#"-ts_rank_cd("c"."content_tsv", {any_lexeme})::float8"#),
                    [text.to_owned()],
                ),
                a("dist"),
            )
            .and_where(Expr::cust_with_values(
                format!(r#""c"."content_tsv" @@ {any_lexeme}"#),
                [text.to_owned()],
            ))
            .order_by(a("dist"), Order::Asc)
            .order_by((a("c"), a("id")), Order::Asc);
        }
    }
    with.cte(cte("key_near", near, true));

    let mut hits = leg(scope, filter, Condition::all());
    hits.column((m(), message::Column::Id))
        .expr_as(Expr::cust(r#"min("k"."dist")"#), a("dist"))
        .join_as(
            JoinType::InnerJoin,
            a("conclusion_messages"),
            a("cm"),
            Expr::col((a("cm"), a("message_id"))).equals((m(), message::Column::Id)),
        )
        .join_as(
            JoinType::InnerJoin,
            a("key_near"),
            a("k"),
            Expr::col((a("k"), a("id"))).equals((a("cm"), a("conclusion_id"))),
        )
        .group_by_col((m(), message::Column::Id))
        .order_by(a("dist"), Order::Asc)
        .order_by((m(), message::Column::Id), Order::Asc)
        .limit(pool);
    with.cte(cte("key_hits", hits, true));
    ranked("key_hits", r#""dist", "id""#, KEY_WEIGHT)
}
