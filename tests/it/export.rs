//! Export and import (docs/export.md): a workspace out as one file from one snapshot, back in
//! idempotently, the same bytes after a round trip; and a workspace copied from a Honcho v3
//! server's REST API (this server's own `/v3`).

use std::io::{Read, Write};

use futures::StreamExt;
use honcho_graphql::auth::KeySpec;
use honcho_graphql::import_honcho::ImportHoncho;
use honcho_graphql::store::Store;
use honcho_graphql::store::export::{
    ImportOptions, ImportReport, OnConflict, decode_vector, encode_vector,
};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::{AppServer, TestApp, bearer};

async fn say(app: &TestApp, session: &str, messages: &[(&str, &str)]) -> Vec<String> {
    let m = messages
        .iter()
        .map(|(p, c)| json!({"peerId": p, "content": c, "metadata": {"n": c.len()}}));
    app.create_messages("ws", session, m).await
}

/// Workspace `ws`: two peers with metadata and cards, two sessions with members and their
/// configuration, messages, an explicit conclusion drawn from a message, a derived one citing
/// it, and a soft-deleted one; a short summary of s1, the deriver's card entries citing the
/// conclusions, a scope holding both sessions and an empty one, a pair that has dreamt and one
/// only asked to.
async fn seed(app: &TestApp) -> Vec<String> {
    // As a server's start does: the database records the model of its vectors.
    app.store.check_embedder().await.unwrap();
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"ws\", metadata: {plan: \"pro\"}) { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { getOrCreatePeer(workspaceId: \"ws\", id: \"alice\", metadata: {age: 31}, \
         configuration: {observeMe: true}) { id } }",
        json!({}),
    )
    .await;
    let mut ids = say(
        app,
        "s1",
        &[
            ("alice", "I moved to Lisbon last spring"),
            ("bob", "How do you like the tram?"),
            ("alice", "I cycle to work along the river instead"),
        ],
    )
    .await;
    ids.extend(say(app, "s2", &[("bob", "My sister plays the cello")]).await);
    app.ok(
        "mutation { setSessionPeerConfig(workspaceId: \"ws\", sessionId: \"s1\", peerId: \"bob\", \
         observeMe: false, observeOthers: true) { peerId } }",
        json!({}),
    )
    .await;
    app.store
        .set_peer_card("ws", "alice", "alice", vec!["Lives in Lisbon".into()])
        .await
        .unwrap();
    app.store
        .set_peer_card("ws", "bob", "alice", vec!["Cycles".into()])
        .await
        .unwrap();
    let d = app
        .ok(
            "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
            json!({"c": [
                {"content": "alice lives in Lisbon", "observerId": "alice", "observedId": "alice", "sessionId": "s1"},
                {"content": "bob has a sister", "observerId": "bob", "observedId": "bob"},
            ]}),
        )
        .await;
    let fact = d["createConclusions"][0]["id"].as_str().unwrap().to_owned();
    let gone = d["createConclusions"][1]["id"].as_str().unwrap().to_owned();
    app.store
        .db()
        .execute_unprepared(&format!(
            "INSERT INTO conclusion_messages (conclusion_id, message_id) \
             SELECT '{fact}', id FROM messages WHERE public_id = '{}'",
            ids[0]
        ))
        .await
        .unwrap();
    app.ok(
        "mutation($i: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: \"ws\", input: $i) { id } }",
        json!({"i": {"content": "alice lives in Portugal", "observerId": "alice", "observedId": "alice",
                     "level": "DEDUCTIVE", "sourceIds": [fact]}}),
    )
    .await;
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
        json!({"id": gone}),
    )
    .await;
    seed_derived_state(app, &ids).await;
    ids
}

