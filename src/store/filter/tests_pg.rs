//! The lowered SQL run against PostgreSQL: known rows in TEMP tables shaped like the real ones
//! (inside a transaction that is rolled back), each filter's matching ids checked, plus well over
//! a thousand random accepted filters executed to show the SQL is valid for the server.
//!
//! Uses `DATABASE_URL`, or the local server at 127.0.0.1:5432 (user postgres, trust auth); when
//! neither answers the tests print a notice and pass (under `CI=true` they fail).

use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use sea_orm::sea_query::{Alias, Expr, Order, Query};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction,
    EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use serde_json::{Value, json};

use super::fields::Kind;
use super::*;
use Resource::{Conclusion, Message, Peer, Session, Workspace};

async fn connect() -> Option<DatabaseConnection> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let mut opt = ConnectOptions::new(url);
    opt.connect_timeout(Duration::from_secs(3))
        .max_connections(1)
        .sqlx_logging(false);
    match Database::connect(opt).await {
        Ok(db) => Some(db),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("filter tests_pg cannot run under CI=true: no PostgreSQL reachable ({e})")
        }
        Err(e) => {
            eprintln!("SKIPPED: filter tests_pg: no PostgreSQL reachable ({e})");
            None
        }
    }
}

const SCHEMA: &[&str] = &[
    "CREATE TEMP TABLE workspaces (name text, metadata jsonb NOT NULL DEFAULT '{}', \
     created_at timestamptz NOT NULL DEFAULT now()) ON COMMIT DROP",
    "CREATE TEMP TABLE peers (name text, workspace_name text, metadata jsonb NOT NULL DEFAULT '{}', \
     created_at timestamptz NOT NULL DEFAULT now()) ON COMMIT DROP",
    "CREATE TEMP TABLE sessions (name text, workspace_name text, \
     metadata jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL DEFAULT now()) ON COMMIT DROP",
    "CREATE TEMP TABLE messages (public_id text PRIMARY KEY, workspace_name text, session_name text, \
     peer_name text, seq_in_session bigint NOT NULL, content text, metadata jsonb NOT NULL, \
     token_count integer NOT NULL, created_at timestamptz NOT NULL) ON COMMIT DROP",
    "CREATE TEMP TABLE conclusions (id text, workspace_name text, observer text, observed text, \
     session_name text, level text, times_derived integer, metadata jsonb NOT NULL, \
     created_at timestamptz NOT NULL) ON COMMIT DROP",
    "INSERT INTO workspaces (name, metadata) VALUES ('w1', '{\"plan\": \"pro\"}'), ('w2', '{}')",
    "INSERT INTO peers (name, workspace_name) VALUES ('alice', 'w1'), ('bob', 'w1')",
    "INSERT INTO sessions (name, workspace_name) VALUES ('s1', 'w1'), ('s2', 'w1')",
    r#"INSERT INTO messages VALUES
     ('m1', 'w1', 's1', 'alice', 1, 'Hello 50% off_sale', '{"importance": "high", "score": 5, "tag": "x"}', 3, '2025-12-31T23:00:00Z'),
     ('m2', 'w1', 's1', 'bob', 2, 'hello 500 world', '{"score": "5", "nested": {"a": 1, "b": 2}}', 10, '2026-01-01T00:00:00Z'),
     ('m3', 'w1', 's1', 'alice', 3, 'back\slash', '{"score": "abc", "flag": true}', 0, '2026-01-02T00:00:00Z'),
     ('m4', 'w1', 's1', 'carol', 10, 'x', '{"score": 12.5, "flag": "true"}', 100, '2026-02-01T00:00:00Z'),
     ('m5', 'w1', 's1', 'alice', 20, 'y', '{}', 7, '2026-03-01T00:00:00Z'),
     ('m6', 'w1', 's1', 'dave', 9007199254740993, 'z', '{"score": "1e3"}', 1, '2026-04-01T00:00:00Z')"#,
    r#"INSERT INTO conclusions VALUES
     ('c1', 'w1', 'alice', 'bob', 's1', 'deductive', 3, '{"importance": "high"}', '2026-01-05T00:00:00Z'),
     ('c2', 'w1', 'alice', 'bob', NULL, 'inductive', 1, '{}', '2025-06-01T00:00:00Z'),
     ('c3', 'w1', 'bob', 'alice', 's2', 'explicit', 5, '{"importance": "high"}', '2026-02-01T00:00:00Z')"#,
];

