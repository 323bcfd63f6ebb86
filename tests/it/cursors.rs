//! Cursors a connection did not give out: every connection of the schema refuses them with
//! BAD_USER_INPUT before any SQL runs, never INTERNAL_SERVER_ERROR (a key of the wrong type once
//! reached PostgreSQL as `integer > timestamptz`, error 42883), and still serves the cursors it
//! gave out. The cases are random: bytes, well-formed `k:` payloads of any parts, `o:` positions,
//! and the connection's own cursors.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, NaiveDate, Utc};
use honcho_graphql::store::page::{KeyPart, MAX_OFFSET};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::harness::TestApp;

/// Every connection of the schema (`Type.field`), with a query reaching it with `$f`, `$a`, `$l`,
/// `$b` as its `first`, `after`, `last`, `before`, and where the connection sits in `data`.
const CONNECTIONS: &[(&str, &str, &str)] = &[
    ("QueryRoot.workspaces", "{ CONN }", "/workspaces"),
    (
        "Workspace.peers",
        "{ workspace(id: \"ws\") { CONN } }",
        "/workspace/peers",
    ),
    (
        "Workspace.sessions",
        "{ workspace(id: \"ws\") { CONN } }",
        "/workspace/sessions",
    ),
    (
        "Workspace.messages",
        "{ workspace(id: \"ws\") { CONN } }",
        "/workspace/messages",
    ),
    (
        "Workspace.conclusions",
        "{ workspace(id: \"ws\") { CONN } }",
        "/workspace/conclusions",
    ),
    (
        "Peer.sessions",
        "{ workspace(id: \"ws\") { peer(id: \"alice\") { CONN } } }",
        "/workspace/peer/sessions",
    ),
    (
        "Peer.messages",
        "{ workspace(id: \"ws\") { peer(id: \"alice\") { CONN } } }",
        "/workspace/peer/messages",
    ),
    (
        "Peer.conclusions",
        "{ workspace(id: \"ws\") { peer(id: \"alice\") { CONN } } }",
        "/workspace/peer/conclusions",
    ),
    (
        "Session.messages",
        "{ workspace(id: \"ws\") { session(id: \"s\") { CONN } } }",
        "/workspace/session/messages",
    ),
];

/// `Type.field` of every field of the schema that takes an `after` cursor.
fn connections_of_the_schema() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut ty = String::new();
    for line in honcho_graphql::graphql::sdl().lines() {
        if let Some(rest) = line.strip_prefix("type ") {
            ty = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        } else if line.contains("after: String")
            && let Some((field, _)) = line.trim().split_once('(')
        {
            found.insert(format!("{ty}.{field}"));
        }
    }
    found
}

fn document(template: &str, field: &str) -> String {
    let name = field.split('.').nth(1).unwrap();
    let conn = format!(
        "{name}(first: $f, after: $a, last: $l, before: $b) {{ nodes {{ __typename }} pageInfo {{ endCursor }} }}"
    );
    format!(
        "query($f: Int, $a: String, $l: Int, $b: String) {}",
        template.replace("CONN", &conn)
    )
}

/// A cursor to try, and whether the list must take it.
#[derive(Clone, Debug)]
enum Case {
    /// Any bytes, base64url: no cursor unless they happen to spell one.
    Bytes(Vec<u8>),
    /// Any text, sent as it is.
    Text(String),
    /// `k:[position, parts]`, well-formed JSON whatever the parts.
    Keyed(u64, Vec<KeyPart>),
    /// `o:position`.
    Position(u64),
    /// One of the cursors the list gave out.
    Given(usize),
}

fn earliest_timestamptz() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(-4713, 11, 24)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
}

