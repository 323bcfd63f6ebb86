//! `where:` (typed inputs) and `filters:` (JSON) are two spellings of one filter. A property test
//! generates filter trees for every resource, writes each as a `where` and as its JSON twin in
//! the DSL's plain spelling (bare values for equality, `null` for IS NULL, no `eq` operator), runs
//! both against a seeded database and checks that the same rows come back. Around it: the two
//! arguments together are refused, `where` errors name `where`, the filter limits and the cost
//! limit apply to it, and search takes it too.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::harness::TestApp;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Id,
    Text,
    Int,
    DateTime,
    Bool,
    Level,
    Meta,
}

/// Where a field's operands come from.
#[derive(Clone, Copy, Debug)]
enum Pool {
    Own,
    Workspaces,
    Peers,
    Sessions,
    Contents,
    Seq,
    Tokens,
    Derived,
    Times,
    None,
}

struct Resource {
    name: &'static str,
    /// The list field, under `workspace(id: "w")` unless it is `workspaces`.
    list: &'static str,
    input: &'static str,
    fields: &'static [(&'static str, Kind, Pool)],
}

const ID: (&str, Kind, Pool) = ("id", Kind::Id, Pool::Own);
const WORKSPACE_ID: (&str, Kind, Pool) = ("workspaceId", Kind::Id, Pool::Workspaces);
const CREATED_AT: (&str, Kind, Pool) = ("createdAt", Kind::DateTime, Pool::Times);
const METADATA: (&str, Kind, Pool) = ("metadata", Kind::Meta, Pool::None);

static RESOURCES: [Resource; 5] = [
    Resource {
        name: "workspace",
        list: "workspaces",
        input: "WorkspaceWhere",
        fields: &[ID, CREATED_AT, METADATA],
    },
    Resource {
        name: "peer",
        list: "peers",
        input: "PeerWhere",
        fields: &[ID, WORKSPACE_ID, CREATED_AT, METADATA],
    },
    Resource {
        name: "session",
        list: "sessions",
        input: "SessionWhere",
        fields: &[
            ID,
            WORKSPACE_ID,
            ("isActive", Kind::Bool, Pool::None),
            CREATED_AT,
            METADATA,
        ],
    },
    Resource {
        name: "message",
        list: "messages",
        input: "MessageWhere",
        fields: &[
            ID,
            WORKSPACE_ID,
            ("sessionId", Kind::Id, Pool::Sessions),
            ("peerId", Kind::Id, Pool::Peers),
            ("seqInSession", Kind::Int, Pool::Seq),
            ("content", Kind::Text, Pool::Contents),
            ("tokenCount", Kind::Int, Pool::Tokens),
            CREATED_AT,
            METADATA,
        ],
    },
    Resource {
        name: "conclusion",
        list: "conclusions",
        input: "ConclusionWhere",
        fields: &[
            ID,
            WORKSPACE_ID,
            ("observerId", Kind::Id, Pool::Peers),
            ("observedId", Kind::Id, Pool::Peers),
            ("sessionId", Kind::Id, Pool::Sessions),
            ("level", Kind::Level, Pool::None),
            ("timesDerived", Kind::Int, Pool::Derived),
            CREATED_AT,
            METADATA,
        ],
    },
];

fn list_query(r: &Resource) -> String {
    let field = format!(
        "{}(where: $w, filters: $f, first: 100) {{ nodes {{ id }} }}",
        r.list
    );
    let body = if r.list == "workspaces" {
        field
    } else {
        format!("workspace(id: \"w\") {{ {field} }}")
    };
    format!("query($w: {}, $f: JSON) {{ {body} }}", r.input)
}