async fn fixture(db: &DatabaseConnection) -> DatabaseTransaction {
    let txn = db.begin().await.expect("begin");
    for sql in SCHEMA {
        txn.execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    txn
}

fn table(r: Resource) -> (&'static str, &'static str) {
    match r {
        Workspace => ("workspaces", "name"),
        Peer => ("peers", "name"),
        Session => ("sessions", "name"),
        Message => ("messages", "public_id"),
        Conclusion => ("conclusions", "id"),
    }
}

/// The ids a filter selects, through a hand-built statement with the table aliased `t`.
async fn ids(
    txn: &DatabaseTransaction,
    r: Resource,
    filter: &Filter,
) -> Result<Vec<String>, String> {
    let (table, id) = table(r);
    let q = Query::select()
        .expr_as(
            Expr::col((Alias::new("t"), Alias::new(id))),
            Alias::new("id"),
        )
        .from_as(Alias::new(table), Alias::new("t"))
        .cond_where(filter.condition("t"))
        .order_by(Alias::new("id"), Order::Asc)
        .to_owned();
    let rows = txn.query_all(&q).await.map_err(|e| e.to_string())?;
    rows.iter()
        .map(|row| row.try_get::<String>("", "id").map_err(|e| e.to_string()))
        .collect()
}

async fn check(txn: &DatabaseTransaction, r: Resource, j: Value, want: &[&str]) {
    let f = parse(r, &j).unwrap_or_else(|e| panic!("{j}: {e}"));
    let got = ids(txn, r, &f).await.unwrap_or_else(|e| panic!("{j}: {e}"));
    assert_eq!(got, want, "{r:?} {j}");
}

#[tokio::test]
async fn filters_select_the_right_rows() {
    let Some(db) = connect().await else { return };
    let txn = fixture(&db).await;
    let all = ["m1", "m2", "m3", "m4", "m5", "m6"];
    let cases: Vec<(Value, Vec<&str>)> = vec![
        // Seeds.
        (
            json!({"seq_in_session": {"gte": 2, "lte": 10}}),
            vec!["m2", "m3", "m4"],
        ),
        (json!({"seq_in_session": {"gt": 3}}), vec!["m4", "m5", "m6"]),
        (json!({"seq_in_session": 10}), vec!["m4"]),
        (
            json!({"peer_id": "alice", "seq_in_session": {"gte": 1, "lte": 100}}),
            vec!["m1", "m3", "m5"],
        ),
        (
            json!({"AND": [{"peer_id": "alice"}, {"seq_in_session": {"gte": 3}}]}),
            vec!["m3", "m5"],
        ),
        // Exact integers above 2^53, fractional and huge operands.
        (
            json!({"seqInSession": 9_007_199_254_740_993_i64}),
            vec!["m6"],
        ),
        (json!({"seqInSession": 9_007_199_254_740_992_i64}), vec![]),
        (
            json!({"seqInSession": {"gt": 9_007_199_254_740_992_i64}}),
            vec!["m6"],
        ),
        (
            json!({"seqInSession": {"gt": 2.5, "lt": 10.5}}),
            vec!["m3", "m4"],
        ),
        (json!({"seqInSession": {"lt": 1e30}}), all.to_vec()),
        (
            json!({"token_count": {"gte": 3, "lt": 10.5}}),
            vec!["m1", "m2", "m5"],
        ),
        // Logic, wildcards, lists.
        (
            json!({"OR": [{"peer_id": "*"}, {"peer_id": "alice"}]}),
            all.to_vec(),
        ),
        (
            json!({"NOT": [{"peer_id": "alice"}]}),
            vec!["m2", "m4", "m6"],
        ),
        (
            json!({"NOT": [{"peer_id": "alice"}, {"peer_id": "bob"}]}),
            vec!["m4", "m6"],
        ),
        (json!({"peerId": {"ne": "alice"}}), vec!["m2", "m4", "m6"]),
        (json!({"peerId": {"in": []}}), vec![]),
        (json!({"id": ["m1", "m3"]}), vec!["m1", "m3"]),
        // Substring matches: case-insensitive, %, _ and \ literal.
        (json!({"content": {"contains": "50%"}}), vec!["m1"]),
        (json!({"content": {"icontains": "HELLO"}}), vec!["m1", "m2"]),
        (json!({"content": {"contains": "_"}}), vec!["m1"]),
        (json!({"content": {"contains": "\\"}}), vec!["m3"]),
        // Metadata: JSON-typed containment.
        (json!({"metadata": {"score": 5}}), vec!["m1"]),
        (json!({"metadata": {"score": 5.0}}), vec!["m1"]),
        (json!({"metadata": {"score": "5"}}), vec!["m2"]),
        (json!({"metadata": {"nested": {"a": 1}}}), vec!["m2"]),
        (
            json!({"metadata": {"contains": {"importance": "high"}}}),
            vec!["m1"],
        ),
        // Metadata key operators: numeric when the operand is, never failing on "abc".
        (
            json!({"metadata": {"score": {"gt": 4}}}),
            vec!["m1", "m2", "m4", "m6"],
        ),
        (
            json!({"metadata": {"score": {"gte": "12.5"}}}),
            vec!["m4", "m6"],
        ),
        (json!({"metadata": {"score": {"ne": 5}}}), vec!["m4", "m6"]),
        (json!({"metadata": {"tag": {"gt": "w"}}}), vec!["m1"]),
        (
            json!({"metadata": {"score": {"icontains": "B"}}}),
            vec!["m3"],
        ),
        (
            json!({"metadata": {"flag": {"ne": null}}}),
            vec!["m3", "m4"],
        ),
        // `in` on a key compares JSON values.
        (json!({"metadata": {"flag": {"in": [true]}}}), vec!["m3"]),
        (json!({"metadata": {"flag": {"in": ["true"]}}}), vec!["m4"]),
        (
            json!({"metadata": {"score": {"in": [5, "abc"]}}}),
            vec!["m1", "m3"],
        ),
        // NOT is NULL-safe: rows where the inner test is NULL count as "not".
        (
            json!({"OR": [{"seqInSession": 1}, {"NOT": [{"metadata": {"score": {"gt": 4}}}]}]}),
            vec!["m1", "m3", "m5"],
        ),
        // Datetimes.
        (
            json!({"created_at": {"gte": "2026-01-01"}}),
            vec!["m2", "m3", "m4", "m5", "m6"],
        ),
        (
            json!({"createdAt": {"lt": "2026-01-01T01:00:00+01:00"}}),
            vec!["m1"],
        ),
    ];
    for (j, want) in cases {
        check(&txn, Message, j, &want).await;
    }

    let conclusions: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"AND": [{"observer_id": "alice"}, {"level": {"in": ["deductive", "inductive"]}}, {"metadata": {"importance": "high"}}]}),
            vec!["c1"],
        ),
        (json!({"sessionId": {"ne": "s1"}}), vec!["c2", "c3"]),
        (json!({"sessionId": null}), vec!["c2"]),
        (json!({"sessionId": ["s1", null]}), vec!["c1", "c2"]),
        (json!({"NOT": [{"sessionId": "s1"}]}), vec!["c2", "c3"]),
        (json!({"level": "DEDUCTIVE"}), vec!["c1"]),
        (json!({"times_derived": {"gte": 3}}), vec!["c1", "c3"]),
        (
            json!({"created_at": {"gte": "2026-01-01"}}),
            vec!["c1", "c3"],
        ),
        (json!({"observedId": "alice"}), vec!["c3"]),
    ];
    for (j, want) in conclusions {
        check(&txn, Conclusion, j, &want).await;
    }

    // Every session that exists is active.
    check(&txn, Session, json!({"isActive": false}), &[]).await;
    check(&txn, Session, json!({"is_active": {"ne": true}}), &[]).await;
    check(&txn, Session, json!({"isActive": true}), &["s1", "s2"]).await;
    check(
        &txn,
        Session,
        json!({"isActive": {"in": [false, null]}}),
        &[],
    )
    .await;
    check(&txn, Peer, json!({"id": {"icontains": "AL"}}), &["alice"]).await;
    check(
        &txn,
        Workspace,
        json!({"metadata": {"plan": "pro"}}),
        &["w1"],
    )
    .await;
    check(&txn, Workspace, json!({}), &["w1", "w2"]).await;

    txn.rollback().await.expect("rollback");
}