/// What the deriver and dreams keep, and scopes: written as their workers would leave it (the
/// deriver needs an LLM), scopes through the store.
async fn seed_derived_state(app: &TestApp, ids: &[String]) {
    let db = app.store.db();
    for sql in [
        format!(
            "INSERT INTO session_summaries (workspace_name, session_name, kind, content, \
               message_id, seq_in_session, token_count) \
             SELECT 'ws', 's1', 'short', 'alice moved to Lisbon; she cycles', id, \
               seq_in_session, 9 FROM messages WHERE public_id = '{}'",
            ids[2]
        ),
        "WITH e AS (INSERT INTO peer_card_entries (workspace_name, observer, observed, position, \
           content) VALUES ('ws', 'alice', 'alice', 0, 'ATTRIBUTE: Lives in Portugal'), \
           ('ws', 'alice', 'alice', 1, 'ATTRIBUTE: Cycles to work'), \
           ('ws', 'bob', 'alice', 0, 'RELATIONSHIP: Lisbon neighbour') RETURNING id, observer, position) \
         INSERT INTO peer_card_sources (entry_id, conclusion_id) \
         SELECT e.id, c.id FROM e JOIN conclusions c ON c.workspace_name = 'ws' \
           AND (c.content = 'alice lives in Lisbon' \
                OR (c.content = 'alice lives in Portugal' AND e.observer = 'alice' AND e.position = 0))"
            .into(),
        "INSERT INTO dream_units (workspace_name, observer, observed, last_dream_at, \
           explicit_at_last_dream) VALUES ('ws', 'alice', 'alice', now() - interval '1 hour', 1)"
            .into(),
        "INSERT INTO dream_units (workspace_name, observer, observed, requested_at, reason) \
         VALUES ('ws', 'bob', 'bob', now(), 'manual')"
            .into(),
    ] {
        db.execute_unprepared(&sql).await.unwrap();
    }
    app.store
        .get_or_create_scope("ws", "lisbon", Some(json!({"topic": "the move"})))
        .await
        .unwrap();
    app.store
        .add_sessions_to_scope("ws", "lisbon", &["s1".into(), "s2".into()])
        .await
        .unwrap();
    app.store
        .get_or_create_scope("ws", "empty", None)
        .await
        .unwrap();
}

/// Rows of the kinds after conclusions, by table, in the database.
async fn derived_state_rows(app: &TestApp) -> Vec<(&'static str, i64)> {
    let mut out = Vec::new();
    for table in [
        "session_summaries",
        "summary_units",
        "peer_card_entries",
        "peer_card_sources",
        "scopes",
        "scope_sessions",
        "dream_units",
    ] {
        out.push((
            table,
            app.sql_i64(&format!("SELECT count(*) FROM {table}")).await,
        ));
    }
    out
}

async fn export(store: &Store, workspace: &str) -> Vec<u8> {
    let mut stream = store.export_workspace(workspace).await.unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend(chunk.unwrap());
    }
    out
}

fn lines(file: &[u8]) -> Vec<Value> {
    let mut text = String::new();
    zstd::stream::read::Decoder::new(file)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn compress(lines: &[Value]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    for l in lines {
        writeln!(enc, "{l}").unwrap();
    }
    enc.finish().unwrap()
}

async fn import(store: &Store, file: Vec<u8>, options: ImportOptions) -> ImportReport {
    store
        .import_file(std::io::Cursor::new(file), options, &())
        .await
        .unwrap()
}

/// The error of an import that must fail.
async fn import_error(store: &Store, file: Vec<u8>, options: ImportOptions) -> String {
    store
        .import_file(std::io::Cursor::new(file), options, &())
        .await
        .unwrap_err()
        .to_string()
}

/// Imports `lines`, a file cut short, one record per transaction: it must stop on the missing
/// end line.
async fn import_cut_short(store: &Store, lines: &[Value]) {
    let options = ImportOptions {
        batch: 1,
        ..ImportOptions::default()
    };
    let err = import_error(store, compress(lines), options).await;
    assert!(err.contains("without its end line"), "{err}");
}

/// The same bytes (and when not, the lines that differ).
fn same_file(a: &[u8], b: &[u8]) {
    let (a_lines, b_lines) = (lines(a), lines(b));
    for (x, y) in a_lines.iter().zip(&b_lines) {
        let clip = |v: &Value| v.to_string().chars().take(600).collect::<String>();
        assert!(x == y, "lines differ:\n{}\n{}", clip(x), clip(y));
    }
    assert_eq!(a_lines.len(), b_lines.len());
    assert!(a == b, "the same lines, compressed to other bytes");
}

fn of_type<'a>(lines: &'a [Value], ty: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == ty).collect()
}

