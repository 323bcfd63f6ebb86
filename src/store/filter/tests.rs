//! Both directions of the filter DSL: JSON → tree (accepted shapes and every error, with its
//! path), tree → SQL (rendered and built with bound values), and a property test that no JSON
//! input panics. `tests/it/filter_sql.rs` runs the SQL on the migrated schema.

use super::*;
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use sea_orm::sea_query::{Alias, Asterisk, PostgresQueryBuilder, Query, Value as SqlValue};
use serde_json::{Value, json};

use Resource::{Conclusion, Message, Peer, Session, Workspace};

fn tree(r: Resource, j: Value) -> Node {
    match parse(r, &j) {
        Ok(f) => f.tree().clone(),
        Err(e) => panic!("{j} was refused: {e}"),
    }
}

fn error(r: Resource, j: Value) -> FilterError {
    match parse(r, &j) {
        Ok(f) => panic!("{j} was accepted as {:?}", f.tree()),
        Err(e) => e,
    }
}

fn select(f: &Filter) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(Asterisk)
        .from(Alias::new("messages"))
        .cond_where(f.condition("messages"))
        .to_owned()
}

/// The WHERE clause as `to_string` renders it (values inlined, for reading).
fn sql(r: Resource, j: Value) -> String {
    let f = parse(r, &j).unwrap();
    let s = select(&f).to_string(PostgresQueryBuilder);
    s.strip_prefix(r#"SELECT * FROM "messages" WHERE "#)
        .unwrap_or_else(|| panic!("no WHERE in {s}"))
        .to_owned()
}

/// The WHERE clause with `$n` placeholders, and the bound values.
fn built(r: Resource, j: Value) -> (String, Vec<SqlValue>) {
    let f = parse(r, &j).unwrap();
    let (s, values) = select(&f).build(PostgresQueryBuilder);
    let w = s
        .strip_prefix(r#"SELECT * FROM "messages" WHERE "#)
        .unwrap_or_else(|| panic!("no WHERE in {s}"))
        .to_owned();
    (w, values.0)
}

/// What [`built`] gives for a WHERE clause that binds one integer.
fn one_int(clause: &str, n: i64) -> (String, Vec<SqlValue>) {
    (clause.to_owned(), vec![SqlValue::BigInt(Some(n))])
}

fn cmp(column: &'static str, op: CmpOp, value: Scalar) -> Node {
    Node::Compare { column, op, value }
}
fn text(s: &str) -> Scalar {
    Scalar::Text(s.to_owned())
}
fn int(column: &'static str, op: CmpOp, v: i64) -> Node {
    cmp(column, op, Scalar::Int(v))
}
fn contains(column: &'static str, v: Value) -> Node {
    Node::JsonContains { column, value: v }
}
fn key(k: &str, test: KeyTest) -> Node {
    Node::JsonKey {
        column: "metadata",
        key: k.to_owned(),
        test,
    }
}
fn nest(levels: usize, inner: Value) -> Value {
    (0..levels).fold(inner, |acc, _| json!({"AND": [acc]}))
}

// ---------------------------------------------------------------- docs/filters.md's examples

#[test]
fn seed_seq_in_session_range() {
    let j = json!({"seq_in_session": {"gte": 10, "lte": 20}});
    assert_eq!(
        tree(Message, j.clone()),
        Node::And(vec![
            int("seq_in_session", CmpOp::Gte, 10),
            int("seq_in_session", CmpOp::Lte, 20)
        ])
    );
    assert_eq!(
        sql(Message, j.clone()),
        r#""messages"."seq_in_session" >= 10 AND "messages"."seq_in_session" <= 20"#
    );
    assert_eq!(
        built(Message, j),
        (
            r#""messages"."seq_in_session" >= $1 AND "messages"."seq_in_session" <= $2"#.into(),
            vec![SqlValue::BigInt(Some(10)), SqlValue::BigInt(Some(20))]
        )
    );
}

#[test]
fn seed_seq_in_session_gt_and_equality() {
    assert_eq!(
        built(Message, json!({"seq_in_session": {"gt": 50}})),
        one_int(r#""messages"."seq_in_session" > $1"#, 50)
    );
    assert_eq!(
        built(Message, json!({"seq_in_session": 15})),
        one_int(r#""messages"."seq_in_session" = $1"#, 15)
    );
    // camelCase is the same filter.
    assert_eq!(
        tree(Message, json!({"seqInSession": 15})),
        tree(Message, json!({"seq_in_session": 15}))
    );
}

#[test]
fn seed_peer_and_range() {
    let j = json!({"peer_id": "alice", "seq_in_session": {"gte": 1, "lte": 100}});
    assert_eq!(
        tree(Message, j.clone()),
        Node::And(vec![
            cmp("peer_name", CmpOp::Eq, text("alice")),
            int("seq_in_session", CmpOp::Gte, 1),
            int("seq_in_session", CmpOp::Lte, 100),
        ])
    );
    assert_eq!(
        built(Message, j),
        (
            r#""messages"."peer_name" = $1 AND "messages"."seq_in_session" >= $2 AND "messages"."seq_in_session" <= $3"#.into(),
            vec![
                SqlValue::String(Some("alice".into())),
                SqlValue::BigInt(Some(1)),
                SqlValue::BigInt(Some(100))
            ]
        )
    );
}

#[test]
fn seed_explicit_and() {
    let j = json!({"AND": [{"peer_id": "alice"}, {"seq_in_session": {"gte": 10}}]});
    assert_eq!(
        tree(Message, j.clone()),
        Node::And(vec![
            cmp("peer_name", CmpOp::Eq, text("alice")),
            int("seq_in_session", CmpOp::Gte, 10),
        ])
    );
    assert_eq!(
        sql(Message, j),
        r#""messages"."peer_name" = 'alice' AND "messages"."seq_in_session" >= 10"#
    );
}

#[test]
fn seed_conclusion_compound() {
    let j = json!({"AND": [
        {"observer_id": "alice"},
        {"level": {"in": ["deductive", "inductive"]}},
        {"metadata": {"importance": "high"}}
    ]});
    assert_eq!(
        tree(Conclusion, j.clone()),
        Node::And(vec![
            cmp("observer", CmpOp::Eq, text("alice")),
            Node::In {
                column: "level",
                values: vec![text("deductive"), text("inductive")]
            },
            contains("metadata", json!({"importance": "high"})),
        ])
    );
    assert_eq!(
        built(Conclusion, j),
        (
            r#""messages"."observer" = $1 AND "messages"."level" IN ($2, $3) AND "messages"."metadata" @> $4"#.into(),
            vec![
                SqlValue::String(Some("alice".into())),
                SqlValue::String(Some("deductive".into())),
                SqlValue::String(Some("inductive".into())),
                SqlValue::Json(Some(Box::new(json!({"importance": "high"})))),
            ]
        )
    );
}

#[test]
fn seed_conclusion_created_at_and_times_derived() {
    let midnight = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    assert_eq!(
        built(Conclusion, json!({"created_at": {"gte": "2026-01-01"}})),
        (
            r#""messages"."created_at" >= $1"#.into(),
            vec![SqlValue::ChronoDateTimeUtc(Some(midnight))]
        )
    );
    assert_eq!(
        sql(Conclusion, json!({"createdAt": {"gte": "2026-01-01"}})),
        r#""messages"."created_at" >= '2026-01-01 00:00:00.000000 +00:00'"#
    );
    assert_eq!(
        built(Conclusion, json!({"times_derived": {"gte": 3}})),
        one_int(r#""messages"."times_derived" >= $1"#, 3)
    );
    assert_eq!(
        tree(Conclusion, json!({"level": "deductive"})),
        tree(Conclusion, json!({"level": "DEDUCTIVE"}))
    );
    assert_eq!(
        tree(Conclusion, json!({"metadata": {"category": "preference"}})),
        contains("metadata", json!({"category": "preference"}))
    );
}

// ------------------------------------------------------------------------- grammar and logic

#[test]
fn empty_filters_match_everything() {
    for j in [json!(null), json!({})] {
        let f = parse(Message, &j).unwrap();
        assert!(f.is_empty());
        assert!(!f.matches_nothing());
        assert!(f.condition("m").is_empty());
    }
    assert!(Filter::all(Peer).is_empty());
    assert_eq!(parse(Peer, &json!(null)).unwrap().resource(), Peer);
}

#[test]
fn logical_operators() {
    let a = || cmp("peer_name", CmpOp::Eq, text("a"));
    let b = || cmp("peer_name", CmpOp::Eq, text("b"));
    assert_eq!(
        tree(Message, json!({"OR": [{"peerId": "a"}, {"peerId": "b"}]})),
        Node::Or(vec![a(), b()])
    );
    assert_eq!(
        tree(Message, json!({"NOT": [{"peerId": "a"}, {"peerId": "b"}]})),
        Node::And(vec![Node::not(a()), Node::not(b())])
    );
    assert_eq!(
        sql(Message, json!({"NOT": [{"peerId": "a"}, {"peerId": "b"}]})),
        r#"(("messages"."peer_name" = 'a') IS NOT TRUE) AND (("messages"."peer_name" = 'b') IS NOT TRUE)"#
    );
    assert_eq!(
        sql(
            Message,
            json!({"OR": [{"peerId": "a"}, {"AND": [{"peerId": "b"}, {"seqInSession": 2}]}]})
        ),
        r#""messages"."peer_name" = 'a' OR ("messages"."peer_name" = 'b' AND "messages"."seq_in_session" = 2)"#
    );
    assert_eq!(
        sql(
            Message,
            json!({"seqInSession": 1, "OR": [{"peerId": "a"}, {"peerId": "b"}]})
        ),
        r#"("messages"."peer_name" = 'a' OR "messages"."peer_name" = 'b') AND "messages"."seq_in_session" = 1"#
    );
    // NOT of an OR negates the whole disjunction, NULL-safe.
    assert_eq!(
        sql(
            Message,
            json!({"NOT": [{"OR": [{"peerId": "a"}, {"peerId": "b"}]}]})
        ),
        r#"("messages"."peer_name" = 'a' OR "messages"."peer_name" = 'b') IS NOT TRUE"#
    );
    // Logical keys are case-sensitive, as in Honcho v3.0.12.
    assert!(matches!(
        error(Message, json!({"and": []})).kind,
        FilterErrorKind::UnknownKey { .. }
    ));
}

#[test]
fn wildcards_and_empty_lists() {
    let alice = cmp("peer_name", CmpOp::Eq, text("alice"));
    assert_eq!(tree(Message, json!({"peerId": "*"})), Node::True);
    assert_eq!(tree(Message, json!({"seqInSession": "*"})), Node::True);
    assert_eq!(
        tree(Message, json!({"createdAt": {"gte": "*"}})),
        Node::True
    );
    assert_eq!(tree(Message, json!({"peerId": ["a", "*"]})), Node::True);
    assert_eq!(tree(Message, json!({"peerId": {"in": ["*"]}})), Node::True);
    // Decided against Honcho v3.0.12, which drops the branch: a wildcard branch makes the OR match everything.
    assert_eq!(
        tree(
            Message,
            json!({"OR": [{"peer_id": "*"}, {"peer_id": "alice"}]})
        ),
        Node::True
    );
    assert_eq!(
        tree(Message, json!({"OR": [{}, {"peer_id": "alice"}]})),
        Node::True
    );
    // Inside AND the wildcard is just dropped.
    assert_eq!(
        tree(
            Message,
            json!({"AND": [{"peer_id": "*"}, {"peer_id": "alice"}]})
        ),
        alice
    );
    // NOT of "everything" is "nothing".
    assert_eq!(
        tree(Message, json!({"NOT": [{"peer_id": "*"}]})),
        Node::False
    );
    // Empty lists add no condition (as in Honcho v3.0.12).
    for op in ["AND", "OR", "NOT"] {
        assert_eq!(tree(Message, json!({op: []})), Node::True, "{op}");
    }
    // An OR whose branches all match nothing matches nothing.
    assert_eq!(
        tree(
            Message,
            json!({"OR": [{"peerId": []}, {"peerId": {"in": []}}]})
        ),
        Node::False
    );
    let f = parse(Message, &json!({"peerId": {"in": []}})).unwrap();
    assert!(f.matches_nothing());
    assert_eq!(sql(Message, json!({"peerId": []})), "FALSE");
    assert_eq!(
        sql(Message, json!({"NOT": [{"peerId": []}], "seqInSession": 1})),
        r#""messages"."seq_in_session" = 1"#
    );
}

#[test]
fn depth_limit() {
    let leaf = json!({"peerId": "a"});
    assert_eq!(
        tree(Message, nest(MAX_DEPTH, leaf.clone())),
        cmp("peer_name", CmpOp::Eq, text("a"))
    );
    let e = error(Message, nest(MAX_DEPTH + 1, leaf));
    assert_eq!(e.kind, FilterErrorKind::TooDeep { max: 5 });
    assert_eq!(e.path, format!("filters{}", ".AND[0]".repeat(6)));
    assert_eq!(
        e.to_string(),
        "filters.AND[0].AND[0].AND[0].AND[0].AND[0].AND[0]: filter nesting exceeds maximum depth of 5"
    );
    // OR and NOT count too; empty objects at depth 6 are still too deep.
    let mixed = json!({"OR": [{"NOT": [{"AND": [{"OR": [{"NOT": [{"AND": [{}]}]}]}]}]}]});
    assert_eq!(
        error(Message, mixed).path,
        "filters.OR[0].NOT[0].AND[0].OR[0].NOT[0].AND[0]"
    );
}

// ----------------------------------------------------------------------- real-column values

#[test]
fn nulls_lists_and_ne() {
    assert_eq!(
        tree(Conclusion, json!({"sessionId": null})),
        Node::IsNull("session_name")
    );
    assert_eq!(
        tree(Conclusion, json!({"session_id": {"ne": null}})),
        Node::IsNotNull("session_name")
    );
    assert_eq!(
        tree(Message, json!({"peerId": ["a", "b"]})),
        tree(Message, json!({"peerId": {"in": ["a", "b"]}}))
    );
    assert_eq!(
        tree(Conclusion, json!({"sessionId": ["s1", null]})),
        Node::Or(vec![
            Node::In {
                column: "session_name",
                values: vec![text("s1")]
            },
            Node::IsNull("session_name")
        ])
    );
    assert_eq!(
        sql(Conclusion, json!({"sessionId": {"ne": "s1"}})),
        r#""messages"."session_name" IS DISTINCT FROM 's1'"#
    );
    assert_eq!(
        built(Message, json!({"seqInSession": {"ne": 3}})),
        one_int(r#""messages"."seq_in_session" IS DISTINCT FROM $1"#, 3)
    );
    assert_eq!(
        sql(Message, json!({"id": ["m1", "m2"]})),
        r#""messages"."public_id" IN ('m1', 'm2')"#
    );
}

#[test]
fn integers_compare_exactly() {
    let seq = |op, v| int("seq_in_session", op, v);
    let t = |j| tree(Message, j);
    assert_eq!(t(json!({"seqInSession": {"gt": 5.5}})), seq(CmpOp::Gt, 5));
    assert_eq!(t(json!({"seqInSession": {"gte": 5.5}})), seq(CmpOp::Gte, 6));
    assert_eq!(t(json!({"seqInSession": {"lt": 5.5}})), seq(CmpOp::Lt, 6));
    assert_eq!(t(json!({"seqInSession": {"lte": 5.5}})), seq(CmpOp::Lte, 5));
    assert_eq!(t(json!({"seqInSession": {"gt": -5.5}})), seq(CmpOp::Gt, -6));
    assert_eq!(
        t(json!({"seqInSession": {"gte": -5.5}})),
        seq(CmpOp::Gte, -5)
    );
    assert_eq!(t(json!({"seqInSession": 5.5})), Node::False);
    assert_eq!(t(json!({"seqInSession": {"ne": 5.5}})), Node::True);
    assert_eq!(t(json!({"seqInSession": 10.0})), seq(CmpOp::Eq, 10));
    assert_eq!(t(json!({"seqInSession": "10"})), seq(CmpOp::Eq, 10));
    assert_eq!(
        t(json!({"seqInSession": {"gte": " 7 "}})),
        seq(CmpOp::Gte, 7)
    );
    // Above 2^53 a float would be off by one; integers stay exact.
    assert_eq!(
        t(json!({"seqInSession": 9_007_199_254_740_993_i64})),
        seq(CmpOp::Eq, 9_007_199_254_740_993)
    );
    assert_eq!(
        t(json!({"seqInSession": "9007199254740993"})),
        seq(CmpOp::Eq, 9_007_199_254_740_993)
    );
    // Beyond i64: constants, never an overflow.
    assert_eq!(t(json!({"seqInSession": {"gt": 1e30}})), Node::False);
    assert_eq!(
        t(json!({"seqInSession": {"lt": 1e30}})),
        Node::IsNotNull("seq_in_session")
    );
    assert_eq!(
        t(json!({"seqInSession": {"gt": -1e30}})),
        Node::IsNotNull("seq_in_session")
    );
    assert_eq!(
        t(json!({"seqInSession": {"lte": u64::MAX}})),
        Node::IsNotNull("seq_in_session")
    );
    assert_eq!(t(json!({"seqInSession": u64::MAX})), Node::False);
    // `in` keeps only the values an integer can equal.
    assert_eq!(
        t(json!({"seqInSession": [1, 2.5, "3", 1e30]})),
        Node::In {
            column: "seq_in_session",
            values: vec![Scalar::Int(1), Scalar::Int(3)]
        }
    );
    assert_eq!(t(json!({"seqInSession": [2.5]})), Node::False);
    assert_eq!(
        tree(Message, json!({"token_count": {"gte": 3, "lt": 10.5}})),
        Node::And(vec![
            int("token_count", CmpOp::Gte, 3),
            int("token_count", CmpOp::Lt, 11)
        ])
    );
}

#[test]
fn text_bool_datetime_level_values() {
    assert_eq!(
        tree(Session, json!({"isActive": false})),
        cmp("TRUE", CmpOp::Eq, Scalar::Bool(false))
    );
    assert_eq!(
        tree(Session, json!({"is_active": {"ne": true}})),
        cmp("TRUE", CmpOp::Ne, Scalar::Bool(true))
    );
    assert_eq!(
        built(Session, json!({"isActive": [true]})),
        ("(TRUE) IN ($1)".into(), vec![SqlValue::Bool(Some(true))])
    );
    let eight = Utc.with_ymd_and_hms(2026, 1, 1, 8, 0, 0).unwrap();
    assert_eq!(
        tree(
            Peer,
            json!({"createdAt": {"lt": "2026-01-01T10:00:00+02:00"}})
        ),
        cmp("created_at", CmpOp::Lt, Scalar::DateTime(eight))
    );
    assert_eq!(
        tree(Workspace, json!({"created_at": "2026-01-01 08:00:00"})),
        cmp("created_at", CmpOp::Eq, Scalar::DateTime(eight))
    );
    assert_eq!(
        tree(Conclusion, json!({"level": ["EXPLICIT", "contradiction"]})),
        Node::In {
            column: "level",
            values: vec![text("explicit"), text("contradiction")]
        }
    );
    assert_eq!(
        tree(Conclusion, json!({"level": {"ne": "Inductive"}})),
        cmp("level", CmpOp::Ne, text("inductive"))
    );
    assert_eq!(
        tree(Workspace, json!({"id": {"gte": "b", "lt": "c"}})),
        Node::And(vec![
            cmp("name", CmpOp::Gte, text("b")),
            cmp("name", CmpOp::Lt, text("c"))
        ])
    );
    assert_eq!(
        tree(Peer, json!({"workspace_id": "w"})),
        cmp("workspace_name", CmpOp::Eq, text("w"))
    );
}

#[test]
fn contains_is_case_insensitive_and_escaped() {
    let j = json!({"content": {"contains": "50%_off\\now"}});
    assert_eq!(
        tree(Message, j.clone()),
        Node::ILike {
            column: "content",
            needle: "50%_off\\now".into()
        }
    );
    assert_eq!(
        built(Message, j),
        (
            r#""messages"."content" ILIKE $1"#.into(),
            vec![SqlValue::String(Some(r"%50\%\_off\\now%".into()))]
        )
    );
    assert_eq!(
        tree(Message, json!({"content": {"icontains": "Hi"}})),
        tree(Message, json!({"content": {"contains": "Hi"}}))
    );
    assert_eq!(
        sql(Peer, json!({"id": {"icontains": "Al"}})),
        r#""messages"."name" ILIKE '%Al%'"#
    );
    assert_eq!(
        tree(Message, json!({"content": {"ne": "x", "in": ["y"]}})),
        Node::And(vec![
            Node::In {
                column: "content",
                values: vec![text("y")]
            },
            cmp("content", CmpOp::Ne, text("x")),
        ])
    );
}

// ------------------------------------------------------------------------- nested metadata

#[test]
fn metadata_plain_values_are_json_containment() {
    let t = |j| tree(Message, json!({ "metadata": j }));
    assert_eq!(t(json!({"n": 5})), contains("metadata", json!({"n": 5})));
    // JSON-typed: 5 and "5" are different filters.
    assert_ne!(t(json!({"n": 5})), t(json!({"n": "5"})));
    assert_eq!(
        t(json!({"a": 1, "b": true})),
        Node::And(vec![
            contains("metadata", json!({"a": 1})),
            contains("metadata", json!({"b": true}))
        ])
    );
    // Nested objects: partial containment; deeper operator dicts are literal values.
    assert_eq!(
        t(json!({"a": {"b": 1}})),
        contains("metadata", json!({"a": {"b": 1}}))
    );
    assert_eq!(
        t(json!({"a": {"b": {"gt": 1}}})),
        contains("metadata", json!({"a": {"b": {"gt": 1}}}))
    );
    assert_eq!(
        t(json!({"tags": ["x"]})),
        contains("metadata", json!({"tags": ["x"]}))
    );
    assert_eq!(
        t(json!({"k": null})),
        contains("metadata", json!({"k": null}))
    );
    // Key names are free-form, not case-converted.
    assert_eq!(
        t(json!({"Some Key.x": 1})),
        contains("metadata", json!({"Some Key.x": 1}))
    );
    assert_eq!(t(json!({"k": "*"})), Node::True);
    assert_eq!(t(json!({})), Node::True);
    assert_eq!(t(json!([1])), contains("metadata", json!([1])));
    assert_eq!(
        tree(Message, json!({"metadata": null})),
        Node::IsNull("metadata")
    );
    assert_eq!(
        sql(Message, json!({"metadata": {"importance": "high"}})),
        r#""messages"."metadata" @> '{"importance":"high"}'"#
    );
}

#[test]
fn metadata_key_operators() {
    let t = |j| tree(Message, json!({ "metadata": { "k": j } }));
    let num = |op, v: &str| {
        key(
            "k",
            KeyTest::Numeric {
                op,
                value: v.into(),
            },
        )
    };
    let txt = |op, v: &str| {
        key(
            "k",
            KeyTest::Text {
                op,
                value: v.into(),
            },
        )
    };
    assert_eq!(t(json!({"gt": 3})), num(CmpOp::Gt, "3"));
    assert_eq!(t(json!({"gte": 2.5})), num(CmpOp::Gte, "2.5"));
    assert_eq!(t(json!({"lt": "10"})), num(CmpOp::Lt, "10"));
    assert_eq!(t(json!({"lte": " 1e3 "})), num(CmpOp::Lte, "1e3"));
    assert_eq!(t(json!({"ne": 4})), num(CmpOp::Ne, "4"));
    assert_eq!(t(json!({"gt": "abc"})), txt(CmpOp::Gt, "abc"));
    assert_eq!(t(json!({"ne": "x"})), txt(CmpOp::Ne, "x"));
    assert_eq!(t(json!({"ne": true})), txt(CmpOp::Ne, "true"));
    assert_eq!(t(json!({"ne": null})), key("k", KeyTest::NotNull));
    assert_eq!(
        t(json!({"contains": "Ab"})),
        key(
            "k",
            KeyTest::ILike {
                needle: "Ab".into()
            }
        )
    );
    assert_eq!(t(json!({"gt": "*"})), Node::True);
    // `in` compares JSON values: true matches true, 5 matches 5 (Honcho v3.0.12 compares text).
    assert_eq!(
        t(json!({"in": [5, true, "x"]})),
        Node::Or(vec![
            contains("metadata", json!({"k": 5})),
            contains("metadata", json!({"k": true})),
            contains("metadata", json!({"k": "x"})),
        ])
    );
    assert_eq!(t(json!({"in": [5]})), contains("metadata", json!({"k": 5})));
    assert_eq!(t(json!({"in": []})), Node::False);
    assert_eq!(t(json!({"in": [1, "*"]})), Node::True);
    assert_eq!(
        t(json!({"gte": 1, "lte": 9})),
        Node::And(vec![num(CmpOp::Gte, "1"), num(CmpOp::Lte, "9")])
    );
}

#[test]
fn metadata_key_operators_sql() {
    let (w, v) = built(Message, json!({"metadata": {"score": {"gt": 4}}}));
    assert_eq!(
        w,
        r#"(CASE WHEN length("messages"."metadata" ->> $1) <= 1000 AND ("messages"."metadata" ->> $2) ~ '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$' THEN CAST(("messages"."metadata" ->> $3) AS numeric) END) > (CAST($4 AS numeric))"#
    );
    assert_eq!(
        v,
        vec![
            SqlValue::String(Some("score".into())),
            SqlValue::String(Some("score".into())),
            SqlValue::String(Some("score".into())),
            SqlValue::String(Some("4".into())),
        ]
    );
    assert_eq!(
        built(Message, json!({"metadata": {"k": {"ne": "x"}}})),
        (
            r#"("messages"."metadata" ->> $1) <> $2"#.into(),
            vec![
                SqlValue::String(Some("k".into())),
                SqlValue::String(Some("x".into()))
            ]
        )
    );
    assert_eq!(
        sql(Message, json!({"metadata": {"k": {"icontains": "a_b"}}})),
        r#"("messages"."metadata" ->> 'k') ILIKE E'%a\\_b%'"#
    );
    assert_eq!(
        sql(Message, json!({"metadata": {"k": {"ne": null}}})),
        r#"("messages"."metadata" ->> 'k') IS NOT NULL"#
    );
    assert_eq!(
        sql(Message, json!({"metadata": {"k": {"in": [5, true]}}})),
        r#""messages"."metadata" @> '{"k":5}' OR "messages"."metadata" @> '{"k":true}'"#
    );
    // Operand keys with quotes are bound, never spliced into the SQL text.
    let (w, v) = built(Message, json!({"metadata": {"x') OR 1=1 --": {"gt": "y"}}}));
    assert!(!w.contains("OR 1=1"), "{w}");
    assert_eq!(v[0], SqlValue::String(Some("x') OR 1=1 --".into())));
}

/// `eq` is the bare value spelled as an operator (the typed `where` writes it so, beside other
/// operators); `eq: null` is the bare `null`.
#[test]
fn eq_is_the_bare_value() {
    for (field, value) in [
        ("peerId", json!("alice")),
        ("seqInSession", json!(7)),
        ("seqInSession", json!("7")),
        ("seqInSession", json!(2.5)),
        ("createdAt", json!("2026-01-01")),
        ("content", json!("hi")),
        ("sessionId", json!(null)),
        ("peerId", json!("*")),
    ] {
        assert_eq!(
            tree(Message, json!({ field: {"eq": value} })),
            tree(Message, json!({ field: value })),
            "{field}: {value}"
        );
    }
    assert_eq!(
        tree(Message, json!({"seqInSession": {"eq": 3, "lt": 9}})),
        Node::And(vec![
            int("seq_in_session", CmpOp::Eq, 3),
            int("seq_in_session", CmpOp::Lt, 9)
        ])
    );
    assert_eq!(
        tree(Conclusion, json!({"level": {"eq": "DEDUCTIVE"}})),
        tree(Conclusion, json!({"level": "deductive"}))
    );
    assert_eq!(
        tree(Session, json!({"isActive": {"eq": false}})),
        tree(Session, json!({"isActive": false}))
    );
    // On a metadata key: containment, like the plain value; on the whole value only null.
    assert_eq!(
        tree(
            Message,
            json!({"metadata": {"topic": {"eq": {"a": 1}}, "n": {"eq": 5}}})
        ),
        tree(Message, json!({"metadata": {"topic": {"a": 1}, "n": 5}}))
    );
    assert_eq!(
        tree(Message, json!({"metadata": {"eq": null}})),
        Node::IsNull("metadata")
    );
    assert_eq!(
        error(Message, json!({"metadata": {"eq": {"a": 1}}})).path,
        "filters.metadata.eq"
    );
    assert_eq!(
        error(Message, json!({"peerId": {"eq": ["a"]}})).path,
        "filters.peerId.eq"
    );
}

#[test]
fn operators_on_the_whole_metadata_value() {
    assert_eq!(
        tree(Conclusion, json!({"metadata": {"contains": {"a": 1}}})),
        contains("metadata", json!({"a": 1}))
    );
    assert_eq!(
        tree(Conclusion, json!({"metadata": {"contains": [1]}})),
        contains("metadata", json!([1]))
    );
    assert_eq!(
        tree(Conclusion, json!({"metadata": {"ne": null}})),
        Node::IsNotNull("metadata")
    );
    assert_eq!(
        tree(Conclusion, json!({"metadata": {"contains": "*"}})),
        Node::True
    );
}

// ---------------------------------------------------------------------------------- errors

/// (resource, filter, error path, message fragment)
#[rustfmt::skip]
fn error_cases() -> Vec<(Resource, Value, &'static str, &'static str)> {
    vec![
        // Not an object.
        (Message, json!(5), "filters", "a filter must be a JSON object, got 5"),
        (Message, json!([{"peerId": "a"}]), "filters", "must be a JSON object"),
        (Message, json!("peerId"), "filters", "must be a JSON object"),
        (Message, json!(true), "filters", "must be a JSON object"),
        // Unknown and internal keys.
        (Message, json!({"foo": 1}), "filters.foo", "unknown filter key \"foo\"; allowed keys: AND, OR, NOT, id, workspaceId, sessionId, peerId, seqInSession, content, tokenCount, createdAt, metadata"),
        (Message, json!({"embedding": [0.1]}), "filters.embedding", "unknown filter key"),
        (Message, json!({"internal_metadata": {}}), "filters.internal_metadata", "unknown filter key"),
        (Message, json!({"content_tsv": "x"}), "filters.content_tsv", "unknown filter key"),
        (Message, json!({"public_id": "x"}), "filters.public_id", "unknown filter key"),
        (Conclusion, json!({"deleted_at": null}), "filters.deleted_at", "unknown filter key"),
        (Conclusion, json!({"content": "x"}), "filters.content", "unknown filter key"),
        (Conclusion, json!({"source_ids": ["a"]}), "filters.source_ids", "unknown filter key"),
        (Conclusion, json!({"session_name": "s"}), "filters.session_name", "unknown filter key"),
        (Workspace, json!({"configuration": {}}), "filters.configuration", "allowed keys: AND, OR, NOT, id, createdAt, metadata"),
        (Workspace, json!({"workspaceId": "w"}), "filters.workspaceId", "unknown filter key"),
        (Peer, json!({"isActive": true}), "filters.isActive", "unknown filter key"),
        (Session, json!({"peer_id": "p"}), "filters.peer_id", "unknown filter key"),
        (Message, json!({"level": "explicit"}), "filters.level", "unknown filter key"),
        (Message, json!({"AND": [{"OR": [{"nope": 1}]}]}), "filters.AND[0].OR[0].nope", "unknown filter key"),
        (Message, json!({"metadata": {"a": 1}, "a b": 1}), "filters[\"a b\"]", "unknown filter key"),
        (Message, json!({"a\nb": 1}), "filters[\"a\\nb\"]", "unknown filter key \"a\\nb\"; allowed"),
        // Logical operands.
        (Message, json!({"AND": {"peerId": "a"}}), "filters.AND", "AND takes a list of filter objects, got {\"peerId\":\"a\"}"),
        (Message, json!({"OR": "x"}), "filters.OR", "OR takes a list"),
        (Message, json!({"NOT": null}), "filters.NOT", "NOT takes a list of filter objects, got null"),
        (Message, json!({"NOT": {}}), "filters.NOT", "NOT takes a list"),
        (Message, json!({"OR": [{"peerId": "a"}, 1]}), "filters.OR[1]", "must be a JSON object, got 1"),
        (Message, json!({"AND": [[]]}), "filters.AND[0]", "must be a JSON object"),
        // Operators.
        (Message, json!({"seqInSession": {"gtx": 1}}), "filters.seqInSession.gtx", "unknown operator \"gtx\""),
        (Message, json!({"seqInSession": {"gte": 1, "foo": 2}}), "filters.seqInSession.foo", "unknown operator"),
        (Message, json!({"seqInSession": {"equals": 1}}), "filters.seqInSession.equals", "unknown operator"),
        (Message, json!({"seqInSession": {}}), "filters.seqInSession", "needs at least one operator"),
        (Message, json!({"seqInSession": {"contains": "1"}}), "filters.seqInSession.contains", "operator contains is not supported on an integer field"),
        (Message, json!({"content": {"gt": "a"}}), "filters.content.gt", "operator gt is not supported on message content"),
        (Session, json!({"isActive": {"gt": true}}), "filters.isActive.gt", "not supported on a boolean field"),
        (Message, json!({"createdAt": {"icontains": "2024"}}), "filters.createdAt.icontains", "not supported on a datetime field"),
        (Conclusion, json!({"level": {"gt": "deductive"}}), "filters.level.gt", "not supported on the level field"),
        (Conclusion, json!({"level": {"contains": "duct"}}), "filters.level.contains", "not supported"),
        (Message, json!({"seqInSession": {"gt": null}}), "filters.seqInSession.gt", "null is only accepted with ne"),
        (Message, json!({"peerId": {"in": null}}), "filters.peerId.in", "null is only accepted with ne"),
        // Operand types.
        (Message, json!({"AND": [{}, {"seqInSession": {"gte": "abc"}}]}), "filters.AND[1].seqInSession.gte", "expected an integer, got \"abc\""),
        (Message, json!({"seqInSession": true}), "filters.seqInSession", "expected an integer, got true"),
        (Message, json!({"seqInSession": {"lt": [1]}}), "filters.seqInSession.lt", "expected an integer"),
        (Message, json!({"seqInSession": {"in": 5}}), "filters.seqInSession.in", "expected a list, got 5"),
        (Message, json!({"seqInSession": {"in": [1, "x"]}}), "filters.seqInSession.in[1]", "expected an integer, got \"x\""),
        (Message, json!({"seqInSession": [1, {}]}), "filters.seqInSession[1]", "expected an integer, got {}"),
        (Message, json!({"tokenCount": "lots"}), "filters.tokenCount", "expected an integer"),
        (Conclusion, json!({"timesDerived": {"gte": "three"}}), "filters.timesDerived.gte", "expected an integer"),
        (Message, json!({"peerId": 5}), "filters.peerId", "expected a string, got 5"),
        (Message, json!({"peerId": {"in": "alice"}}), "filters.peerId.in", "expected a list, got \"alice\""),
        (Message, json!({"peerId": {"contains": 5}}), "filters.peerId.contains", "expected a string"),
        (Message, json!({"sessionId": {"ne": false}}), "filters.sessionId.ne", "expected a string"),
        (Session, json!({"isActive": "true"}), "filters.isActive", "expected a boolean (true or false), got \"true\""),
        (Session, json!({"isActive": 1}), "filters.isActive", "expected a boolean"),
        (Session, json!({"isActive": {"in": [true, 0]}}), "filters.isActive.in[1]", "expected a boolean"),
        // Datetimes.
        (Message, json!({"createdAt": "yesterday"}), "filters.createdAt", "invalid datetime \"yesterday\""),
        (Message, json!({"createdAt": {"gte": "2024-01-01\n"}}), "filters.createdAt.gte", "invalid datetime"),
        (Message, json!({"createdAt": {"gte": "2024-01-01T00:00:00\u{0}"}}), "filters.createdAt.gte", "invalid datetime"),
        (Message, json!({"createdAt": {"lt": "2024-13-45"}}), "filters.createdAt.lt", "invalid datetime"),
        (Message, json!({"createdAt": 1_704_067_200}), "filters.createdAt", "expected a datetime string, got 1704067200"),
        // Levels.
        (Conclusion, json!({"level": "deduction"}), "filters.level", "unknown level \"deduction\"; levels are explicit, deductive, inductive, contradiction"),
        (Conclusion, json!({"level": {"in": ["deductive", "nope"]}}), "filters.level.in[1]", "unknown level"),
        (Conclusion, json!({"level": 1}), "filters.level", "expected a conclusion level, got 1"),
        // Metadata.
        (Message, json!({"metadata": 5}), "filters.metadata", "expected an object of metadata keys, or a list, got 5"),
        (Message, json!({"metadata": "x"}), "filters.metadata", "expected an object"),
        (Message, json!({"metadata": true}), "filters.metadata", "expected an object"),
        (Message, json!({"metadata": {"gt": 1}}), "filters.metadata.gt", "on the whole metadata value only contains"),
        (Message, json!({"metadata": {"in": [1]}}), "filters.metadata.in", "only contains"),
        (Message, json!({"metadata": {"icontains": "x"}}), "filters.metadata.icontains", "only contains"),
        (Message, json!({"metadata": {"contains": "x"}}), "filters.metadata.contains", "only contains"),
        (Message, json!({"metadata": {"contains": 1}}), "filters.metadata.contains", "only contains"),
        (Message, json!({"metadata": {"ne": {}}}), "filters.metadata.ne", "only contains"),
        (Message, json!({"metadata": {"contains": {"a": 1}, "foo": 1}}), "filters.metadata.foo", "cannot also hold the non-operator key \"foo\""),
        (Message, json!({"metadata": {"k": {"gt": 1, "x": 2}}}), "filters.metadata.k.x", "non-operator key \"x\""),
        (Message, json!({"metadata": {"k": {"gt": null}}}), "filters.metadata.k.gt", "null is only accepted with ne"),
        (Message, json!({"metadata": {"k": {"lt": [1]}}}), "filters.metadata.k.lt", "expected a number, a string or a boolean, got [1]"),
        (Message, json!({"metadata": {"k": {"ne": {"a": 1}}}}), "filters.metadata.k.ne", "expected a number, a string or a boolean"),
        (Message, json!({"metadata": {"k": {"in": 5}}}), "filters.metadata.k.in", "expected a list"),
        (Message, json!({"metadata": {"k": {"contains": 5}}}), "filters.metadata.k.contains", "expected a string, got 5"),
        (Message, json!({"metadata": {"a b": {"gt": {}}}}), "filters.metadata[\"a b\"].gt", "expected a number"),
        (Conclusion, json!({"OR": [{"metadata": {"x": {"in": "y"}}}]}), "filters.OR[0].metadata.x.in", "expected a list"),
        // NUL cannot be stored in PostgreSQL text or jsonb: refused up front, with its path.
        (Message, json!({"peerId": "a\u{0}b"}), "filters.peerId", "cannot contain NUL"),
        (Message, json!({"peerId": ["a", "\u{0}"]}), "filters.peerId[1]", "cannot contain NUL"),
        (Message, json!({"content": {"contains": "\u{0}"}}), "filters.content.contains", "cannot contain NUL"),
        (Message, json!({"metadata": {"a": {"b": ["x", "\u{0}"]}}}), "filters.metadata.a.b[1]", "cannot contain NUL"),
        (Message, json!({"metadata": {"k\u{0}": 1}}), "filters.metadata[\"k\\u0000\"]", "cannot contain NUL"),
        (Message, json!({"metadata": {"k": {"gt": "\u{0}"}}}), "filters.metadata.k.gt", "cannot contain NUL"),
        (Message, json!({"metadata": {"k": {"in": [1, "\u{0}"]}}}), "filters.metadata.k.in[1]", "cannot contain NUL"),
    ]
}

#[test]
fn every_error_names_its_path() {
    let cases = error_cases();
    for (r, j, path, fragment) in &cases {
        let e = error(*r, j.clone());
        assert_eq!(e.path, *path, "{r:?} {j}: {e}");
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("{path}: ")), "{msg}");
        assert!(
            msg.contains(fragment),
            "{r:?} {j}: {msg:?} lacks {fragment:?}"
        );
    }
    assert!(cases.len() > 75, "{}", cases.len());
}

#[test]
fn a_bad_operand_deep_in_a_filter_names_its_key_path() {
    let e = error(
        Message,
        json!({"AND": [{"peerId": "a"}, {"seqInSession": {"gte": "abc"}}]}),
    );
    assert_eq!(
        e.to_string(),
        r#"filters.AND[1].seqInSession.gte: expected an integer, got "abc""#
    );
}

#[test]
fn size_limit() {
    let ids = |n: usize| json!({ "peerId": (0..n).map(|i| format!("p{i}")).collect::<Vec<_>>() });
    assert!(parse(Message, &ids(MAX_VALUES)).is_ok());
    let e = error(Message, ids(MAX_VALUES + 1));
    assert_eq!(
        e.to_string(),
        "filters: filter too large: more than 5000 values"
    );
    // Spread over many branches, too.
    let branches: Vec<Value> = (0..=MAX_VALUES)
        .map(|i| json!({ "seqInSession": i }))
        .collect();
    let e = error(Message, json!({ "OR": branches }));
    assert_eq!(e.kind, FilterErrorKind::TooLarge { max: MAX_VALUES });
}

#[test]
fn error_messages_stay_short() {
    let e = error(Message, json!({ "seqInSession": "x".repeat(10_000) }));
    assert!(e.to_string().len() < 200, "{e}");
}

// ------------------------------------------------------------------------------ the reference

/// docs/filters.md is the DSL's reference: its grammar names the operators the parser knows, and
/// its table each resource's keys, in the order errors list them.
#[test]
fn the_reference_lists_the_operators_and_keys_that_parse() {
    let doc = include_str!("../../../docs/filters.md");
    let ops: Vec<&str> = doc
        .lines()
        .find_map(|l| l.strip_prefix("op       :="))
        .expect("the grammar's op rule")
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(ops, parse::OPERATORS);
    // Every one of them parses on a text column.
    for op in ops {
        let operand = if op == "in" { json!(["a"]) } else { json!("a") };
        tree(Message, json!({"peerId": {op: operand}}));
    }
    let table = &doc[doc.find("### Keys per resource").expect("the key table")..];
    for r in Resource::ALL {
        let name = format!("| {} ", format!("{r:?}").to_lowercase());
        let row = table
            .lines()
            .find(|l| l.starts_with(&name))
            .unwrap_or_else(|| panic!("no row {name}"));
        let keys: Vec<&str> = row
            .split('|')
            .nth(2)
            .unwrap()
            .split(',')
            .map(|k| k.trim().trim_matches('`'))
            .collect();
        let mut want = r.allowed_keys();
        want.retain(|k| !["AND", "OR", "NOT"].contains(k));
        assert_eq!(keys, want, "{r:?}");
    }
}

// ------------------------------------------------------------------------------- properties

/// Every key some resource accepts, in both spellings.
fn field_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = Resource::ALL
        .iter()
        .flat_map(|r| r.fields())
        .flat_map(|f| [f.camel, f.snake])
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Keys a generator draws from: real keys of every resource in both spellings, operators,
/// logical keys, and junk (a logical key in lowercase, internal columns, an empty key, SQL).
fn any_keys() -> Vec<&'static str> {
    let junk = [
        "and",
        "embedding",
        "internal_metadata",
        "*",
        "",
        "k",
        "a b",
        "x') OR 1=1 --",
    ];
    let mut keys = vec!["AND", "OR", "NOT"];
    keys.extend(field_keys());
    keys.extend(parse::OPERATORS);
    keys.extend(junk);
    keys
}

const STRINGS: &[&str] = &[
    "*",
    "",
    "abc",
    "alice",
    "10",
    "-3",
    "2.5",
    "1e999",
    "1e3",
    "9007199254740993",
    "99999999999999999999",
    "2024-01-01",
    "2026-01-01T10:00:00+02:00",
    "2024-01-01\n",
    "2024-13-45",
    "deductive",
    "DEDUCTIVE",
    "nope",
    "true",
    "%_\\",
    "'; DROP TABLE x; --",
    "\u{0}",
    "é",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-30i64..30).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |x| serde_json::Number::from_f64(x)
            .map(Value::Number)),
        (-100.0f64..100.0).prop_filter_map("finite", |x| serde_json::Number::from_f64(x)
            .map(Value::Number)),
        prop::sample::select(STRINGS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ]
}

pub(super) fn any_json() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(8, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(any_keys()), inner), 0..5).prop_map(
                |kvs| Value::Object(kvs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            ),
        ]
    })
}