fn ids_of(data: &Value, r: &Resource) -> Vec<String> {
    let list = if r.list == "workspaces" {
        &data["workspaces"]
    } else {
        &data["workspace"][r.list]
    };
    let mut ids: Vec<String> = list["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes in {data}"))
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// Three workspaces; in `w` four peers, three sessions, 24 messages written at known times with
/// varied metadata, and explicit and derived conclusions (one reinforced).
async fn seed(app: &TestApp) -> Values {
    for (id, meta) in [
        ("w", json!({"plan": "pro", "n": 1})),
        ("w2", json!({"plan": "free", "n": 2, "flag": true})),
        ("w3", json!({})),
    ] {
        app.ok(
            "mutation($id: ID!, $m: JSON) { getOrCreateWorkspace(id: $id, metadata: $m) { id } }",
            json!({"id": id, "m": meta}),
        )
        .await;
    }
    for (id, meta) in [
        ("alice", json!({"role": "admin", "n": 1})),
        ("bob", json!({"n": 2, "tag": "t1"})),
        ("carol", json!({})),
        ("dave", json!({"flag": true, "score": "5"})),
    ] {
        app.ok(
            "mutation($id: ID!, $m: JSON) { getOrCreatePeer(workspaceId: \"w\", id: $id, metadata: $m) { id } }",
            json!({"id": id, "m": meta}),
        )
        .await;
    }
    for (id, meta) in [
        ("s1", json!({"topic": "travel", "n": 1})),
        ("s2", json!({"topic": "food", "nested": {"a": 1}})),
        ("s3", json!({})),
    ] {
        app.ok(
            "mutation($id: ID!, $m: JSON) { getOrCreateSession(workspaceId: \"w\", id: $id, metadata: $m) { id } }",
            json!({"id": id, "m": meta}),
        )
        .await;
    }
    let peers = ["alice", "bob", "carol", "dave"];
    let scores = [
        json!(5),
        json!("5"),
        json!("abc"),
        json!(12.5),
        json!(null),
        json!(true),
    ];
    let mut message_times = Vec::new();
    for (s, session) in ["s1", "s2", "s3"].iter().enumerate() {
        let batch: Vec<Value> = (0..8)
            .map(|i| {
                let n = s * 8 + i;
                let at = format!("2026-01-0{}T{:02}:00:00Z", 1 + s, 8 + i);
                message_times.push(at.clone());
                let meta = if n % 5 == 4 {
                    json!({})
                } else {
                    json!({"n": n, "tag": format!("t{}", n % 4), "flag": n % 2 == 0,
                           "score": scores[n % scores.len()], "nested": {"a": n % 3}})
                };
                json!({
                    "peerId": peers[n % 4],
                    "content": format!("Message number {n} about {}", if n % 3 == 0 { "Cats" } else { "dogs and 50% off" }),
                    "metadata": meta,
                    "createdAt": at,
                })
            })
            .collect();
        app.ok(
            "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"w\", sessionId: $s, messages: $m) { id } }",
            json!({"s": session, "m": batch}),
        )
        .await;
    }
    let explicit: Vec<Value> = (0..6)
        .map(|i| {
            json!({
                "content": format!("fact {i}"),
                "observerId": peers[i % 4],
                "observedId": peers[(i + 1) % 4],
                "sessionId": if i % 3 == 2 { Value::Null } else { json!(format!("s{}", 1 + i % 3)) },
                "metadata": if i % 2 == 0 { json!({"importance": "high", "n": i}) } else { json!({"n": i}) },
            })
        })
        .collect();
    let created = app
        .ok(
            "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"w\", conclusions: $c) { id } }",
            json!({"c": explicit}),
        )
        .await;
    let sources = crate::harness::ids_of(&created["createConclusions"]);
    for (i, level) in ["DEDUCTIVE", "INDUCTIVE", "CONTRADICTION", "DEDUCTIVE"]
        .iter()
        .enumerate()
    {
        // The last one repeats the first: reinforced, timesDerived 2.
        let i = i % 3;
        app.ok(
            "mutation($i: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: \"w\", input: $i) { id } }",
            json!({"i": {"content": format!("derived {i}"), "observerId": peers[i], "observedId": "dave",
                         "sessionId": "s1", "level": level, "sourceIds": [sources[i], sources[i + 1]]}}),
        )
        .await;
    }

    let all = app
        .ok(
            "{ workspaces(first: 100) { nodes { createdAt } }
               workspace(id: \"w\") {
                 peers(first: 100) { nodes { createdAt } }
                 sessions(first: 100) { nodes { createdAt } }
                 messages(first: 100) { nodes { id tokenCount } }
                 conclusions(first: 100) { nodes { id createdAt } } } }",
            json!({}),
        )
        .await;
    let strings = |v: &Value, key: &str| -> Vec<String> {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n[key].as_str().unwrap().to_owned())
            .collect()
    };
    let w = &all["workspace"];
    let mut times = std::collections::HashMap::new();
    times.insert("workspace", strings(&all["workspaces"], "createdAt"));
    times.insert("peer", strings(&w["peers"], "createdAt"));
    times.insert("session", strings(&w["sessions"], "createdAt"));
    times.insert("conclusion", strings(&w["conclusions"], "createdAt"));
    times.insert("message", message_times);
    let mut tokens: Vec<i64> = w["messages"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tokenCount"].as_i64().unwrap())
        .collect();
    tokens.sort_unstable();
    tokens.dedup();
    let mut message_ids = strings(&w["messages"], "id");
    message_ids.truncate(6);
    let mut conclusion_ids = strings(&w["conclusions"], "id");
    conclusion_ids.truncate(4);
    Values {
        messages: with_misses(message_ids),
        conclusions: with_misses(conclusion_ids),
        times,
        tokens,
    }
}