#[tokio::test]
async fn an_export_imported_elsewhere_exports_the_same_bytes() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let first = export(&a.store, "ws").await;
    let l = lines(&first);
    assert_eq!(l[0]["type"], "header");
    assert_eq!(l[0]["format"], "honcho-graphql-export");
    assert_eq!(l[0]["version"], 2);
    assert_eq!(l[0]["embedding"]["dims"], 384);
    assert_eq!(l[1]["type"], "workspace");
    assert_eq!(l[1]["metadata"], json!({"plan": "pro"}));
    assert_eq!(of_type(&l, "peer").len(), 2);
    assert_eq!(of_type(&l, "session").len(), 2);
    let messages = of_type(&l, "message");
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages
            .iter()
            .map(|m| (
                m["session"].as_str().unwrap(),
                m["seqInSession"].as_i64().unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![("s1", 1), ("s1", 2), ("s1", 3), ("s2", 1)]
    );
    assert_eq!(
        decode_vector(messages[0]["embedding"].as_str().unwrap())
            .unwrap()
            .len(),
        384
    );
    let bob_s1 = of_type(&l, "member")
        .into_iter()
        .find(|m| m["session"] == "s1" && m["peer"] == "bob")
        .unwrap();
    assert_eq!(bob_s1["configuration"]["observe_me"], false);
    let alice = of_type(&l, "peer")
        .into_iter()
        .find(|p| p["name"] == "alice")
        .unwrap();
    assert_eq!(
        alice["internalMetadata"]["peer_cards"]["alice"],
        json!(["Lives in Lisbon"])
    );
    let conclusions = of_type(&l, "conclusion");
    assert_eq!(conclusions.len(), 3);
    let derived = conclusions
        .iter()
        .find(|c| c["level"] == "deductive")
        .unwrap();
    let fact = conclusions
        .iter()
        .find(|c| c["content"] == "alice lives in Lisbon")
        .unwrap();
    assert_eq!(derived["sourceIds"], json!([fact["id"]]));
    assert_eq!(fact["messageIds"], json!([messages[0]["id"]]));
    assert_eq!(fact["timesDerived"], 1);
    assert!(
        conclusions
            .iter()
            .any(|c| c["content"] == "bob has a sister" && !c["deletedAt"].is_null())
    );
    let summaries = of_type(&l, "summary");
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0]["session"], "s1");
    assert_eq!(summaries[0]["kind"], "short");
    assert_eq!(summaries[0]["messageId"], messages[2]["id"]);
    assert_eq!(summaries[0]["seqInSession"], 3);
    let entries = of_type(&l, "cardEntry");
    assert_eq!(
        entries
            .iter()
            .map(|e| (
                e["observer"].as_str().unwrap(),
                e["position"].as_i64().unwrap(),
                e["conclusionIds"].as_array().unwrap().len()
            ))
            .collect::<Vec<_>>(),
        vec![("alice", 0, 2), ("alice", 1, 1), ("bob", 0, 1)]
    );
    assert_eq!(entries[2]["conclusionIds"], json!([fact["id"]]));
    let scopes = of_type(&l, "scope");
    assert_eq!(
        scopes.iter().map(|s| &s["name"]).collect::<Vec<_>>(),
        vec!["empty", "lisbon"]
    );
    assert_eq!(scopes[1]["metadata"], json!({"topic": "the move"}));
    assert_eq!(
        of_type(&l, "scopeSession")
            .iter()
            .map(|s| (s["scope"].as_str().unwrap(), s["session"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        vec![("lisbon", "s1"), ("lisbon", "s2")]
    );
    // The pair only asked to dream is scheduling work, not in the file.
    let dreams = of_type(&l, "dream");
    assert_eq!(dreams.len(), 1);
    assert_eq!(
        (&dreams[0]["observer"], &dreams[0]["explicitAtLastDream"]),
        (&json!("alice"), &json!(1))
    );
    assert_eq!(
        l.last().unwrap(),
        &json!({"type": "end", "peers": 2, "sessions": 2, "members": 3, "messages": 4,
                "conclusions": 3, "summaries": 1, "cardEntries": 3, "scopes": 2,
                "scopeSessions": 2, "dreams": 1})
    );

    let b = TestApp::with_embedder().await;
    let report = import(&b.store, first.clone(), ImportOptions::default()).await;
    assert!(report.vectors_reused);
    assert_eq!(report.messages, 4);
    let second = export(&b.store, "ws").await;
    same_file(&second, &first);
    // The cards read the same, and the deriver's next short summary of s1 starts from the
    // imported one rather than from the first message.
    for (observer, observed) in [("alice", "alice"), ("bob", "alice")] {
        assert_eq!(
            b.store
                .peer_card_entries("ws", observer, observed)
                .await
                .unwrap(),
            a.store
                .peer_card_entries("ws", observer, observed)
                .await
                .unwrap()
        );
    }
    assert_eq!(
        b.sql_i64("SELECT done_seq FROM summary_units WHERE session_name = 's1' AND kind = 'short' AND due_seq = done_seq")
            .await,
        3
    );
}

#[tokio::test]
async fn an_import_stopped_after_any_line_and_run_again_leaves_no_duplicates() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let file = export(&a.store, "ws").await;
    let l = lines(&file);
    let b = TestApp::with_embedder().await;
    // One record per transaction, the file cut after each line in turn: every run stops on the
    // missing end line having written one more row than the one before, and writes nothing that
    // is already there.
    for cut in 2..l.len() {
        import_cut_short(&b.store, &l[..cut]).await;
    }
    let last = import(&b.store, file.clone(), ImportOptions::default()).await;
    assert_eq!(last.inserted, 0);
    assert_eq!(
        derived_state_rows(&b).await,
        vec![
            ("session_summaries", 1),
            ("summary_units", 1),
            ("peer_card_entries", 3),
            ("peer_card_sources", 4),
            ("scopes", 2),
            ("scope_sessions", 2),
            ("dream_units", 1),
        ]
    );
    same_file(&export(&b.store, "ws").await, &file);
}

#[tokio::test]
async fn a_version_1_file_is_read_as_one_without_the_newer_kinds() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let v2 = lines(&export(&a.store, "ws").await);
    const NEWER: [&str; 5] = ["summary", "cardEntry", "scope", "scopeSession", "dream"];
    let mut v1: Vec<Value> = v2
        .iter()
        .filter(|x| !NEWER.contains(&x["type"].as_str().unwrap()))
        .cloned()
        .collect();
    v1[0]["version"] = json!(1);
    let end = v1.last_mut().unwrap().as_object_mut().unwrap();
    for field in [
        "summaries",
        "cardEntries",
        "scopes",
        "scopeSessions",
        "dreams",
    ] {
        end.remove(field);
    }
    let b = TestApp::with_embedder().await;
    let report = import(&b.store, compress(&v1), ImportOptions::default()).await;
    assert_eq!(report.messages, 4);
    let back = lines(&export(&b.store, "ws").await);
    for ty in ["peer", "session", "member", "message", "conclusion"] {
        assert_eq!(of_type(&back, ty), of_type(&v2, ty), "{ty} lines");
    }
    for ty in NEWER {
        assert!(of_type(&back, ty).is_empty(), "{ty} lines");
    }
}