fn key_part() -> impl Strategy<Value = KeyPart> {
    let min = DateTime::<Utc>::MIN_UTC.timestamp_micros();
    let max = DateTime::<Utc>::MAX_UTC.timestamp_micros();
    let near = earliest_timestamptz().timestamp_micros();
    prop_oneof![
        any::<i64>().prop_map(KeyPart::Int),
        prop_oneof![-5i64..5, Just(i64::MIN), Just(i64::MAX)].prop_map(KeyPart::Int),
        ".{0,12}".prop_map(KeyPart::Text),
        "[a-z0-9_-]{0,21}".prop_map(KeyPart::Text),
        "[a-z]{0,3}\u{0}[a-z]{0,3}".prop_map(KeyPart::Text),
        (min..=max).prop_map(|us| KeyPart::Time(DateTime::from_timestamp_micros(us).unwrap())),
        (near - 2..near + 2)
            .prop_map(|us| KeyPart::Time(DateTime::from_timestamp_micros(us).unwrap())),
        (0i64..4_000_000_000_000_000)
            .prop_map(|us| KeyPart::Time(DateTime::from_timestamp_micros(us).unwrap())),
    ]
}

fn position() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..10,
        Just(MAX_OFFSET),
        Just(MAX_OFFSET + 1),
        Just(u64::MAX),
        any::<u64>()
    ]
}

fn case(given: usize) -> impl Strategy<Value = Case> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..48).prop_map(Case::Bytes),
        1 => ".{0,24}".prop_map(Case::Text),
        3 => (position(), prop::collection::vec(key_part(), 0..4))
            .prop_map(|(p, k)| Case::Keyed(p, k)),
        1 => position().prop_map(Case::Position),
        1 => (0..given).prop_map(Case::Given),
    ]
}

/// The kind of each part, as a string ("Int", "Text", "Time").
fn kinds(parts: &[KeyPart]) -> Vec<&'static str> {
    parts
        .iter()
        .map(|p| match p {
            KeyPart::Int(_) => "Int",
            KeyPart::Text(_) => "Text",
            KeyPart::Time(_) => "Time",
        })
        .collect()
}

/// Whether a key could be one of this list's: its parts' kinds, a text PostgreSQL can hold, a
/// time in timestamptz's range.
fn fits(parts: &[KeyPart], want: &[&str]) -> bool {
    kinds(parts) == want
        && parts.iter().all(|p| match p {
            KeyPart::Text(s) => !s.contains('\0'),
            KeyPart::Time(t) => *t >= earliest_timestamptz(),
            KeyPart::Int(_) => true,
        })
}

fn decode(cursor: &str) -> Option<(u64, Vec<KeyPart>)> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    serde_json::from_str(text.strip_prefix("k:")?).ok()
}

/// The cursor text, and whether the list must take it (None: either answer, as long as a refusal
/// is BAD_USER_INPUT).
fn cursor(case: &Case, given: &[String], want: &[&str]) -> (String, Option<bool>) {
    match case {
        Case::Bytes(b) => {
            let spells = b.starts_with(b"k:") || b.starts_with(b"o:");
            (URL_SAFE_NO_PAD.encode(b), (!spells).then_some(false))
        }
        Case::Text(t) => (t.clone(), None),
        Case::Keyed(p, key) => {
            let json = serde_json::to_string(&(p, key)).unwrap();
            // A time chrono writes but cannot read back is no cursor either.
            let reads_back =
                serde_json::from_str::<(u64, Vec<KeyPart>)>(&json).is_ok_and(|(_, k)| k == *key);
            (
                URL_SAFE_NO_PAD.encode(format!("k:{json}")),
                Some(*p <= MAX_OFFSET && reads_back && fits(key, want)),
            )
        }
        Case::Position(p) => (
            URL_SAFE_NO_PAD.encode(format!("o:{p}")),
            Some(*p <= MAX_OFFSET),
        ),
        Case::Given(i) => (given[i % given.len()].clone(), Some(true)),
    }
}

