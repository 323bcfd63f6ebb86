//! The filter DSL's SQL run on the migrated schema (the harness's template database): known rows
//! in the real tables, each filter's matching ids checked, plus two thousand random accepted
//! filters executed, so a migration that renames, retypes or drops a filterable column fails
//! here. Under `CI=true` nothing skips: the harness panics when PostgreSQL is unreachable.

use Resource::{Conclusion, Message, Peer, Session, Workspace};
use honcho_graphql::store::filter::Filter;
use honcho_graphql::store::filter::{FilterErrorKind, Kind, Resource, parse};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use sea_orm::sea_query::{Alias, Expr, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use crate::harness::TestApp;

/// Row ids are 21-character nanoids in the real tables: the rows' short names padded with `_`.
fn long_id(short: &str) -> String {
    format!("{short:_<21}")
}

fn short_id(long: &str) -> String {
    long.trim_end_matches('_').to_owned()
}

/// The rows the cases select from, inserted with the columns the migrations made.
const ROWS: &[&str] = &[
    "INSERT INTO workspaces (id, name, metadata) VALUES
     ('w1___________________', 'w1', '{\"plan\": \"pro\"}'),
     ('w2___________________', 'w2', '{}')",
    "INSERT INTO peers (id, name, workspace_name) VALUES
     ('alice________________', 'alice', 'w1'), ('bob__________________', 'bob', 'w1'),
     ('carol________________', 'carol', 'w1'), ('dave_________________', 'dave', 'w1')",
    "INSERT INTO sessions (id, name, workspace_name) VALUES
     ('s1___________________', 's1', 'w1'), ('s2___________________', 's2', 'w1')",
    r#"INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session,
     content, metadata, token_count, created_at) VALUES
     ('m1___________________', 'w1', 's1', 'alice', 1, 'Hello 50% off_sale', '{"importance": "high", "score": 5, "tag": "x"}', 3, '2025-12-31T23:00:00Z'),
     ('m2___________________', 'w1', 's1', 'bob', 2, 'hello 500 world', '{"score": "5", "nested": {"a": 1, "b": 2}}', 10, '2026-01-01T00:00:00Z'),
     ('m3___________________', 'w1', 's1', 'alice', 3, 'back\slash', '{"score": "abc", "flag": true}', 0, '2026-01-02T00:00:00Z'),
     ('m4___________________', 'w1', 's1', 'carol', 10, 'x', '{"score": 12.5, "flag": "true"}', 100, '2026-02-01T00:00:00Z'),
     ('m5___________________', 'w1', 's1', 'alice', 20, 'y', '{}', 7, '2026-03-01T00:00:00Z'),
     ('m6___________________', 'w1', 's1', 'dave', 9007199254740993, 'z', '{"score": "1e3"}', 1, '2026-04-01T00:00:00Z')"#,
    r#"INSERT INTO conclusions (id, workspace_name, observer, observed, session_name, content,
     level, times_derived, metadata, created_at) VALUES
     ('c1___________________', 'w1', 'alice', 'bob', 's1', 'c1', 'deductive', 3, '{"importance": "high"}', '2026-01-05T00:00:00Z'),
     ('c2___________________', 'w1', 'alice', 'bob', NULL, 'c2', 'inductive', 1, '{}', '2025-06-01T00:00:00Z'),
     ('c3___________________', 'w1', 'bob', 'alice', 's2', 'c3', 'explicit', 5, '{"importance": "high"}', '2026-02-01T00:00:00Z')"#,
];

/// A fresh database from the harness's migrated template, holding [`ROWS`].
async fn fixture() -> TestApp {
    let app = TestApp::new().await;
    for sql in ROWS {
        app.store
            .db()
            .execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    }
    app
}

/// The table and the column a resource's `id` key names.
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
async fn ids(db: &DatabaseConnection, r: Resource, filter: &Filter) -> Result<Vec<String>, String> {
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
    let rows = db.query_all(&q).await.map_err(|e| e.to_string())?;
    rows.iter()
        .map(|row| {
            row.try_get::<String>("", "id")
                .map(|id| short_id(&id))
                .map_err(|e| e.to_string())
        })
        .collect()
}

async fn check(db: &DatabaseConnection, r: Resource, j: Value, want: &[&str]) {
    let f = parse(r, &j).unwrap_or_else(|e| panic!("{j}: {e}"));
    let got = ids(db, r, &f).await.unwrap_or_else(|e| panic!("{j}: {e}"));
    assert_eq!(got, want, "{r:?} {j}");
}

