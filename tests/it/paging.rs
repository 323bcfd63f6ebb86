//! Cursors seek by key: the page after a cursor is `WHERE key > cursor` on the index, not an
//! OFFSET that reads every row before it; cursors of the earlier `o:<position>` form still work.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, TransactionTrait};

use crate::harness::{TestApp, session_of};

const PAGE: &str =
    "query($a: String, $b: String, $f: Int, $l: Int) { workspace(id: \"ws\") { session(id: \"s\") {
  messages(first: $f, after: $a, last: $l, before: $b) {
    nodes { seqInSession } pageInfo { startCursor endCursor hasNextPage hasPreviousPage } } } } }";

fn seqs(messages: &Value) -> Vec<i64> {
    messages["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["seqInSession"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn pages_after_a_cursor_seek_by_seq_without_offset() {
    let app = TestApp::new().await;
    session_of(&app, 150).await;
    let mut after = Value::Null;
    let mut seen = Vec::new();
    for page in 0..3 {
        app.take_sql();
        let d = app.ok(PAGE, json!({"a": after, "f": 50})).await;
        let messages = &d["workspace"]["session"]["messages"];
        seen.extend(seqs(messages));
        assert_eq!(messages["pageInfo"]["hasNextPage"], page < 2);
        assert_eq!(messages["pageInfo"]["hasPreviousPage"], page > 0);
        if page > 0 {
            let sql = app.take_sql().join("\n");
            assert!(!sql.contains("OFFSET"), "{sql}");
            assert!(sql.contains("\"seq_in_session\" >"), "{sql}");
        }
        after = messages["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(seen, (1..=150).collect::<Vec<_>>());

    // Back from a cursor: the 20 before seq 101, by key too.
    let d = app.ok(PAGE, json!({"a": Value::Null, "f": 1})).await;
    let first_cursor = d["workspace"]["session"]["messages"]["pageInfo"]["endCursor"].clone();
    let d = app.ok(PAGE, json!({"a": first_cursor, "f": 100})).await;
    let before = d["workspace"]["session"]["messages"]["pageInfo"]["endCursor"].clone();
    app.take_sql();
    let d = app.ok(PAGE, json!({"b": before, "l": 20})).await;
    let messages = &d["workspace"]["session"]["messages"];
    assert_eq!(seqs(messages), (81..=100).collect::<Vec<_>>());
    assert_eq!(messages["pageInfo"]["hasPreviousPage"], true);
    assert!(!app.take_sql().join("\n").contains("OFFSET"));
}

#[tokio::test]
async fn position_cursors_given_out_before_still_work() {
    let app = TestApp::new().await;
    session_of(&app, 120).await;
    let old = |position: u64| URL_SAFE_NO_PAD.encode(format!("o:{position}"));
    let d = app.ok(PAGE, json!({"a": old(49), "f": 50})).await;
    let messages = &d["workspace"]["session"]["messages"];
    assert_eq!(seqs(messages), (51..=100).collect::<Vec<_>>());
    // The cursors it gives out now are keyed, and continue where it stopped.
    let d = app
        .ok(
            PAGE,
            json!({"a": messages["pageInfo"]["endCursor"].clone(), "f": 50}),
        )
        .await;
    assert_eq!(
        seqs(&d["workspace"]["session"]["messages"]),
        (101..=120).collect::<Vec<_>>()
    );
    let d = app.ok(PAGE, json!({"b": old(10), "l": 3})).await;
    assert_eq!(seqs(&d["workspace"]["session"]["messages"]), vec![8, 9, 10]);
    // Anything else is no cursor of this list.
    for bad in [
        URL_SAFE_NO_PAD.encode("k:[1,[{\"Int\":1}"),
        URL_SAFE_NO_PAD.encode("k:[4611686018427387905,[{\"Int\":1}]]"),
        "!!".to_owned(),
    ] {
        let (code, _) = app.err(PAGE, json!({"a": bad, "f": 5})).await;
        assert_eq!(code, "BAD_USER_INPUT");
    }
}

#[tokio::test]
async fn time_ordered_lists_page_by_creation_time_and_id_both_ways() {
    let app = TestApp::new().await;
    for i in 0..9 {
        app.ok(
            "mutation($p: ID!) { getOrCreatePeer(workspaceId: \"ws\", id: $p) { id } }",
            json!({"p": format!("peer{i}")}),
        )
        .await;
    }
    for order in ["ASC", "DESC"] {
        let query = "query($o: SortOrder!, $a: String, $f: Int) { workspace(id: \"ws\") {
          peers(order: $o, first: $f, after: $a) { nodes { id } pageInfo { endCursor hasNextPage } } } }";
        let all = app.ok(query, json!({"o": order, "f": 100})).await;
        let want: Vec<Value> = all["workspace"]["peers"]["nodes"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(want.len(), 9);
        let (mut after, mut got) = (Value::Null, Vec::new());
        loop {
            app.take_sql();
            let d = app.ok(query, json!({"o": order, "a": after, "f": 4})).await;
            let peers = &d["workspace"]["peers"];
            if !after.is_null() {
                let sql = app.take_sql().join("\n");
                assert!(!sql.contains("OFFSET"), "{sql}");
            }
            got.extend(peers["nodes"].as_array().unwrap().iter().cloned());
            if peers["pageInfo"]["hasNextPage"] != true {
                break;
            }
            after = peers["pageInfo"]["endCursor"].clone();
        }
        assert_eq!(got, want, "{order}");
    }
}

#[tokio::test]
async fn a_forward_pages_total_is_counted_beside_its_rows() {
    const COUNTED: &str = "query($a: String, $f: Int) { workspace(id: \"ws\") { session(id: \"s\") {
      messages(first: $f, after: $a) { totalCount nodes { seqInSession } pageInfo { hasNextPage endCursor } } } } }";
    let app = TestApp::new().await;
    session_of(&app, 120).await;
    // Every read of the messages waits behind this lock, so the statements the request has in
    // flight at once can be seen waiting side by side.
    let holder = Database::connect(app._db.url()).await.unwrap();
    let lock = holder.begin().await.unwrap();
    lock.execute_unprepared("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let watcher = Database::connect(app._db.url()).await.unwrap();
    let watch = async {
        let started = Instant::now();
        let mut waiting = 0;
        while started.elapsed() < Duration::from_secs(10) {
            let row = watcher
                .query_one_raw(sea_orm::Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    "SELECT count(*) AS n FROM pg_stat_activity \
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                ))
                .await
                .unwrap()
                .unwrap();
            waiting = row.try_get::<i64>("", "n").unwrap();
            if waiting >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lock.rollback().await.unwrap();
        waiting
    };
    let (page, waiting) = tokio::join!(app.ok(COUNTED, json!({"f": 50})), watch);
    assert_eq!(
        waiting, 2,
        "the COUNT and the page's SELECT were not in flight together"
    );
    let messages = &page["workspace"]["session"]["messages"];
    assert_eq!(messages["totalCount"], 120);
    assert_eq!(seqs(messages), (1..=50).collect::<Vec<_>>());
    assert_eq!(messages["pageInfo"]["hasNextPage"], true);

    // After a keyed cursor, and past the end: the total stays the list's, the page is empty.
    let end = messages["pageInfo"]["endCursor"].clone();
    let d = app.ok(COUNTED, json!({"a": end, "f": 100})).await;
    let messages = &d["workspace"]["session"]["messages"];
    assert_eq!(messages["totalCount"], 120);
    assert_eq!(seqs(messages), (51..=120).collect::<Vec<_>>());
    assert_eq!(messages["pageInfo"]["hasNextPage"], false);
    let past = URL_SAFE_NO_PAD.encode("o:500");
    let d = app.ok(COUNTED, json!({"a": past, "f": 10})).await;
    let messages = &d["workspace"]["session"]["messages"];
    assert_eq!(messages["totalCount"], 120);
    assert_eq!(seqs(messages), Vec::<i64>::new());
    assert_eq!(messages["pageInfo"]["hasNextPage"], false);
}