fn with_misses(mut ids: Vec<String>) -> Vec<String> {
    ids.extend(["nope".to_owned(), "*".to_owned()]);
    ids
}

/// Operands drawn from the seeded rows, so that filters select some rows and not others.
#[derive(Clone, Debug)]
struct Values {
    messages: Vec<String>,
    conclusions: Vec<String>,
    /// `createdAt` values of each resource's rows.
    times: std::collections::HashMap<&'static str, Vec<String>>,
    tokens: Vec<i64>,
}

fn strings(items: Vec<String>) -> BoxedStrategy<Value> {
    prop::sample::select(items).prop_map(Value::from).boxed()
}

fn strs(items: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(items).prop_map(Value::from).boxed()
}

/// Operands for equality and `in` on a field.
fn equal_operands(r: &Resource, kind: Kind, pool: Pool, v: &Values) -> BoxedStrategy<Value> {
    match (kind, pool) {
        (Kind::Id, Pool::Own) => match r.name {
            "workspace" => strs(&["w", "w2", "w3", "nope"]),
            "peer" => strs(&["alice", "bob", "carol", "dave", "nope", "*"]),
            "session" => strs(&["s1", "s2", "s3", "nope"]),
            "message" => strings(v.messages.clone()),
            _ => strings(v.conclusions.clone()),
        },
        (_, Pool::Workspaces) => strs(&["w", "w2", "nope"]),
        (_, Pool::Peers) => strs(&["alice", "bob", "carol", "dave", "nope", "*"]),
        (_, Pool::Sessions) => strs(&["s1", "s2", "s3", "nope"]),
        (_, Pool::Contents) => strs(&[
            "Message number 3 about Cats",
            "Message number 4 about dogs and 50% off",
            "nope",
        ]),
        (_, Pool::Seq) => (0i64..=9).prop_map(Value::from).boxed(),
        (_, Pool::Derived) => (0i64..=3).prop_map(Value::from).boxed(),
        (_, Pool::Tokens) => prop::sample::select(v.tokens.clone())
            .prop_map(Value::from)
            .boxed(),
        (_, Pool::Times) => strings(v.times[r.name].clone()),
        (Kind::Bool, _) => any::<bool>().prop_map(Value::from).boxed(),
        (Kind::Level, _) => strs(&["EXPLICIT", "DEDUCTIVE", "INDUCTIVE", "CONTRADICTION"]),
        _ => unreachable!("{kind:?} {pool:?}"),
    }
}