#[tokio::test]
async fn writes_during_an_export_are_not_in_it() {
    let app = TestApp::with_embedder().await;
    seed(&app).await;
    let before = app.store.export_counts("ws").await.unwrap();
    let mut stream = app.store.export_workspace("ws").await.unwrap();
    let mut file = stream.next().await.unwrap().unwrap();
    // Written while the export runs: a new session with messages, a message in s1, a peer.
    say(
        &app,
        "s3",
        &[("carol", "late news"), ("alice", "late reply")],
    )
    .await;
    say(&app, "s1", &[("bob", "one more")]).await;
    app.ok(
        "mutation { deleteSession(workspaceId: \"ws\", id: \"s2\") }",
        json!({}),
    )
    .await;
    while let Some(chunk) = stream.next().await {
        file.extend(chunk.unwrap());
    }
    let l = lines(&file);
    let end = l.last().unwrap();
    assert_eq!(end["messages"], before.messages);
    assert_eq!(end["peers"], before.peers);
    assert_eq!(of_type(&l, "message").len() as u64, before.messages);
    assert!(
        of_type(&l, "message")
            .iter()
            .all(|m| m["content"] != "one more" && m["session"] != "s3")
    );
    assert!(of_type(&l, "peer").iter().all(|p| p["name"] != "carol"));
    // The deleted session is in it whole, with its message.
    assert!(of_type(&l, "message").iter().any(|m| m["session"] == "s2"));
    assert!(of_type(&l, "session").iter().any(|s| s["name"] == "s2"));
    assert_ne!(app.store.export_counts("ws").await.unwrap(), before);
}