/// A minimal entity over the temp `messages` table, to use the condition the SeaORM way.
mod message {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "messages")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub public_id: String,
        pub peer_name: String,
        pub seq_in_session: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

#[tokio::test]
async fn condition_works_in_seaorm_find_filter() {
    let Some(db) = connect().await else { return };
    let txn = fixture(&db).await;
    let f = parse(
        Message,
        &json!({"peer_id": "alice", "seq_in_session": {"gte": 1, "lte": 100}}),
    )
    .unwrap();
    let rows = message::Entity::find()
        .filter(f.condition("messages"))
        .order_by_asc(message::Column::SeqInSession)
        .all(&txn)
        .await
        .expect("query");
    let got: Vec<(&str, i64)> = rows
        .iter()
        .map(|m| (m.public_id.as_str(), m.seq_in_session))
        .collect();
    assert_eq!(got, [("m1", 1), ("m3", 3), ("m5", 20)]);
    txn.rollback().await.expect("rollback");
}

// ------------------------------------------------------ random valid filters, executed

fn pick(items: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(items).prop_map(Value::from).boxed()
}

fn ints() -> BoxedStrategy<Value> {
    prop_oneof![
        (-5i64..30).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-50.0f64..50.0).prop_map(Value::from),
        pick(&[
            "10",
            "-3",
            "2.5",
            "1e3",
            "1e999",
            "99999999999999999999",
            "*"
        ]),
    ]
    .boxed()
}