fn any_resource() -> impl Strategy<Value = Resource> {
    prop::sample::select(Resource::ALL.to_vec())
}

const META_KEYS: &[&str] = &["k", "score", "flag", "a b", "importance"];

fn object(kvs: std::collections::BTreeMap<&'static str, Value>) -> Value {
    Value::Object(kvs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// An operand: a leaf or a short list of leaves.
fn operand() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => json_leaf(),
        1 => prop::collection::vec(json_leaf(), 0..4).prop_map(Value::Array),
    ]
}

/// `{op: operand, ...}`.
fn op_dict() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        prop::sample::select(parse::OPERATORS.to_vec()),
        operand(),
        1..3,
    )
    .prop_map(object)
}

/// A field's value: scalar, list, operator dict, or metadata-style key dict.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => json_leaf(),
        2 => prop::collection::vec(json_leaf(), 0..4).prop_map(Value::Array),
        3 => op_dict(),
        2 => prop::collection::btree_map(
            prop::sample::select(META_KEYS),
            prop_oneof![json_leaf(), op_dict()],
            0..3,
        )
        .prop_map(object),
    ]
}

/// JSON shaped like a filter (real keys, operators, logical nesting), so that a good share of
/// the inputs is accepted.
fn filter_json() -> impl Strategy<Value = Value> {
    let fields = || {
        prop::collection::btree_map(prop::sample::select(field_keys()), field_value(), 0..3)
            .prop_map(object)
    };
    fields().prop_recursive(4, 32, 3, move |inner| {
        prop_oneof![
            fields(),
            prop::collection::btree_map(
                prop::sample::select(&["AND", "OR", "NOT"][..]),
                prop::collection::vec(inner, 0..3).prop_map(Value::Array),
                1..3,
            )
            .prop_map(object),
        ]
    })
}