#[tokio::test]
async fn filters_select_the_right_rows() {
    let app = fixture().await;
    let db = app.store.db();
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
        (
            json!({"id": [long_id("m1"), long_id("m3")]}),
            vec!["m1", "m3"],
        ),
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
        check(db, Message, j, &want).await;
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
        check(db, Conclusion, j, &want).await;
    }

    // Every session that exists is active.
    check(db, Session, json!({"isActive": false}), &[]).await;
    check(db, Session, json!({"is_active": {"ne": true}}), &[]).await;
    check(db, Session, json!({"isActive": true}), &["s1", "s2"]).await;
    check(db, Session, json!({"isActive": {"in": [false, null]}}), &[]).await;
    check(db, Peer, json!({"id": {"icontains": "AL"}}), &["alice"]).await;
    check(db, Workspace, json!({"metadata": {"plan": "pro"}}), &["w1"]).await;
    check(db, Workspace, json!({}), &["w1", "w2"]).await;
}

/// The condition used the SeaORM way, on the server's own entity.
#[tokio::test]
async fn condition_works_in_seaorm_find_filter() {
    use honcho_graphql::entity::message;
    let app = fixture().await;
    let f = parse(
        Message,
        &json!({"peer_id": "alice", "seq_in_session": {"gte": 1, "lte": 100}}),
    )
    .unwrap();
    let rows = message::Entity::find()
        .filter(f.condition("messages"))
        .order_by_asc(message::Column::SeqInSession)
        .all(app.store.db())
        .await
        .expect("query");
    let got: Vec<(String, i64)> = rows
        .iter()
        .map(|m| (short_id(&m.public_id), m.seq_in_session))
        .collect();
    assert_eq!(got, [("m1".into(), 1), ("m3".into(), 3), ("m5".into(), 20)]);
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

/// Any JSON leaf, or a short list or object of them: operands a column may well refuse.
fn odd_leaf() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |x| serde_json::Number::from_f64(x)
            .map(Value::Number)),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// A value for a column of this kind: scalar, list, or operator dict; with `odd`, a fifth of the
/// scalars are [`odd_leaf`]s instead.
fn valid_value(kind: Kind, odd: bool) -> BoxedStrategy<Value> {
    let scalar = match kind {
        Kind::Text | Kind::LongText => texts(),
        Kind::Int => ints(),
        Kind::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Kind::DateTime => datetimes(),
        Kind::Level => pick(&["explicit", "DEDUCTIVE", "inductive", "Contradiction"]),
        Kind::Metadata => return valid_metadata(),
    };
    let scalar = match odd {
        true => prop_oneof![4 => scalar, 1 => odd_leaf()].boxed(),
        false => scalar,
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

/// A filter for `r` built from its real keys (every one of them, as the server lists them) and
/// valid operands (`odd`: some odd ones), nested with AND/OR/NOT.
fn random_filter(r: Resource, odd: bool) -> BoxedStrategy<Value> {
    let fields = r.fields();
    let entry = prop::sample::select(fields.to_vec()).prop_flat_map(move |f| {
        let name = if f.camel == f.snake { f.camel } else { f.snake };
        let spelling = prop::sample::select(vec![f.camel, name]);
        (spelling, valid_value(f.kind, odd))
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

/// Runs 1000 random filters of every resource; how many executed and how many `parse` refused
/// (each refusal is passed to `refused`). Every accepted filter must execute.
async fn run_random(
    db: &DatabaseConnection,
    odd: bool,
    refused: impl Fn(&FilterErrorKind) -> bool,
) -> (usize, usize) {
    let mut runner = TestRunner::deterministic();
    let strategy = prop::sample::select(Resource::ALL.to_vec())
        .prop_flat_map(move |r| (Just(r), random_filter(r, odd)));
    let (mut executed, mut refusals) = (0, 0);
    for _ in 0..1000 {
        let (r, j) = strategy.new_tree(&mut runner).expect("tree").current();
        let f = match parse(r, &j) {
            Ok(f) => f,
            Err(e) => {
                assert!(refused(&e.kind), "{r:?} {j}: {e}");
                refusals += 1;
                continue;
            }
        };
        if let Err(e) = ids(db, r, &f).await {
            panic!("{r:?} {j} failed in PostgreSQL: {e}\ntree: {:?}", f.tree());
        }
        executed += 1;
    }
    (executed, refusals)
}

#[tokio::test]
async fn random_accepted_filters_always_execute() {
    let app = fixture().await;
    // Only operand values the generator cannot know are invalid may be refused.
    let (executed, refused) = run_random(app.store.db(), false, |kind| {
        matches!(kind, FilterErrorKind::InvalidValue { .. })
    })
    .await;
    eprintln!("random valid filters: executed {executed}, refused {refused}");
    assert!(executed > 900, "executed {executed}, refused {refused}");
}

#[tokio::test]
async fn random_filters_with_odd_operands_execute_when_accepted() {
    let app = fixture().await;
    let (executed, refused) = run_random(app.store.db(), true, |_| true).await;
    eprintln!("random filters with odd operands: executed {executed}, refused {refused}");
    assert!(
        executed > 100 && refused > 50,
        "executed {executed}, refused {refused}"
    );
}