#[tokio::test]
async fn an_import_stopped_midway_and_run_again_writes_each_row_once() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let file = export(&a.store, "ws").await;
    let l = lines(&file);
    let b = TestApp::with_embedder().await;
    // The file cut after the second message, with small batches: part of it is written, then
    // the import stops on the missing end line.
    let cut = l.iter().position(|x| x["type"] == "message").unwrap() + 2;
    import_cut_short(&b.store, &l[..cut]).await;
    assert_eq!(b.sql_i64("SELECT count(*) FROM messages").await, 2);
    let again = import(&b.store, file.clone(), ImportOptions::default()).await;
    assert_eq!(again.messages, 4);
    let third = import(&b.store, file.clone(), ImportOptions::default()).await;
    assert_eq!(third.inserted, 0);
    // The workspace, 2 peers, 2 sessions, 3 memberships, 4 messages, 3 conclusions, a summary,
    // 3 card entries, 2 scopes, 2 scope memberships, a dream.
    assert_eq!(third.unchanged, 1 + 2 + 2 + 3 + 4 + 3 + 1 + 3 + 2 + 2 + 1);
    assert_eq!(b.sql_i64("SELECT count(*) FROM messages").await, 4);
    assert_eq!(b.sql_i64("SELECT count(*) FROM conclusions").await, 3);
    assert_eq!(
        b.sql_i64("SELECT count(*) FROM conclusion_messages").await,
        1
    );
    same_file(&export(&b.store, "ws").await, &file);
}