/// Structural invariants of a simplified tree: constants only at the root, And/Or with at
/// least two non-constant children, `in` never empty.
fn check_shape(node: &Node, root: bool) {
    match node {
        Node::True | Node::False => assert!(root, "constant inside a tree"),
        Node::And(c) | Node::Or(c) => {
            assert!(c.len() >= 2, "{node:?}");
            c.iter().for_each(|n| check_shape(n, false));
        }
        Node::Not(c) => check_shape(c, false),
        Node::In { values, .. } => assert!(!values.is_empty()),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn no_json_input_panics(r in any_resource(), j in any_json()) {
        match parse(r, &j) {
            Ok(f) => {
                check_shape(f.tree(), true);
                let q = select(&f);
                let _ = q.to_string(PostgresQueryBuilder);
                let _ = q.build(PostgresQueryBuilder);
            }
            Err(e) => {
                prop_assert!(e.path.starts_with("filters"));
                let prefix = format!("{}: ", e.path);
                prop_assert!(e.to_string().starts_with(&prefix));
            }
        }
    }

    #[test]
    fn filter_shaped_inputs_never_panic(r in any_resource(), j in filter_json()) {
        match parse(r, &j) {
            Ok(f) => {
                check_shape(f.tree(), true);
                let _ = select(&f).build(PostgresQueryBuilder);
            }
            Err(e) => prop_assert!(e.path.starts_with("filters")),
        }
    }
}
