//! Erasure (docs/erasure.md): deleteMessage, deleteSession and erasePeer leave nothing of what
//! they erase, in the tables, the search indexes and statistics, the deriver's queue or the
//! reasoning graph; a peer's erasure runs in batches and resumes after a crash.

use honcho_graphql::auth::KeySpec;
use honcho_graphql::store::erasure::ErasurePhase;
use reqwest::Method;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::{AppServer, TestApp, bearer};

const CREATE: &str = "mutation($s: ID!, $m: [MessageInput!]!) {
  createMessages(workspaceId: \"ws\", sessionId: $s, messages: $m) { id seqInSession } }";

/// Writes `(peer, content)` messages to `session`; returns their public ids.
async fn say(app: &TestApp, session: &str, messages: &[(&str, &str)]) -> Vec<String> {
    let m = messages
        .iter()
        .map(|(p, c)| json!({"peerId": p, "content": c}));
    app.create_messages("ws", session, m).await
}

/// An explicit conclusion of `observer` about `observed`; returns its id.
async fn fact(app: &TestApp, observer: &str, observed: &str, content: &str) -> String {
    let d = app
        .ok(
            "mutation($c: [ConclusionInput!]!) { createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }",
            json!({"c": [{"content": content, "observerId": observer, "observedId": observed}]}),
        )
        .await;
    d["createConclusions"][0]["id"].as_str().unwrap().to_owned()
}

/// A derived conclusion citing `sources`; returns its id.
async fn derive(
    app: &TestApp,
    observer: &str,
    observed: &str,
    content: &str,
    sources: &[&str],
) -> String {
    let d = app
        .ok(
            "mutation($i: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: \"ws\", input: $i) { id } }",
            json!({"i": {"content": content, "observerId": observer, "observedId": observed,
                          "level": "DEDUCTIVE", "sourceIds": sources}}),
        )
        .await;
    d["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Records that conclusion `c` was drawn from message `m` (as the deriver does).
async fn link(app: &TestApp, c: &str, m: &str) {
    app.store
        .db()
        .execute_unprepared(&format!(
            "INSERT INTO conclusion_messages (conclusion_id, message_id) \
             SELECT '{c}', id FROM messages WHERE public_id = '{m}'"
        ))
        .await
        .unwrap();
}

async fn exists(app: &TestApp, conclusion: &str) -> bool {
    app.sql_i64(&format!(
        "SELECT count(*) FROM conclusions WHERE id = '{conclusion}'"
    ))
    .await
        == 1
}

async fn sources(app: &TestApp, conclusion: &str) -> Vec<String> {
    app.sql_one::<Option<Vec<String>>>(&format!(
        "SELECT source_ids FROM conclusions WHERE id = '{conclusion}'"
    ))
    .await
    .unwrap_or_default()
}

/// No conclusion cites a conclusion or a message that does not exist.
async fn no_dangling_citation(app: &TestApp) {
    let dangling = app
        .sql_i64(
            "SELECT count(*) FROM conclusions c, unnest(c.source_ids) AS s(id) \
             WHERE NOT EXISTS (SELECT 1 FROM conclusions p WHERE p.id = s.id)",
        )
        .await;
    assert_eq!(dangling, 0, "a conclusion cites a conclusion that is gone");
}

const DELETE_MESSAGE: &str = "mutation($id: ID!) {
  deleteMessage(workspaceId: \"ws\", id: $id) { messages conclusions } }";

#[tokio::test]
async fn deleting_a_message_deletes_what_it_alone_supported_transitively_and_unlinks_the_rest() {
    let app = TestApp::new().await;
    let m = say(
        &app,
        "s",
        &[("alice", "I grew up in Lyon"), ("alice", "I moved to Oslo")],
    )
    .await;
    let only_m1 = fact(&app, "alice", "alice", "alice grew up in Lyon").await;
    let both = fact(&app, "alice", "alice", "alice has lived in two countries").await;
    link(&app, &only_m1, &m[0]).await;
    link(&app, &both, &m[0]).await;
    link(&app, &both, &m[1]).await;
    let stated = fact(&app, "alice", "alice", "alice likes tea").await;
    let from_lyon = derive(&app, "alice", "alice", "alice speaks French", &[&only_m1]).await;
    let deeper = derive(
        &app,
        "alice",
        "alice",
        "alice may read Proust",
        &[&from_lyon],
    )
    .await;
    let mixed = derive(
        &app,
        "alice",
        "alice",
        "alice is well travelled",
        &[&only_m1, &both],
    )
    .await;
    let with_tea = derive(
        &app,
        "alice",
        "alice",
        "alice is French and likes tea",
        &[&from_lyon, &stated],
    )
    .await;

    let d = app.ok(DELETE_MESSAGE, json!({"id": m[0]})).await;
    assert_eq!(d["deleteMessage"], json!({"messages": 1, "conclusions": 3}));

    assert!(!exists(&app, &only_m1).await, "its only premise is gone");
    assert!(
        !exists(&app, &from_lyon).await,
        "its only premise went with the message"
    );
    assert!(!exists(&app, &deeper).await, "the cascade is transitive");
    assert!(
        exists(&app, &both).await,
        "another message still supports it"
    );
    assert_eq!(
        app.sql_i64(&format!(
            "SELECT count(*) FROM conclusion_messages WHERE conclusion_id = '{both}'"
        ))
        .await,
        1,
        "it lost the edge to the erased message only"
    );
    assert_eq!(
        sources(&app, &mixed).await,
        vec![both.clone()],
        "the edge goes, the rest stays"
    );
    assert_eq!(sources(&app, &with_tea).await, vec![stated.clone()]);
    assert!(
        exists(&app, &stated).await,
        "a stated fact has no premise to lose"
    );
    no_dangling_citation(&app).await;

    let (code, _) = app.err(DELETE_MESSAGE, json!({"id": m[0]})).await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn soft_deleted_conclusions_are_pruned_like_live_ones_and_still_count_as_premises() {
    let app = TestApp::new().await;
    let m = say(&app, "s", &[("alice", "I keep bees")]).await;
    let bees = fact(&app, "alice", "alice", "alice keeps bees").await;
    link(&app, &bees, &m[0]).await;
    let honey = derive(&app, "alice", "alice", "alice has honey", &[&bees]).await;
    let stated = fact(&app, "alice", "alice", "alice likes tea").await;
    let tea = derive(
        &app,
        "alice",
        "alice",
        "alice has honey in her tea",
        &[&stated],
    )
    .await;
    for id in [&honey, &stated] {
        app.ok(
            "mutation($id: ID!) { deleteConclusion(workspaceId: \"ws\", id: $id) }",
            json!({"id": id}),
        )
        .await;
    }
    app.ok(DELETE_MESSAGE, json!({"id": m[0]})).await;
    assert!(
        !exists(&app, &honey).await,
        "a soft-deleted row drawn only from it is erased for good"
    );
    assert_eq!(
        sources(&app, &tea).await,
        vec![stated],
        "a soft-deleted premise still exists"
    );
}

#[tokio::test]
async fn an_erased_seq_is_never_given_to_another_message() {
    let app = TestApp::new().await;
    let m = say(&app, "s", &[("alice", "one"), ("alice", "two")]).await;
    app.ok(DELETE_MESSAGE, json!({"id": m[1]})).await;
    let d = app
        .ok(
            CREATE,
            json!({"s": "s", "m": [{"peerId": "alice", "content": "three"}]}),
        )
        .await;
    assert_eq!(d["createMessages"][0]["seqInSession"], 3);
}

#[tokio::test]
async fn deleting_a_session_deletes_conclusions_only_its_messages_supported() {
    let app = TestApp::new().await;
    let here = say(&app, "s", &[("alice", "I play the oboe")]).await;
    let there = say(&app, "t", &[("alice", "I play in an orchestra")]).await;
    let oboe = fact(&app, "alice", "alice", "alice plays the oboe").await;
    link(&app, &oboe, &here[0]).await;
    let music = fact(&app, "alice", "alice", "alice is a musician").await;
    link(&app, &music, &here[0]).await;
    link(&app, &music, &there[0]).await;
    let reed = derive(&app, "alice", "alice", "alice buys reeds", &[&oboe]).await;
    app.ok(
        "mutation { deleteSession(workspaceId: \"ws\", id: \"s\") }",
        json!({}),
    )
    .await;
    assert!(!exists(&app, &oboe).await);
    assert!(!exists(&app, &reed).await);
    assert!(exists(&app, &music).await);
    no_dangling_citation(&app).await;
}

#[tokio::test]
async fn the_search_statistics_forget_a_word_no_message_holds_any_more() {
    let app = TestApp::new().await;
    let m = say(
        &app,
        "s",
        &[
            ("alice", "my xylophone is blue"),
            ("bob", "the sky is blue"),
        ],
    )
    .await;
    let lexemes =
        |w: &'static str| format!("SELECT count(*) FROM search_terms WHERE lexeme = '{w}'");
    assert_eq!(app.sql_i64(&lexemes("xylophon")).await, 1);
    app.ok(DELETE_MESSAGE, json!({"id": m[0]})).await;
    assert_eq!(
        app.sql_i64(&lexemes("xylophon")).await,
        0,
        "the row is gone, not at zero"
    );
    assert_eq!(
        app.sql_i64("SELECT docs FROM search_terms WHERE lexeme = 'blue'")
            .await,
        1,
        "a word another message holds is counted down"
    );
    assert_eq!(app.sql_i64("SELECT docs FROM search_corpus").await, 1);
}

const ERASE: &str = "mutation($p: ID!, $k: Boolean = false) {
  erasePeer(workspaceId: \"ws\", peerId: $p, keepObserved: $k) { id phase done messagesTotal } }";
const JOB: &str = "query($id: ID!) { workspace(id: \"ws\") { erasureJob(id: $id) {
  id peerId phase done messagesTotal messagesErased conclusionsErased finishedAt } } }";

/// Starts erasing `peer` through GraphQL and polls its job until it is done.
async fn erase_through_graphql(app: &TestApp, peer: &str, keep_observed: bool) -> Value {
    let d = app.ok(ERASE, json!({"p": peer, "k": keep_observed})).await;
    let id = d["erasePeer"]["id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let job = app.ok(JOB, json!({"id": id})).await["workspace"]["erasureJob"].clone();
        if job["done"] == json!(true) {
            return job;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the erasure did not finish");
}

const SEARCH: &str = "query($q: String!) { workspace(id: \"ws\") {
  search(query: $q, limit: 20) { ... on MessageHits { results { peerId content } } } } }";

#[tokio::test]
async fn an_erased_peer_is_found_by_no_search_and_left_in_no_table() {
    let app = TestApp::with_embedder().await;
    say(
        &app,
        "s",
        &[
            ("alice", "my xylophone collection fills the attic"),
            ("bob", "tell me about the attic"),
            ("alice", "I tune each xylophone every spring"),
        ],
    )
    .await;
    let about_alice = fact(&app, "bob", "alice", "alice collects xylophones").await;
    let bobs_own = fact(&app, "bob", "bob", "bob is curious").await;
    let alice_on_bob = fact(&app, "alice", "bob", "bob asks questions").await;
    let guess = derive(&app, "bob", "alice", "alice likes music", &[&about_alice]).await;
    for (observer, observed) in [("bob", "alice"), ("alice", "bob"), ("bob", "bob")] {
        app.store
            .set_peer_card(
                "ws",
                observer,
                observed,
                vec![format!("{observed} seen by {observer}")],
            )
            .await
            .unwrap();
    }
    // Queued derivation work for and about alice (the queue fills only with an LLM configured).
    app.store
        .db()
        .execute_unprepared(
            "INSERT INTO deriver_units (workspace_name, session_name, observer, observed, pending_tokens, oldest_at) \
             VALUES ('ws', 's', 'alice', 'alice', 10, now()), ('ws', 's', 'bob', 'alice', 10, now()); \
             INSERT INTO deriver_items (unit_id, message_id, seq_in_session, token_count) \
             SELECT u.id, m.id, m.seq_in_session, 5 FROM deriver_units u \
             JOIN messages m ON m.peer_name = u.observed",
        )
        .await
        .unwrap();

    let job = erase_through_graphql(&app, "alice", false).await;
    assert_eq!(job["peerId"], "alice");
    assert_eq!(job["phase"], "DONE");
    assert_eq!(job["messagesTotal"], 2);
    assert_eq!(job["messagesErased"], 2);
    assert!(job["finishedAt"].is_string());

    // Full text: the word is found nowhere.
    let hits = app.ok(SEARCH, json!({"q": "xylophone"})).await;
    let results = hits["workspace"]["search"]["results"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        results.iter().all(
            |r| r["peerId"] != "alice" && !r["content"].as_str().unwrap().contains("xylophone")
        ),
        "{results:?}"
    );
    // Vectors: the nearest messages to what alice said are others'.
    let hits = app
        .ok(
            SEARCH,
            json!({"q": "a collection of xylophones in the attic"}),
        )
        .await;
    let results = hits["workspace"]["search"]["results"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!results.is_empty(), "bob's message is still found");
    assert!(results.iter().all(|r| r["peerId"] == "bob"), "{results:?}");

    // The tables themselves.
    for (what, sql) in [
        (
            "messages",
            "SELECT count(*) FROM messages WHERE peer_name = 'alice' OR content ILIKE '%xylophone%'",
        ),
        (
            "full-text index",
            "SELECT count(*) FROM messages WHERE content_tsv @@ to_tsquery('english', 'xylophone | alice')",
        ),
        (
            "term statistics",
            "SELECT count(*) FROM search_terms WHERE lexeme IN ('xylophon', 'alic', 'alice', 'tune')",
        ),
        (
            "conclusions",
            "SELECT count(*) FROM conclusions WHERE observer = 'alice' OR observed = 'alice' OR content ILIKE '%xylophone%'",
        ),
        (
            "conclusion links",
            "SELECT count(*) FROM conclusion_messages",
        ),
        (
            "queue units",
            "SELECT count(*) FROM deriver_units WHERE observer = 'alice' OR observed = 'alice'",
        ),
        ("queue items", "SELECT count(*) FROM deriver_items"),
        (
            "memberships",
            "SELECT count(*) FROM session_peers WHERE peer_name = 'alice'",
        ),
        ("peer", "SELECT count(*) FROM peers WHERE name = 'alice'"),
        (
            "cards about her",
            "SELECT count(*) FROM peers WHERE internal_metadata->'peer_cards' ? 'alice'",
        ),
    ] {
        assert_eq!(app.sql_i64(sql).await, 0, "{what} still hold alice's data");
    }
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM search_terms WHERE lexeme = 'attic'")
            .await,
        1,
        "bob's words stay counted"
    );
    assert!(!exists(&app, &guess).await);
    assert!(
        !exists(&app, &alice_on_bob).await,
        "by default what she concluded goes too"
    );
    assert!(exists(&app, &bobs_own).await);
    assert_eq!(
        app.store.peer_card("ws", "bob", "bob").await.unwrap(),
        Some(vec!["bob seen by bob".to_owned()])
    );
    no_dangling_citation(&app).await;
}

#[tokio::test]
async fn keep_observed_hands_what_the_peer_concluded_about_others_to_them() {
    let app = TestApp::new().await;
    say(
        &app,
        "s",
        &[("alice", "hi"), ("bob", "I sail"), ("carol", "ahoy")],
    )
    .await;
    let sails = fact(&app, "alice", "bob", "bob sails").await;
    let boat = derive(&app, "alice", "bob", "bob owns a boat", &[&sails]).await;
    // bob already holds the same derived content: alice's copy merges into his.
    let bobs_sails = fact(&app, "bob", "bob", "bob sails weekly").await;
    let bobs_boat = derive(&app, "bob", "bob", "bob owns a boat", &[&bobs_sails]).await;
    let cites_boat = derive(&app, "carol", "bob", "bob needs a harbour", &[&boat]).await;
    let about_alice = fact(&app, "bob", "alice", "alice says hi").await;

    erase_through_graphql(&app, "alice", true).await;

    assert!(!exists(&app, &about_alice).await);
    assert_eq!(
        app.sql_one::<String>(&format!(
            "SELECT observer FROM conclusions WHERE id = '{sails}'"
        ))
        .await,
        "bob"
    );
    assert_eq!(
        app.sql_i64(&format!(
            "SELECT count(*) FROM conclusions WHERE id = '{sails}' AND embedding IS NULL"
        ))
        .await,
        1,
        "its vector was made from a text naming alice"
    );
    assert!(!exists(&app, &boat).await, "merged into bob's own");
    assert_eq!(
        app.sql_i64(&format!(
            "SELECT times_derived::bigint FROM conclusions WHERE id = '{bobs_boat}'"
        ))
        .await,
        2
    );
    assert_eq!(sources(&app, &cites_boat).await, vec![bobs_boat]);
    no_dangling_citation(&app).await;
}

#[tokio::test]
async fn a_peers_erasure_runs_in_batches_and_resumes_after_a_crash() {
    let app = TestApp::new().await;
    let many: Vec<(&str, String)> = (0..25)
        .map(|i| ("alice", format!("note number {i}")))
        .collect();
    let borrowed: Vec<(&str, &str)> = many.iter().map(|(p, c)| (*p, c.as_str())).collect();
    say(&app, "s", &borrowed).await;
    say(&app, "s", &[("bob", "a note of bob's")]).await;
    let job = app
        .store
        .start_peer_erasure("ws", "alice", false)
        .await
        .unwrap();
    assert_eq!(job.messages_total, 25);

    // Three steps of 10, then the process "dies": the job is left half done.
    let mut last = job.clone();
    for _ in 0..3 {
        last = app.store.erasure_step(&job.id, 10).await.unwrap();
    }
    assert_eq!(last.phase, ErasurePhase::Messages);
    assert_eq!(last.messages_erased, 20);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages WHERE peer_name = 'alice'")
            .await,
        5,
        "each step committed its batch"
    );

    // Starting again finds the unfinished job and continues it.
    let again = app
        .store
        .start_peer_erasure("ws", "alice", false)
        .await
        .unwrap();
    assert_eq!(again.id, job.id);
    let done = app.store.run_erasure(&again.id, 10, &()).await.unwrap();
    assert_eq!(done.phase, ErasurePhase::Done);
    assert_eq!(done.messages_erased, 25);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages WHERE peer_name = 'alice'")
            .await,
        0
    );
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 1);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM peers WHERE name = 'alice'")
            .await,
        0
    );

    // A done job stays done; a new one needs the peer to exist.
    assert_eq!(
        app.store.erasure_step(&job.id, 10).await.unwrap().phase,
        ErasurePhase::Done
    );
    let (code, _) = app.err(ERASE, json!({"p": "alice"})).await;
    assert_eq!(code, "NOT_FOUND");
}