#[tokio::test]
async fn a_conflicting_row_fails_is_skipped_or_replaced_as_asked() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let file = export(&a.store, "ws").await;
    let b = TestApp::with_embedder().await;
    import(&b.store, file.clone(), ImportOptions::default()).await;
    b.ok(
        "mutation { updatePeer(workspaceId: \"ws\", id: \"alice\", metadata: {age: 40}) { id } }",
        json!({}),
    )
    .await;
    let alice_age = "SELECT (metadata->>'age')::bigint FROM peers WHERE name = 'alice'";
    // A card entry reworded here and citing the derived conclusion instead of the fact.
    b.store
        .db()
        .execute_unprepared(
            "UPDATE peer_card_entries SET content = 'ATTRIBUTE: Walks to work' \
               WHERE observer = 'alice' AND position = 1; \
             INSERT INTO peer_card_sources (entry_id, conclusion_id) \
               SELECT e.id, c.id FROM peer_card_entries e, conclusions c \
               WHERE e.observer = 'alice' AND e.position = 1 \
                 AND c.content = 'alice lives in Portugal'; \
             DELETE FROM peer_card_sources s USING peer_card_entries e, conclusions c \
               WHERE s.entry_id = e.id AND e.observer = 'alice' AND e.position = 1 \
                 AND c.id = s.conclusion_id AND c.content = 'alice lives in Lisbon'",
        )
        .await
        .unwrap();
    let entry = "SELECT content || ' <- ' || (SELECT string_agg(c.content, ', ') \
                   FROM peer_card_sources s JOIN conclusions c ON c.id = s.conclusion_id \
                   WHERE s.entry_id = e.id) \
                 FROM peer_card_entries e WHERE observer = 'alice' AND position = 1";
    let walks = "ATTRIBUTE: Walks to work <- alice lives in Portugal";

    let err = import_error(&b.store, file.clone(), ImportOptions::default()).await;
    assert!(
        err.contains("peer alice exists with other content"),
        "{err}"
    );
    assert_eq!(b.sql_i64(alice_age).await, 40);

    let skip = import(
        &b.store,
        file.clone(),
        ImportOptions {
            on_conflict: OnConflict::Skip,
            ..ImportOptions::default()
        },
    )
    .await;
    assert_eq!((skip.skipped, skip.replaced, skip.inserted), (2, 0, 0));
    assert_eq!(b.sql_i64(alice_age).await, 40);
    assert_eq!(b.sql_one::<String>(entry).await, walks);

    let replace = import(
        &b.store,
        file.clone(),
        ImportOptions {
            on_conflict: OnConflict::Replace,
            ..ImportOptions::default()
        },
    )
    .await;
    assert_eq!((replace.skipped, replace.replaced), (0, 2));
    assert_eq!(b.sql_i64(alice_age).await, 31);
    assert_eq!(
        b.sql_one::<String>(entry).await,
        "ATTRIBUTE: Cycles to work <- alice lives in Lisbon"
    );
    same_file(&export(&b.store, "ws").await, &file);
}

#[tokio::test]
async fn vectors_of_another_model_are_computed_again_here() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let mut l = lines(&export(&a.store, "ws").await);
    l[0]["embedding"]["model"] = json!("some-other-model");
    let zeros = encode_vector(&[0.5; 384]);
    for x in l.iter_mut() {
        if x.get("embedding").is_some_and(|e| e.is_string()) {
            x["embedding"] = json!(zeros);
        }
    }
    let b = TestApp::with_embedder().await;
    let report = import(&b.store, compress(&l), ImportOptions::default()).await;
    assert!(!report.vectors_reused);
    // Four messages and the two live conclusions (a soft-deleted one is not embedded).
    assert_eq!(report.embedded, 6);
    let back = lines(&export(&b.store, "ws").await);
    let theirs = lines(&export(&a.store, "ws").await);
    for (mine, original) in of_type(&back, "message")
        .iter()
        .zip(of_type(&theirs, "message"))
    {
        let v = decode_vector(mine["embedding"].as_str().unwrap()).unwrap();
        let w = decode_vector(original["embedding"].as_str().unwrap()).unwrap();
        assert_ne!(v, vec![0.5; 384]);
        let cos: f32 = v.iter().zip(&w).map(|(x, y)| x * y).sum::<f32>()
            / (v.iter().map(|x| x * x).sum::<f32>().sqrt()
                * w.iter().map(|x| x * x).sum::<f32>().sqrt());
        assert!(
            cos > 0.99,
            "{} embedded as something else: {cos}",
            mine["content"]
        );
    }
}