/// Operands for `contains`/`icontains` on text.
fn needles() -> BoxedStrategy<Value> {
    strs(&[
        "a", "O", "e", "1", "s", "w", "li", "number 1", "CATS", "%", "_", "",
    ])
}

/// One test on a field: operators and operands as the `where` input takes them (`key` for
/// metadata).
#[derive(Clone, Debug)]
struct Test {
    key: Option<&'static str>,
    ops: Vec<(&'static str, Value)>,
}

fn ops_of(
    choices: Vec<(&'static str, BoxedStrategy<Value>)>,
) -> BoxedStrategy<Vec<(&'static str, Value)>> {
    let n = choices.len();
    prop::sample::subsequence(
        choices.into_iter().map(Arc::new).collect::<Vec<_>>(),
        1..=2.min(n),
    )
    .prop_flat_map(|picked| {
        picked
            .into_iter()
            .map(|c| {
                let op = c.0;
                c.1.clone().prop_map(move |v| (op, v))
            })
            .collect::<Vec<_>>()
    })
    .boxed()
}

/// An operand, or (one time in five) null: IS NULL / IS NOT NULL.
fn or_null(s: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![4 => s, 1 => Just(Value::Null)].boxed()
}

fn list_of(s: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop::collection::vec(s, 0..4)
        .prop_map(Value::Array)
        .boxed()
}

fn field_test(r: &Resource, kind: Kind, pool: Pool, v: &Values) -> BoxedStrategy<Test> {
    if kind == Kind::Meta {
        return meta_test();
    }
    let eq = equal_operands(r, kind, pool, v);
    let mut choices = vec![("eq", or_null(eq.clone())), ("ne", or_null(eq.clone()))];
    if kind != Kind::Bool {
        choices.push(("in", list_of(eq.clone())));
    }
    match kind {
        Kind::Id => {
            for op in ["gt", "gte", "lt", "lte"] {
                choices.push((op, eq.clone()));
            }
            choices.push(("contains", needles()));
            choices.push(("icontains", needles()));
        }
        Kind::Text => {
            choices.push(("contains", needles()));
            choices.push(("icontains", needles()));
        }
        Kind::Int | Kind::DateTime => {
            for op in ["gt", "gte", "lt", "lte"] {
                choices.push((op, eq.clone()));
            }
        }
        _ => {}
    }
    ops_of(choices)
        .prop_map(|ops| Test { key: None, ops })
        .boxed()
}

fn meta_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        (0i64..20).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        strs(&["t1", "t2", "5", "abc", "high", "travel", "pro", "admin"]),
        Just(json!(12.5)),
    ]
    .boxed()
}

fn meta_test() -> BoxedStrategy<Test> {
    let keyed = (
        prop::sample::select(
            &[
                "n",
                "tag",
                "flag",
                "score",
                "nested",
                "importance",
                "topic",
                "plan",
                "missing",
            ][..],
        ),
        ops_of(vec![
            (
                "eq",
                prop_oneof![4 => meta_leaf(), 1 => Just(json!({"a": 1})), 1 => Just(json!({"a": 2}))]
                    .boxed(),
            ),
            ("ne", or_null(meta_leaf())),
            ("in", list_of(meta_leaf())),
            ("gt", meta_leaf()),
            ("gte", meta_leaf()),
            ("lt", meta_leaf()),
            ("lte", meta_leaf()),
            ("contains", strs(&["t", "A", "1", "%"])),
            ("icontains", strs(&["T", "a", "5"])),
        ]),
    )
        .prop_map(|(key, ops)| Test {
            key: Some(key),
            ops,
        });
    let whole = ops_of(vec![
        ("eq", Just(Value::Null).boxed()),
        ("ne", Just(Value::Null).boxed()),
        (
            "contains",
            prop_oneof![
                Just(json!({"tag": "t1"})),
                Just(json!({"nested": {"a": 1}})),
                Just(json!({"n": 3})),
                Just(json!({"plan": "pro"})),
                Just(json!({})),
            ]
            .boxed(),
        ),
    ])
    .prop_map(|ops| Test { key: None, ops });
    prop_oneof![4 => keyed, 1 => whole].boxed()
}