fn texts() -> BoxedStrategy<Value> {
    prop_oneof![
        pick(&[
            "alice", "bob", "s1", "m1", "", "*", "%", "_", "\\", "'; --", "é"
        ]),
        "[^\u{0}]{0,8}".prop_map(Value::from),
    ]
    .boxed()
}

fn datetimes() -> BoxedStrategy<Value> {
    pick(&[
        "2026-01-01",
        "2025-12-31T23:00:00Z",
        "2026-01-01T01:00:00+01:00",
        "2026-01-01 00:00:00",
        "0001-01-01",
        "9999-12-31T23:59:59.999999-05:00",
    ])
}

/// Operands a metadata key accepts; JSON leaves for containment.
fn meta_leaves() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        ints(),
        texts(),
        pick(&["true", "abc", "5", "12.5", "1e3"]),
    ]
    .boxed()
}

/// A value valid for a column of this kind: scalar, list, or operator dict.
fn valid_value(kind: Kind) -> BoxedStrategy<Value> {
    let scalar = match kind {
        Kind::Text | Kind::LongText => texts(),
        Kind::Int => ints(),
        Kind::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Kind::DateTime => datetimes(),
        Kind::Level => pick(&["explicit", "DEDUCTIVE", "inductive", "Contradiction"]),
        Kind::Metadata => return valid_metadata(),
    };
    let ops: &'static [&'static str] = match kind {
        Kind::Text => &["gt", "gte", "lt", "lte", "ne", "contains", "icontains"],
        Kind::LongText => &["ne", "contains", "icontains"],
        Kind::Int | Kind::DateTime => &["gt", "gte", "lt", "lte", "ne"],
        _ => &["ne"],
    };
    let list = prop::collection::vec(
        prop_oneof![4 => scalar.clone(), 1 => Just(Value::Null)],
        0..4,
    )
    .prop_map(Value::Array);
    let op_dict = prop::collection::btree_map(
        prop::sample::select(ops),
        prop_oneof![4 => scalar.clone(), 1 => Just(Value::Null)],
        1..3,
    )
    .prop_map(|m| {
        Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    (
                        k.to_owned(),
                        if k == "ne" {
                            v
                        } else if v.is_null() {
                            json!("*")
                        } else {
                            v
                        },
                    )
                })
                .collect(),
        )
    });
    let in_dict = list.clone().prop_map(|l| json!({ "in": l }));
    prop_oneof![
        3 => scalar,
        1 => Just(Value::Null),
        2 => list,
        3 => op_dict,
        1 => in_dict,
    ]
    .boxed()
}

