//! The filter DSL end to end: GraphQL `filters: JSON` → typed tree → SQL on PostgreSQL.

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::TestApp;

const SESSION_MESSAGES: &str = "query($f: JSON) { workspace(id: \"ws\") { session(id: \"s\") {
  messages(filters: $f, first: 100) { nodes { seqInSession peerId content } } } } }";

/// 20 messages in session s: odd seqs by alice, even by bob; metadata {"n": seq, "even": bool}.
async fn seed(app: &TestApp) {
    let batch: Vec<Value> = (1..=20)
        .map(|i| {
            json!({
                "peerId": if i % 2 == 1 { "alice" } else { "bob" },
                "content": format!("Message number {i} about {}", if i % 3 == 0 { "Cats" } else { "dogs" }),
                "metadata": {"n": i, "even": i % 2 == 0, "tag": format!("t{}", i % 4)},
            })
        })
        .collect();
    app.ok(
        "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }",
        json!({"m": batch}),
    )
    .await;
}

/// The seed, then seqs 21 to 20,000 of session s inserted directly, each by `author` (SQL of the
/// seq `g`), and analyzed: enough rows that the planner prefers an index to a scan.
async fn long_session(app: &TestApp, author: &str) {
    seed(app).await;
    app.store
        .db()
        .execute_unprepared(&format!(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', {author}, g, 'filler' FROM generate_series(21, 20000) g;
             ANALYZE messages;"
        ))
        .await
        .unwrap();
}