#[tokio::test]
async fn a_copy_under_another_name_gets_ids_of_its_own_beside_the_original() {
    let a = TestApp::with_embedder().await;
    seed(&a).await;
    let file = export(&a.store, "ws").await;
    let options = ImportOptions {
        workspace: Some("copy".into()),
        ..ImportOptions::default()
    };
    import(&a.store, file.clone(), options.clone()).await;
    let again = import(&a.store, file.clone(), options).await;
    assert_eq!(again.inserted, 0);
    let copy = lines(&export(&a.store, "copy").await);
    let original = lines(&file);
    assert_eq!(copy.len(), original.len());
    assert_eq!(copy[0]["workspace"], "copy");
    let ids = |l: &[Value], ty| -> Vec<String> {
        of_type(l, ty)
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let mine = ids(&copy, "message");
    assert!(
        mine.iter()
            .all(|id| !ids(&original, "message").contains(id))
    );
    // The graph follows its ids.
    let conclusions = of_type(&copy, "conclusion");
    let fact = conclusions
        .iter()
        .find(|c| c["content"] == "alice lives in Lisbon")
        .unwrap();
    assert!(mine.contains(&fact["messageIds"][0].as_str().unwrap().to_owned()));
    let derived = conclusions
        .iter()
        .find(|c| c["level"] == "deductive")
        .unwrap();
    assert_eq!(derived["sourceIds"], json!([fact["id"]]));
    assert_eq!(of_type(&copy, "summary")[0]["messageId"], json!(mine[2]));
    let cited: Vec<&Value> = of_type(&copy, "cardEntry")
        .iter()
        .flat_map(|e| e["conclusionIds"].as_array().unwrap())
        .collect();
    assert_eq!(cited.len(), 4);
    assert!(
        cited
            .iter()
            .all(|id| *id == &fact["id"] || *id == &derived["id"])
    );
    assert_eq!(a.sql_i64("SELECT count(*) FROM messages").await, 8);
    assert_eq!(
        a.sql_i64("SELECT count(*) FROM scope_sessions WHERE workspace_name = 'copy'")
            .await,
        2
    );
}

#[tokio::test]
async fn only_admin_and_workspace_keys_download_an_export() {
    let app = TestApp::with_embedder().await;
    seed(&app).await;
    let server = AppServer::start(app.auth_on()).await;
    let get = |key: Option<String>| {
        let mut req = server
            .client
            .get(format!("{}/export/workspaces/ws", server.base));
        if let Some(k) = key {
            req = req.header("authorization", k);
        }
        req.send()
    };
    let spec = |workspace: Option<&str>, peer: Option<&str>| KeySpec {
        admin: workspace.is_none(),
        workspace: workspace.map(Into::into),
        peer: peer.map(Into::into),
        session: None,
        scope: None,
        expires_at: None,
    };
    for (key, status) in [
        (None, 401),
        (Some(bearer(spec(Some("ws"), Some("alice")))), 403),
        (Some(bearer(spec(Some("other"), None))), 403),
        // A key limited to a scope reads its sessions, never the whole workspace.
        (
            Some(bearer(KeySpec {
                scope: Some("sc".into()),
                ..spec(Some("ws"), None)
            })),
            403,
        ),
    ] {
        let resp = get(key).await.unwrap();
        assert_eq!(resp.status().as_u16(), status);
    }
    for key in [spec(None, None), spec(Some("ws"), None)] {
        let resp = get(Some(bearer(key))).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers()["content-type"], "application/zstd");
        let body = resp.bytes().await.unwrap();
        same_file(&body, &export(&server.app.store, "ws").await);
    }
    let missing = server
        .client
        .get(format!("{}/export/workspaces/nope", server.base))
        .header("authorization", bearer(spec(None, None)))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let d = server
        .app
        .exec_as(
            Some(&bearer(spec(Some("ws"), Some("alice")))),
            "{ workspace(id: \"ws\") { export { path } } }",
            json!({}),
        )
        .await;
    assert_eq!(d["errors"][0]["extensions"]["code"], "FORBIDDEN");
    let d = server
        .app
        .exec_as(
            Some(&bearer(spec(Some("ws"), None))),
            "{ workspace(id: \"ws\") { export { format version path messages conclusions \
             summaries cardEntries scopes scopeSessions dreams embeddingDims } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["data"]["workspace"]["export"],
        json!({"format": "honcho-graphql-export", "version": 2, "path": "/export/workspaces/ws",
               "messages": 4, "conclusions": 3, "summaries": 1, "cardEntries": 3, "scopes": 2,
               "scopeSessions": 2, "dreams": 1, "embeddingDims": 384})
    );
}