fn valid_metadata() -> BoxedStrategy<Value> {
    let key = || prop::sample::select(&["score", "flag", "tag", "nested", "a b"][..]);
    let key_ops = prop::collection::btree_map(
        prop::sample::select(&["gt", "gte", "lt", "lte", "ne"][..]),
        prop_oneof![any::<bool>().prop_map(Value::from), ints(), texts()],
        1..3,
    )
    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
    let key_value = prop_oneof![
        3 => meta_leaves(),
        2 => key_ops,
        1 => prop::collection::vec(meta_leaves(), 0..3).prop_map(|l| json!({ "in": l })),
        1 => texts().prop_map(|t| json!({ "icontains": t })),
        1 => Just(json!({ "ne": null })),
        1 => meta_leaves().prop_map(|v| json!({ "a": v })),
    ];
    prop_oneof![
        4 => prop::collection::btree_map(key(), key_value, 0..3)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        1 => meta_leaves().prop_map(|v| json!({ "contains": { "score": v } })),
        1 => Just(json!({ "ne": null })),
        1 => prop::collection::vec(meta_leaves(), 0..2).prop_map(Value::Array),
    ]
    .boxed()
}

/// A filter for `r` built only from its real keys and valid operands, nested with AND/OR/NOT.
fn valid_filter(r: Resource) -> BoxedStrategy<Value> {
    let fields = r.fields();
    let entry = prop::sample::select(fields.to_vec()).prop_flat_map(|f| {
        let name = if f.camel == f.snake { f.camel } else { f.snake };
        let spelling = prop::sample::select(vec![f.camel, name]);
        (spelling, valid_value(f.kind))
    });
    let object = prop::collection::vec(entry, 0..3)
        .prop_map(|kvs| Value::Object(kvs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
    object
        .prop_recursive(4, 24, 3, |inner| {
            (
                prop::sample::select(&["AND", "OR", "NOT"][..]),
                prop::collection::vec(inner, 0..3),
            )
                .prop_map(|(op, items)| json!({ op: items }))
        })
        .boxed()
}

#[tokio::test]
async fn random_accepted_filters_always_execute() {
    let Some(db) = connect().await else { return };
    let txn = fixture(&db).await;
    let mut runner = TestRunner::deterministic();
    let strategy =
        prop::sample::select(Resource::ALL.to_vec()).prop_flat_map(|r| (Just(r), valid_filter(r)));
    let (mut executed, mut refused) = (0, 0);
    for _ in 0..1000 {
        let (r, j) = strategy.new_tree(&mut runner).expect("tree").current();
        let f = match parse(r, &j) {
            Ok(f) => f,
            Err(e) => {
                // Only operand values the generator cannot know are invalid may be refused.
                assert!(
                    matches!(e.kind, FilterErrorKind::InvalidValue { .. }),
                    "{r:?} {j}: {e}"
                );
                refused += 1;
                continue;
            }
        };
        if let Err(e) = ids(&txn, r, &f).await {
            panic!("{r:?} {j} failed in PostgreSQL: {e}\ntree: {:?}", f.tree());
        }
        executed += 1;
    }
    eprintln!("random valid filters: executed {executed}, refused {refused}");
    assert!(executed > 900, "executed {executed}, refused {refused}");
    txn.rollback().await.expect("rollback");
}

/// The no-panic generator's accepted filters execute too.
#[tokio::test]
async fn random_filter_shaped_inputs_execute_when_accepted() {
    let Some(db) = connect().await else { return };
    let txn = fixture(&db).await;
    let mut runner = TestRunner::deterministic();
    let strategy = (super::tests::any_resource(), super::tests::filter_json());
    let mut executed = 0;
    for _ in 0..1000 {
        let (r, j) = strategy.new_tree(&mut runner).expect("tree").current();
        let Ok(f) = parse(r, &j) else { continue };
        if let Err(e) = ids(&txn, r, &f).await {
            panic!("{r:?} {j} failed in PostgreSQL: {e}\ntree: {:?}", f.tree());
        }
        executed += 1;
    }
    eprintln!("random filter-shaped inputs: executed {executed} of 1000");
    assert!(executed > 20, "only {executed} accepted");
    txn.rollback().await.expect("rollback");
}