async fn seqs(app: &TestApp, filter: Value) -> Vec<i64> {
    let d = app.ok(SESSION_MESSAGES, json!({"f": filter})).await;
    d["workspace"]["session"]["messages"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn seq_in_session_ranges_from_the_seed() {
    let app = TestApp::new().await;
    seed(&app).await;
    assert_eq!(
        seqs(&app, json!({"seq_in_session": {"gte": 5, "lte": 10}})).await,
        [5, 6, 7, 8, 9, 10]
    );
    assert_eq!(
        seqs(&app, json!({"seqInSession": {"gte": 5, "lte": 10}})).await,
        [5, 6, 7, 8, 9, 10]
    );
    assert_eq!(seqs(&app, json!({"seq_in_session": 7})).await, [7]);
    assert_eq!(
        seqs(&app, json!({"seq_in_session": {"gt": 18}})).await,
        [19, 20]
    );
    assert_eq!(
        seqs(&app, json!({"seq_in_session": {"lt": 3}})).await,
        [1, 2]
    );
    assert_eq!(
        seqs(
            &app,
            json!({"peer_id": "alice", "seq_in_session": {"gte": 1, "lte": 100}})
        )
        .await,
        (1..=20).filter(|i| i % 2 == 1).collect::<Vec<_>>()
    );
    assert_eq!(
        seqs(
            &app,
            json!({"AND": [{"peer_id": "alice"}, {"seq_in_session": {"gte": 10}}]})
        )
        .await,
        [11, 13, 15, 17, 19]
    );
}

#[tokio::test]
async fn every_operator_on_real_columns() {
    let app = TestApp::new().await;
    seed(&app).await;
    assert_eq!(
        seqs(&app, json!({"seqInSession": {"ne": 1, "lte": 3}})).await,
        [2, 3]
    );
    assert_eq!(
        seqs(&app, json!({"seqInSession": {"in": [2, 4, 99]}})).await,
        [2, 4]
    );
    assert_eq!(
        seqs(&app, json!({"seqInSession": [3, 5]})).await,
        [3, 5],
        "bare list = in"
    );
    assert!(
        seqs(&app, json!({"seqInSession": {"in": []}}))
            .await
            .is_empty()
    );
    assert_eq!(
        seqs(&app, json!({"content": {"contains": "number 1 "}})).await,
        [1]
    );
    assert_eq!(
        seqs(
            &app,
            json!({"content": {"icontains": "CATS"}, "seqInSession": {"lte": 9}})
        )
        .await,
        [3, 6, 9]
    );
    assert_eq!(
        seqs(&app, json!({"content": {"contains": "%"}})).await,
        Vec::<i64>::new(),
        "% is literal"
    );
    assert_eq!(
        seqs(&app, json!({"peerId": "*", "seqInSession": 2})).await,
        [2],
        "wildcard"
    );
    assert_eq!(
        seqs(
            &app,
            json!({"NOT": [{"peer_id": "alice"}], "seqInSession": {"lte": 4}})
        )
        .await,
        [2, 4]
    );
    assert_eq!(
        seqs(
            &app,
            json!({"OR": [{"seqInSession": 1}, {"seqInSession": 20}]})
        )
        .await,
        [1, 20]
    );
    assert_eq!(
        seqs(
            &app,
            json!({"OR": [{"peerId": "*"}, {"peerId": "nobody"}], "seqInSession": {"lte": 2}})
        )
        .await,
        [1, 2],
        "a wildcard branch makes the OR match everything (decided against Honcho v3.0.12, which drops the branch)"
    );
    assert_eq!(
        seqs(&app, json!({"createdAt": {"gte": "2000-01-01"}}))
            .await
            .len(),
        20
    );
    assert!(
        seqs(&app, json!({"created_at": {"lt": "2000-01-01T00:00:00Z"}}))
            .await
            .is_empty()
    );
    assert_eq!(
        seqs(&app, json!({"token_count": {"gte": 0}})).await.len(),
        20
    );
    let id = app
        .ok("{ workspace(id: \"ws\") { session(id: \"s\") { messages(first: 1) { nodes { id } } } } }", json!({}))
        .await["workspace"]["session"]["messages"]["nodes"][0]["id"]
        .clone();
    assert_eq!(seqs(&app, json!({"id": id})).await, [1]);
}

#[tokio::test]
async fn nested_metadata_filters() {
    let app = TestApp::new().await;
    seed(&app).await;
    assert_eq!(seqs(&app, json!({"metadata": {"n": 5}})).await, [5]);
    assert!(
        seqs(&app, json!({"metadata": {"n": "5"}})).await.is_empty(),
        "JSON-typed: 5 ≠ \"5\""
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"n": {"gt": 18}}})).await,
        [19, 20]
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"n": {"gte": "19"}}})).await,
        [19, 20],
        "numeric string operand"
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"even": true, "n": {"lte": 4}}})).await,
        [2, 4]
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"n": {"in": [1, 2]}}})).await,
        [1, 2]
    );
    assert_eq!(
        seqs(
            &app,
            json!({"metadata": {"even": {"in": [true]}, "n": {"lte": 4}}})
        )
        .await,
        [2, 4],
        "in compares JSON values: true matches true"
    );
    assert_eq!(
        seqs(
            &app,
            json!({"metadata": {"tag": {"contains": "3"}, "n": {"lte": 8}}})
        )
        .await,
        [3, 7]
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"contains": {"n": 4}}})).await,
        [4]
    );
    assert_eq!(
        seqs(&app, json!({"metadata": {"n": "*"}, "seqInSession": 1})).await,
        [1]
    );
}