async fn seed(app: &TestApp) {
    let m: Vec<Value> = (0..4)
        .map(|i| {
            let peer = ["alice", "bob"][i % 2];
            json!({"peerId": peer, "content": format!("message {i}")})
        })
        .collect();
    app.ok(
        "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }",
        json!({"m": m}),
    )
    .await;
    app.ok(
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"t\", messages: [{peerId: \"alice\", content: \"x\"}]) { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"other\") { id } }",
        json!({}),
    )
    .await;
    let c: Vec<Value> = (0..3)
        .map(
            |i| json!({"content": format!("fact {i}"), "observerId": "alice", "observedId": "bob"}),
        )
        .collect();
    app.ok(
        "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
        json!({"c": c}),
    )
    .await;
}

#[test]
fn the_property_covers_every_connection_of_the_schema() {
    let covered: BTreeSet<String> = CONNECTIONS.iter().map(|c| c.0.to_owned()).collect();
    assert_eq!(covered, connections_of_the_schema());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_refuses_cursors_it_did_not_give_out_as_bad_input() {
    let app = TestApp::new().await;
    seed(&app).await;
    let handle = tokio::runtime::Handle::current();
    for (field, template, pointer) in CONNECTIONS {
        let query = document(template, field);
        // The list's own cursors, one per item, and the kinds of its ordering key.
        let all = app.ok(&query, json!({"f": 100})).await;
        let mut given = Vec::new();
        let mut after = Value::Null;
        loop {
            let d = app.ok(&query, json!({"f": 1, "a": after})).await;
            let end = d.pointer(pointer).unwrap()["pageInfo"]["endCursor"].clone();
            if end.is_null() {
                break;
            }
            given.push(end.as_str().unwrap().to_owned());
            after = end;
        }
        let items = all.pointer(pointer).unwrap()["nodes"].as_array().unwrap();
        assert_eq!(given.len(), items.len(), "{field}");
        assert!(given.len() >= 2, "{field} needs items to page: {all}");
        let (_, key) = decode(&given[0]).unwrap_or_else(|| panic!("{field}: {}", given[0]));
        let want = kinds(&key);

        // A forged cursor whose key holds text where the order needs a number,
        // `k:[3,[{"Text":"x"}]]`: it once reached PostgreSQL and failed there (42883, an
        // INTERNAL_SERVER_ERROR).
        for vars in [
            json!({"f": 2, "a": "azpbMyxbeyJUZXh0IjoieCJ9XV0"}),
            json!({"l": 2, "b": "azpbMyxbeyJUZXh0IjoieCJ9XV0"}),
        ] {
            let resp = app.exec(&query, vars).await;
            assert_eq!(
                resp["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
                "{field}: {resp}"
            );
        }

        let mut runner = TestRunner::new(Config {
            cases: 96,
            failure_persistence: None,
            ..Config::default()
        });
        let outcome = runner.run(&case(given.len()), |case| {
            let (cursor, must_take) = cursor(&case, &given, &want);
            for vars in [
                json!({"f": 2, "a": cursor}),
                json!({"l": 2, "b": cursor}),
                json!({"f": 2, "b": cursor}),
            ] {
                let resp = tokio::task::block_in_place(|| handle.block_on(app.exec(&query, vars)));
                let code = resp["errors"][0]["extensions"]["code"].as_str();
                let taken = resp.get("errors").is_none();
                let fail = |why: &str| {
                    Err(TestCaseError::fail(format!(
                        "{field}: {why} for {cursor:?} ({case:?}): {resp}"
                    )))
                };
                if !taken && code != Some("BAD_USER_INPUT") {
                    return fail("refused with another code than BAD_USER_INPUT");
                }
                match must_take {
                    Some(true) if !taken => return fail("refused a cursor it must take"),
                    Some(false) if taken => return fail("took a cursor it did not give out"),
                    _ => {}
                }
            }
            Ok(())
        });
        if let Err(e) = outcome {
            panic!("{e}");
        }
    }
}