/// A `where` object: tests on distinct fields, and at most one of AND/OR/NOT over children.
#[derive(Clone, Debug)]
struct Obj {
    fields: Vec<(&'static str, Kind, Test)>,
    logic: Option<(&'static str, Vec<Obj>)>,
}

fn obj(r: &'static Resource, v: &Values) -> BoxedStrategy<Obj> {
    let tests: Vec<BoxedStrategy<(&'static str, Kind, Test)>> = r
        .fields
        .iter()
        .map(|&(name, kind, pool)| {
            field_test(r, kind, pool, v)
                .prop_map(move |t| (name, kind, t))
                .boxed()
        })
        .collect();
    let fields = |range: std::ops::RangeInclusive<usize>| {
        prop::sample::subsequence(
            tests.iter().cloned().map(Arc::new).collect::<Vec<_>>(),
            range,
        )
        .prop_flat_map(|picked| picked.into_iter().map(|s| (*s).clone()).collect::<Vec<_>>())
        .boxed()
    };
    let leaf = fields(1..=1)
        .prop_map(|fields| Obj {
            fields,
            logic: None,
        })
        .boxed();
    // Beside AND/OR/NOT an object holds at most one more test (each one ANDed narrows it).
    let beside = fields(0..=1);
    leaf.prop_recursive(3, 12, 2, move |inner| {
        (
            beside.clone(),
            prop::sample::select(&["AND", "OR", "NOT"][..]),
            prop::collection::vec(inner, 0..3),
        )
            .prop_map(|(fields, op, children)| Obj {
                fields,
                logic: Some((op, children)),
            })
    })
    .boxed()
}

/// The `where` variable.
fn where_json(o: &Obj) -> Value {
    let mut out = Map::new();
    if let Some((op, children)) = &o.logic {
        out.insert((*op).into(), children.iter().map(where_json).collect());
    }
    for (name, _, t) in &o.fields {
        let mut ops: Map<String, Value> = t
            .ops
            .iter()
            .map(|(op, v)| ((*op).to_owned(), v.clone()))
            .collect();
        if let Some(key) = t.key {
            ops.insert("key".into(), key.into());
        }
        out.insert((*name).into(), Value::Object(ops));
    }
    Value::Object(out)
}

/// Levels as Honcho writes them (the enum spelling is accepted too; this takes the other path).
fn plain(kind: Kind, v: &Value) -> Value {
    match (kind, v) {
        (Kind::Level, Value::String(s)) => Value::String(s.to_lowercase()),
        (Kind::Level, Value::Array(items)) => items.iter().map(|i| plain(kind, i)).collect(),
        _ => v.clone(),
    }
}

/// The JSON twin in the DSL's plain spelling: equality as a bare value (`null` for IS NULL),
/// the other operators as an operator object; a test holding both adds a conjunct.
fn twin_json(o: &Obj) -> Value {
    let mut out = Map::new();
    let mut extra = Vec::new();
    for (name, kind, t) in &o.fields {
        let eq = t
            .ops
            .iter()
            .find(|(op, _)| *op == "eq")
            .map(|(_, v)| plain(*kind, v));
        let rest: Map<String, Value> = t
            .ops
            .iter()
            .filter(|(op, _)| *op != "eq")
            .map(|(op, v)| ((*op).to_owned(), plain(*kind, v)))
            .collect();
        // `{name: value}` for one test, with the metadata key in between when there is one.
        let at = |value: Value| match t.key {
            Some(key) => json!({ *name: { key: value } }),
            None => json!({ *name: value }),
        };
        let main = match (eq, rest.is_empty()) {
            (Some(eq), true) => at(eq),
            (eq, _) => {
                if let Some(eq) = eq {
                    extra.push(at(eq));
                }
                at(Value::Object(rest))
            }
        };
        out.extend(main.as_object().unwrap().clone());
    }
    if let Some((op, children)) = &o.logic {
        let mut items: Vec<Value> = children.iter().map(twin_json).collect();
        if *op == "AND" {
            items.append(&mut extra);
        }
        out.insert((*op).into(), items.into());
    }
    if !extra.is_empty() {
        out.insert("AND".into(), extra.into());
    }
    Value::Object(out)
}

const CASES: u32 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_and_its_json_twin_return_the_same_rows() {
    let app = TestApp::new().await;
    let values = seed(&app).await;
    let strategy = prop::sample::select((0..RESOURCES.len()).collect::<Vec<_>>())
        .prop_flat_map(move |i| (Just(i), obj(&RESOURCES[i], &values)));
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let handle = tokio::runtime::Handle::current();
    let totals: Vec<usize> = {
        let mut t = Vec::new();
        for r in &RESOURCES {
            t.push(ids_of(&app.ok(&list_query(r), json!({})).await, r).len());
        }
        t
    };
    // Cases whose filter selects some rows but not all: the ones that tell filters apart.
    let selective = std::cell::Cell::new(0u32);
    let result = tokio::task::block_in_place(|| {
        runner.run(&strategy, |(i, o)| {
            let r = &RESOURCES[i];
            let (w, f) = (where_json(&o), twin_json(&o));
            let query = list_query(r);
            let (typed, plain) = handle.block_on(async {
                (
                    app.exec(&query, json!({"w": w, "f": null})).await,
                    app.exec(&query, json!({"w": null, "f": f})).await,
                )
            });
            for resp in [&typed, &plain] {
                prop_assert!(
                    resp.get("errors").is_none(),
                    "{} where {w}\nfilters {f}\n{resp}",
                    r.name
                );
            }
            let (a, b) = (ids_of(&typed["data"], r), ids_of(&plain["data"], r));
            prop_assert_eq!(&a, &b, "{} where {}\nfilters {}", r.name, w, f);
            if !a.is_empty() && a.len() < totals[i] {
                selective.set(selective.get() + 1);
            }
            if std::env::var_os("SHOW_CASES").is_some() {
                eprintln!("{} {}/{} where {w}", r.name, a.len(), totals[i]);
            }
            Ok::<(), TestCaseError>(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(totals.iter().all(|t| *t >= 3), "seeded rows: {totals:?}");
    let selective = selective.get();
    eprintln!("where filters selecting some rows but not all: {selective} of {CASES}");
    assert!(
        selective >= CASES / 8,
        "only {selective} of {CASES} filters select some rows but not all"
    );
}

const MESSAGES: &str = "query($w: MessageWhere, $f: JSON) { workspace(id: \"w\") {
  messages(where: $w, filters: $f, first: 100) { nodes { id } } } }";

#[tokio::test]
async fn both_arguments_together_are_refused() {
    let app = TestApp::new().await;
    seed(&app).await;
    let (code, message) = app
        .err(MESSAGES, json!({"w": {"peerId": {"eq": "alice"}}, "f": {}}))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("not both"), "{message}");
}

#[tokio::test]
async fn where_errors_name_where_and_the_filter_limits_apply() {
    let app = TestApp::new().await;
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"w\") { id } }",
        json!({}),
    )
    .await;
    let resp = app
        .exec(
            MESSAGES,
            json!({"w": {"OR": [{"content": {"contains": "x".repeat(1001)}}]}}),
        )
        .await;
    let err = &resp["errors"][0];
    assert_eq!(err["extensions"]["code"], "BAD_USER_INPUT", "{resp}");
    assert_eq!(err["extensions"]["limit"], "filterValueChars", "{resp}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("where.OR[0].content.contains:"),
        "{resp}"
    );

    let deep = (0..6).fold(json!({"peerId": {"eq": "a"}}), |w, _| json!({"NOT": [w]}));
    let resp = app.exec(MESSAGES, json!({"w": deep})).await;
    assert_eq!(
        resp["errors"][0]["extensions"]["limit"], "filterDepth",
        "{resp}"
    );

    let many: Vec<String> = (0..5001).map(|i| format!("p{i}")).collect();
    let resp = app
        .exec(MESSAGES, json!({"w": {"peerId": {"in": many}}}))
        .await;
    assert_eq!(
        resp["errors"][0]["extensions"]["limit"], "filterValues",
        "{resp}"
    );

    // Typed: a misspelt key or a wrong operand type is a validation error before anything runs.
    let (code, message) = app
        .err(MESSAGES, json!({"w": {"peerid": {"eq": "alice"}}}))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("peerid"), "{message}");
    let (code, _) = app
        .err(MESSAGES, json!({"w": {"seqInSession": {"gt": "three"}}}))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
}

/// `where` written inline in the document, as GraphiQL completes it, on a search.
#[tokio::test]
async fn search_takes_where_inline() {
    let app = TestApp::new().await;
    seed(&app).await;
    let hits = |arg: &'static str| {
        let q = format!(
            "{{ workspace(id: \"w\") {{ search(query: \"dogs\", limit: 50, {arg}) {{
               ... on MessageHits {{ results {{ id peerId }} }} }} }} }}"
        );
        let app = &app;
        async move {
            let d = app.ok(&q, json!({})).await;
            let mut peers: Vec<(String, String)> = d["workspace"]["search"]["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["id"].as_str().unwrap().to_owned(),
                        m["peerId"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            peers.sort();
            peers
        }
    };
    let typed =
        hits("where: {peerId: {in: [\"bob\", \"carol\"]}, metadata: {key: \"flag\", eq: true}}")
            .await;
    let plain = hits("filters: {peerId: [\"bob\", \"carol\"], metadata: {flag: true}}").await;
    assert_eq!(typed, plain);
    assert!(!typed.is_empty());
    assert!(typed.iter().all(|(_, p)| p == "carol"), "{typed:?}");
}