#[tokio::test]
async fn peer_and_session_keys_cannot_erase_through_graphql_or_rest() {
    let app = TestApp::with_auth().await;
    let admin = bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    });
    let m = app
        .exec_as(
            Some(&admin),
            CREATE,
            json!({"s": "s", "m": [{"peerId": "alice", "content": "secret"}]}),
        )
        .await["data"]["createMessages"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ws = |peer: Option<&str>, session: Option<&str>| {
        bearer(KeySpec {
            workspace: Some("ws".into()),
            peer: peer.map(Into::into),
            session: session.map(Into::into),
            ..KeySpec::default()
        })
    };
    for key in [ws(Some("alice"), None), ws(None, Some("s"))] {
        for (doc, vars) in [
            (DELETE_MESSAGE, json!({"id": m})),
            (ERASE, json!({"p": "alice"})),
        ] {
            let resp = app.exec_as(Some(&key), doc, vars).await;
            assert_eq!(
                resp["errors"][0]["extensions"]["code"], "FORBIDDEN",
                "{resp}"
            );
        }
    }

    // Honcho's REST API has no route that deletes a peer or a message: none is added, for any key.
    let server = AppServer::start(app).await;
    for key in [ws(Some("alice"), None), ws(None, Some("s")), ws(None, None)] {
        for path in [
            "/v3/workspaces/ws/peers/alice".to_owned(),
            format!("/v3/workspaces/ws/sessions/s/messages/{m}"),
        ] {
            let status = server
                .client
                .request(Method::DELETE, format!("{}{path}", server.base))
                .header("Authorization", &key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert!(status == 404 || status == 405, "DELETE {path}: {status}");
        }
    }
    assert_eq!(server.app.sql_i64("SELECT count(*) FROM messages").await, 1);
    assert_eq!(
        server
            .app
            .sql_i64("SELECT count(*) FROM peers WHERE name = 'alice'")
            .await,
        1
    );
}

#[tokio::test]
async fn an_erasure_makes_every_process_drop_the_rows_its_events_cached() {
    use honcho_graphql::store::events::{Event, EventBus};
    let app = TestApp::new().await;
    let bus = EventBus::start(&app._db.url(), 16).await.unwrap();
    let mut events = bus.subscribe();
    let m = say(&app, "s", &[("alice", "my secret recipe")]).await;
    let Ok(Event::Messages(batch)) = events.recv().await else {
        panic!("expected the messages' event");
    };
    assert_eq!(
        batch.rows(&app.store).await.unwrap().len(),
        1,
        "loaded and cached"
    );
    let before = bus.notices_received();
    app.ok(DELETE_MESSAGE, json!({"id": m[0]})).await;
    let started = std::time::Instant::now();
    while bus.notices_received() == before {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no erasure notice"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The listener drops the cache before it counts the next notice: give it that moment.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        batch.rows(&app.store).await.unwrap().is_empty(),
        "a subscriber reaching the old event loads it again and finds nothing"
    );
}

#[tokio::test]
async fn the_erase_command_erases_a_peer_in_batches_and_reports_it() {
    let app = TestApp::new().await;
    let notes: Vec<String> = (0..7).map(|i| format!("note {i}")).collect();
    let mine: Vec<(&str, &str)> = notes.iter().map(|n| ("alice", n.as_str())).collect();
    say(&app, "s", &mine).await;
    say(&app, "s", &[("bob", "hello")]).await;
    let out = crate::harness::run_binary(
        &[
            "erase",
            "--workspace",
            "ws",
            "--peer",
            "alice",
            "--batch",
            "3",
        ],
        &app._db.url(),
        &[("HONCHO_EMBEDDER", "none")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("erased peer alice: 7 messages"), "{stdout}");
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 1);
    assert_eq!(
        app.sql_i64(
            "SELECT count(*) FROM erasure_jobs WHERE phase = 'done' AND messages_erased = 7"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn erased_messages_and_conclusions_take_their_webhook_deliveries_with_them() {
    let app = TestApp::new().await;
    say(&app, "s", &[("alice", "hello")]).await;
    app.store
        .db()
        .execute_unprepared(
            "INSERT INTO webhook_endpoints (id, workspace_name, url) \
             VALUES ('endpoint-1', 'ws', 'http://127.0.0.1:9/hook')",
        )
        .await
        .unwrap();
    let ids = say(
        &app,
        "s",
        &[("alice", "my secret is mauve"), ("bob", "kept")],
    )
    .await;
    let secret = fact(&app, "alice", "alice", "alice's secret is mauve").await;
    link(&app, &secret, &ids[0]).await;
    fact(&app, "bob", "bob", "bob keeps things").await;
    let mauve = "SELECT count(*) FROM webhook_deliveries WHERE body LIKE '%mauve%'";
    assert_eq!(app.sql_i64(mauve).await, 2, "queued with the rows");
    let d = app.ok(DELETE_MESSAGE, json!({"id": ids[0]})).await;
    assert_eq!(d["deleteMessage"], json!({"messages": 1, "conclusions": 1}));
    assert_eq!(app.sql_i64(mauve).await, 0);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM webhook_deliveries").await,
        2,
        "bob's message and conclusion keep theirs"
    );
}