#[tokio::test]
async fn every_list_accepts_filters() {
    let app = TestApp::new().await;
    seed(&app).await;
    app.ok(
        "mutation { getOrCreatePeer(workspaceId: \"ws\", id: \"carol\", metadata: {role: \"admin\"}) { id } }",
        json!({}),
    )
    .await;
    let d = app
        .ok(
            "{ workspaces(filters: {id: \"ws\"}) { totalCount }
               workspace(id: \"ws\") {
                 peers(filters: {metadata: {role: \"admin\"}}) { nodes { id } }
                 sessions(filters: {id: \"s\"}) { totalCount }
                 messages(filters: {peer_id: \"bob\"}) { totalCount }
                 peer(id: \"alice\") { sessions(filters: {is_active: true}) { totalCount } messages(filters: {seqInSession: {lte: 5}}) { totalCount } }
               } }",
            json!({}),
        )
        .await;
    assert_eq!(d["workspaces"]["totalCount"], 1);
    let ws = &d["workspace"];
    assert_eq!(ws["peers"]["nodes"], json!([{"id": "carol"}]));
    assert_eq!(ws["sessions"]["totalCount"], 1);
    assert_eq!(ws["messages"]["totalCount"], 10);
    assert_eq!(ws["peer"]["sessions"]["totalCount"], 1);
    assert_eq!(ws["peer"]["messages"]["totalCount"], 3);
}

#[tokio::test]
async fn bad_filters_are_bad_user_input_naming_the_key_path() {
    let app = TestApp::new().await;
    seed(&app).await;
    for (filter, fragment) in [
        (json!({"nope": 1}), "nope"),
        (
            json!({"AND": [{"seqInSession": {"gte": 1}}, {"embedding": 1}]}),
            "embedding",
        ),
        (json!({"seqInSession": {"between": 1}}), "between"),
        (json!({"seqInSession": {"gte": "abc"}}), "seqInSession"),
        (json!({"createdAt": {"gte": "yesterday"}}), "createdAt"),
        (json!({"OR": {"peerId": "a"}}), "OR"),
        (
            json!({"AND": [{"AND": [{"AND": [{"AND": [{"AND": [{"AND": [{"peerId": "a"}]}]}]}]}]}]}),
            "depth",
        ),
        (json!([1, 2]), "filters"),
        (json!({"internal_metadata": {}}), "internal_metadata"),
    ] {
        let (code, msg) = app.err(SESSION_MESSAGES, json!({"f": filter})).await;
        assert_eq!(code, "BAD_USER_INPUT", "{filter}: {msg}");
        assert!(
            msg.contains(fragment),
            "{filter}: message {msg:?} should name {fragment}"
        );
    }
}

#[tokio::test]
async fn a_seq_range_on_a_session_is_an_index_range_on_seq() {
    let app = TestApp::new().await;
    long_session(&app, "'alice'").await;
    app.take_sql();
    let got = seqs(&app, json!({"seqInSession": {"gte": 10000, "lte": 10005}})).await;
    assert_eq!(got, (10000..=10005).collect::<Vec<_>>());
    let select = app
        .take_sql()
        .into_iter()
        .find(|s| s.contains("seq_in_session") && s.contains("ORDER BY"))
        .expect("the messages query");
    let plan = crate::harness::explain(app.store.db(), &select, sea_orm::Values(vec![])).await;
    // Either index keyed by (workspace, session, seq) serves it: the unique one, or the covering
    // one a page of messages reads its ids from (migration m20261201_000080).
    let ranged = plan.lines().any(|l| {
        l.contains("Index Cond")
            && l.contains("seq_in_session >= 10000")
            && l.contains("seq_in_session <= 10005")
    });
    assert!(ranged, "plan:\n{plan}");
}

#[tokio::test]
async fn a_page_of_one_authors_messages_reads_only_that_authors_entries_in_seq_order() {
    let app = TestApp::new().await;
    // Alice writes one message in ten: her page must neither read bob's entries to find hers nor
    // read all of hers to sort them (migration m20261207_000310).
    long_session(&app, "CASE WHEN g % 10 = 0 THEN 'alice' ELSE 'bob' END").await;
    let hers: Vec<i64> = (1..=19)
        .step_by(2)
        .chain((30..).step_by(10))
        .take(100)
        .collect();
    for (author, want) in [("alice", hers), ("carol", vec![])] {
        app.take_sql();
        assert_eq!(
            seqs(&app, json!({"peer_id": author})).await,
            want,
            "{author}"
        );
        let select = app
            .take_sql()
            .into_iter()
            .find(|s| s.contains(&format!("'{author}'")) && s.contains("LIMIT"))
            .expect("the page's query");
        let plan = crate::harness::explain_with(
            app.store.db(),
            "ANALYZE, COSTS OFF, TIMING OFF",
            &select,
            sea_orm::Values(vec![]),
        )
        .await;
        let ranged = plan
            .lines()
            .any(|l| l.contains("Index Cond") && l.contains(&format!("peer_name = '{author}'")));
        assert!(ranged, "{author}'s entries are not a range:\n{plan}");
        assert!(
            !plan.contains("Rows Removed by Filter"),
            "{author}:\n{plan}"
        );
        assert!(
            !plan.contains("top-N"),
            "{author}'s entries sorted:\n{plan}"
        );
    }
}