/// A list costs its page size whichever filter argument it takes.
#[tokio::test]
async fn the_cost_limit_counts_a_where_list_like_any_other() {
    let app = TestApp::new().await;
    let q = |outer: &str, inner: &str| {
        format!(
            "{{ workspace(id: \"w\") {{ sessions(first: 100, {outer}) {{ nodes {{
               messages(first: 100, {inner}) {{ nodes {{ id content peerId sessionId createdAt }} }} }} }} }} }}"
        )
    };
    let (code, typed) = app
        .err(
            &q(
                "where: {id: {ne: \"x\"}}",
                "where: {seqInSession: {gte: 1}}",
            ),
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(typed.contains("the query costs"), "{typed}");
    let (_, plain) = app
        .err(
            &q(
                "filters: {id: {ne: \"x\"}}",
                "filters: {seqInSession: {gte: 1}}",
            ),
            json!({}),
        )
        .await;
    assert_eq!(typed, plain);
}

/// `queryConclusions` takes `where` too, applied before ranking as `filters` is.
#[tokio::test]
async fn query_conclusions_takes_where() {
    let app = TestApp::with_embedder().await;
    seed(&app).await;
    let q = "query($w: ConclusionWhere, $f: JSON) { workspace(id: \"w\") {
      queryConclusions(query: \"a fact\", topK: 20, where: $w, filters: $f) { id } } }";
    let found = |vars: Value| {
        let app = &app;
        async move {
            let d = app.ok(q, vars).await;
            let mut ids: Vec<String> = d["workspace"]["queryConclusions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    let all = found(json!({})).await;
    let typed = found(json!({"w": {"OR": [{"level": {"ne": "EXPLICIT"}},
        {"metadata": {"key": "importance", "eq": "high"}}]}}))
    .await;
    let plain = found(json!({"f": {"OR": [{"level": {"ne": "explicit"}},
        {"metadata": {"importance": "high"}}]}}))
    .await;
    assert_eq!(typed, plain);
    assert!(
        !typed.is_empty() && typed.len() < all.len(),
        "{typed:?} of {all:?}"
    );
}