#[tokio::test]
async fn import_honcho_copies_a_workspace_from_a_v3_server_and_resumes() {
    let source = TestApp::with_embedder().await;
    let said = seed(&source).await;
    let server = AppServer::start(source).await;
    let target = TestApp::with_embedder().await;
    let job = ImportHoncho {
        base_url: server.base.clone(),
        workspace: "ws".into(),
        api_key: None,
        on_conflict: OnConflict::Fail,
    };
    let report = job.run(&target.store, &()).await.unwrap();
    assert_eq!(report.messages, 4);
    assert!(report.embedded >= 4);
    let l = lines(&export(&target.store, "ws").await);
    let messages = of_type(&l, "message");
    assert_eq!(
        messages
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        said
    );
    assert_eq!(
        messages[2]["content"],
        "I cycle to work along the river instead"
    );
    assert_eq!(messages[2]["seqInSession"], 3);
    assert!(messages.iter().all(|m| m["embedding"].is_string()));
    let alice = of_type(&l, "peer")
        .into_iter()
        .find(|p| p["name"] == "alice")
        .unwrap();
    assert_eq!(alice["metadata"], json!({"age": 31}));
    // Honcho's API shows a card as one list: the deriver's lines arrive as the client's.
    assert_eq!(
        alice["internalMetadata"]["peer_cards"]["alice"],
        json!([
            "Lives in Lisbon",
            "ATTRIBUTE: Lives in Portugal",
            "ATTRIBUTE: Cycles to work"
        ])
    );
    let bob_s1 = of_type(&l, "member")
        .into_iter()
        .find(|m| m["session"] == "s1" && m["peer"] == "bob")
        .unwrap();
    assert_eq!(bob_s1["configuration"]["observe_me"], false);
    // s1's summary continues from the message it names, at that message's seq.
    let summaries = of_type(&l, "summary");
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0]["session"], "s1");
    assert_eq!(summaries[0]["kind"], "short");
    assert_eq!(summaries[0]["content"], "alice moved to Lisbon; she cycles");
    assert_eq!(summaries[0]["messageId"], said[2].as_str());
    assert_eq!(summaries[0]["seqInSession"], 3);
    let scopes = of_type(&l, "scope");
    assert_eq!(scopes.len(), 2);
    let lisbon = scopes.iter().find(|s| s["name"] == "lisbon").unwrap();
    assert_eq!(lisbon["metadata"], json!({"topic": "the move"}));
    let mut in_lisbon: Vec<String> = of_type(&l, "scopeSession")
        .iter()
        .filter(|m| m["scope"] == "lisbon")
        .map(|m| m["session"].as_str().unwrap().to_owned())
        .collect();
    in_lisbon.sort();
    assert_eq!(in_lisbon, ["s1", "s2"]);
    // The live conclusions (Honcho lists no deleted ones), with their levels.
    let conclusions = of_type(&l, "conclusion");
    assert_eq!(conclusions.len(), 2);
    assert!(conclusions.iter().any(|c| c["level"] == "deductive"));
    assert_eq!(
        target
            .sql_i64("SELECT count(*) FROM import_checkpoints")
            .await,
        0
    );

    // A run stopped after s1's messages: its checkpoint says so, and the next run reads on
    // from there without writing anything twice.
    target
        .store
        .set_import_checkpoint(
            server.base.trim_end_matches('/'),
            "ws",
            Some(&json!({"sessions_done": ["s1"], "session": null, "pages_read": 0})),
        )
        .await
        .unwrap();
    let again = job.run(&target.store, &()).await.unwrap();
    assert_eq!(again.messages, 1, "only s2's message is read again");
    assert_eq!(again.inserted, 0);
    assert_eq!(target.sql_i64("SELECT count(*) FROM messages").await, 4);
}
