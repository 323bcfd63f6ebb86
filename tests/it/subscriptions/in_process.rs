//! Subscriptions through the schema (`execute_stream`, no network): what a subscriber sees, the
//! bus's lag and gap handling, conclusions across instances.

use super::*;

#[tokio::test]
async fn a_subscriber_sees_exactly_the_new_messages_of_its_session_in_order() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    a.create("chat", msgs("alice", &["before"])).await;
    // Let the earlier notice pass before subscribing.
    wait_until("the first notice", Duration::from_secs(5), || {
        a.bus.notices_received() == 1
    })
    .await;
    let mut sub = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;

    a.create("chat", msgs("alice", &["one", "two", "three"]))
        .await;
    a.create("other", msgs("bob", &["elsewhere"])).await;
    // Concurrent writers to the subscribed session: seqs must still arrive in order.
    create_concurrently(&a.schema, 8, |w| msgs(&format!("p{w}"), &["x", "y"])).await;
    a.create("chat", msgs("bob", &["last"])).await;

    let results = take(&mut sub, 20, Duration::from_secs(10)).await;
    assert_eq!(seqs(&results), (2..=21).collect::<Vec<_>>());
    let ms = created(&results);
    assert_eq!(ms[0]["content"], "one");
    assert_eq!(ms[19]["content"], "last");
    assert!(ms.iter().all(|m| m["sessionId"] == "chat"));
    // Nested fields resolve as in queries.
    assert_eq!(ms[0]["peer"], json!({"id": "alice"}));
    assert_eq!(ms[19]["peer"], json!({"id": "bob"}));
    assert_eq!(ms[0]["session"]["id"], "chat");
    assert_eq!(
        ms[19]["session"]["peers"].as_array().unwrap().len(),
        10,
        "alice, bob and 8 writers are members"
    );
    assert_eq!(
        ms[0]["context"],
        json!([{"seqInSession": 1}, {"seqInSession": 2}])
    );
    assert_quiet(&mut sub, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_peer_filter_spans_the_workspace_and_nothing_else() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let mut sub = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", peerId: \"alice\") { content sessionId } }",
            json!({}),
        )
        .await;
    a.create(
        "s1",
        json!([{"peerId": "alice", "content": "a1"}, {"peerId": "bob", "content": "b1"}]),
    )
    .await;
    a.create("s2", msgs("bob", &["b2"])).await;
    a.create("s2", msgs("alice", &["a2"])).await;
    let other = a
        .post(
            CREATE,
            json!({"w": "elsewhere", "s": "s1", "m": msgs("alice", &["not this workspace"])}),
        )
        .await;
    assert!(other.get("errors").is_none());
    let got = take(&mut sub, 2, Duration::from_secs(10)).await;
    let got: Vec<(&str, &str)> = created(&got)
        .iter()
        .map(|m| {
            (
                m["content"].as_str().unwrap(),
                m["sessionId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("a1", "s1"), ("a2", "s2")]);
    assert_quiet(&mut sub, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn nested_fields_cost_one_statement_per_kind_per_batch_for_all_subscribers() {
    let app = TestApp::new().await;
    let reader = Instance::counted(&app).await;
    let writer = Instance::start(&app, 1024).await;
    let query = "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") {
        seqInSession peer { id } session { id } } }";
    let mut subs = Vec::new();
    for _ in 0..5 {
        subs.push(reader.subscribe(query, json!({})).await);
    }
    app.take_statements();
    writer
        .create(
            "chat",
            json!([{"peerId": "alice", "content": "a"}, {"peerId": "bob", "content": "b"}]),
        )
        .await;
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut sub| {
            tokio::spawn(async move { take(&mut sub, 2, Duration::from_secs(10)).await })
        })
        .collect();
    for r in readers {
        let got = r.await.unwrap();
        let ms = created(&got);
        assert_eq!(ms[0]["peer"], json!({"id": "alice"}));
        assert_eq!(ms[1]["peer"], json!({"id": "bob"}));
        assert_eq!(ms[1]["session"], json!({"id": "chat"}));
    }
    assert_eq!(
        app.take_statements(),
        3,
        "rows, peers and sessions of the batch, once for five subscribers"
    );
}

#[tokio::test]
async fn a_rolled_back_batch_emits_nothing() {
    let app = TestApp::new().await;
    // Rejects a message at COMMIT, after createMessages has run pg_notify in its transaction.
    app.store
        .db()
        .execute_unprepared(
            "CREATE FUNCTION reject_marked() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN IF NEW.content = 'reject at commit' THEN RAISE EXCEPTION 'rejected'; END IF;
             RETURN NULL; END $$;
             CREATE CONSTRAINT TRIGGER reject_marked AFTER INSERT ON messages
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION reject_marked();",
        )
        .await
        .unwrap();
    let a = Instance::start(&app, 1024).await;
    let mut sub = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;

    // One invalid message in the batch: refused before anything is written.
    let too_long = "x".repeat(25_001);
    let resp = a
        .post(
            CREATE,
            json!({"w": "ws", "s": "chat", "m": [{"peerId": "a", "content": "ok"}, {"peerId": "a", "content": too_long}]}),
        )
        .await;
    assert_eq!(resp["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    // One message the database rejects at commit: the transaction had notified, then rolled back.
    let resp = a
        .post(
            CREATE,
            json!({"w": "ws", "s": "chat", "m": msgs("a", &["fine", "reject at commit"])}),
        )
        .await;
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "INTERNAL_SERVER_ERROR",
        "{resp}"
    );
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
    assert_quiet(&mut sub, Duration::from_millis(500)).await;
    assert_eq!(a.bus.notices_received(), 0, "no notification was delivered");

    a.create("chat", msgs("a", &["kept"])).await;
    let got = take(&mut sub, 1, Duration::from_secs(10)).await;
    assert_eq!(
        seqs(&got),
        [1],
        "the rolled-back batches left no seqs behind"
    );
    assert_eq!(a.bus.notices_received(), 1);
}

#[tokio::test]
async fn a_lagging_subscriber_ends_with_events_missed_and_slows_nobody() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 4).await;
    let mut slow = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    let mut fast = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") { seqInSession } }",
            json!({}),
        )
        .await;
    // The fast one is read as events come; the writer waits for it (a buffer of 4 leaves no room
    // for a busy test machine), never for the slow one, which is not polled at all.
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let fast_reader = tokio::spawn(async move {
        for _ in 0..10 {
            let got = take(&mut fast, 1, Duration::from_secs(10)).await;
            seen_tx.send(seqs(&got)[0]).unwrap();
        }
    });
    let mut fast_seqs = Vec::new();
    for i in 0..10 {
        a.create("chat", msgs("a", &[&format!("m{i}")])).await;
        fast_seqs.push(
            tokio::time::timeout(Duration::from_secs(10), seen.recv())
                .await
                .expect("the fast subscriber keeps up")
                .unwrap(),
        );
    }
    fast_reader.await.unwrap();
    assert_eq!(fast_seqs, (1..=10).collect::<Vec<_>>());
    wait_until("ten notices", Duration::from_secs(5), || {
        a.bus.notices_received() == 10
    })
    .await;

    let got = take(&mut slow, 1, Duration::from_secs(5)).await;
    let err = &got[0]["errors"][0];
    assert_eq!(err["extensions"]["code"], "EVENTS_MISSED", "{got:?}");
    assert_eq!(err["extensions"]["reason"], "lagged");
    assert_eq!(
        err["extensions"]["dropped"], 6,
        "a buffer of 4 kept the last 4 of 10"
    );
    assert!(err["message"].as_str().unwrap().contains("resubscribe"));
    let end = tokio::time::timeout(Duration::from_secs(5), slow.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the subscription ends after the error");
}

#[tokio::test]
async fn the_listener_reconnects_and_open_subscriptions_learn_of_the_gap() {
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let mut before = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    let killed = app
        .sql_i64(&format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{LISTENER_APPLICATION_NAME}' AND datname = current_database()"
        ))
        .await;
    assert_eq!(killed, 1, "one listener connection per instance");

    let got = take(&mut before, 1, Duration::from_secs(15)).await;
    let err = &got[0]["errors"][0];
    assert_eq!(err["extensions"]["code"], "EVENTS_MISSED", "{got:?}");
    assert_eq!(err["extensions"]["reason"], "listener_reconnected");
    assert!(a.bus.reconnects() >= 1 && a.bus.is_listening());

    let mut after = a.subscribe(SUB, json!({"w": "ws", "s": "chat"})).await;
    a.create("chat", msgs("a", &["after the gap"])).await;
    let got = take(&mut after, 1, Duration::from_secs(10)).await;
    assert_eq!(created(&got)[0]["content"], "after the gap");
}

#[tokio::test]
async fn a_subscription_with_an_out_of_range_context_is_refused_before_it_starts() {
    let app = TestApp::new().await;
    let inst = Instance::start(&app, 1024).await;
    let req = Request::new(
        "subscription { messageCreated(workspaceId: \"ws\") { id context(after: 2147483647) { id } } }",
    );
    let mut stream = graphql::execute_stream(&inst.schema, req, None);
    let resp = serde_json::to_value(stream.next().await.unwrap()).unwrap();
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{resp}"
    );
    assert_eq!(inst.bus.subscribers(), 0, "it never listened");
}

#[tokio::test]
async fn without_an_event_bus_subscriptions_say_so() {
    let app = TestApp::new().await;
    let req = Request::new("subscription { messageCreated(workspaceId: \"ws\") { id } }");
    let mut stream = graphql::execute_stream(&app.schema, req, None);
    let resp = serde_json::to_value(stream.next().await.unwrap()).unwrap();
    assert_eq!(
        resp["errors"][0]["extensions"]["code"],
        "INTERNAL_SERVER_ERROR"
    );
    assert!(
        resp["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not enabled"),
        "{resp}"
    );
}

#[tokio::test]
async fn conclusion_created_sees_new_conclusions_of_its_observer_across_instances() {
    let app = TestApp::new().await;
    let a = Instance::counted(&app).await;
    let b = Instance::start(&app, 1024).await;
    for p in ["alice", "bob", "carol"] {
        let r = b
            .post(
                "mutation($p: ID!) { getOrCreatePeer(workspaceId: \"ws\", id: $p) { id } }",
                json!({"p": p}),
            )
            .await;
        assert!(r.get("errors").is_none(), "{r}");
    }
    let query = "subscription { conclusionCreated(workspaceId: \"ws\", observerId: \"alice\") {
        content level timesDerived observer { id } observed { id } sources { content } } }";
    let mut subs = vec![
        a.subscribe(query, json!({})).await,
        a.subscribe(query, json!({})).await,
    ];
    app.take_statements();
    const CREATE_C: &str = "mutation($c: [ConclusionInput!]!) {
        createConclusions(workspaceId: \"ws\", conclusions: $c) { id } }";
    let created = b
        .post(
            CREATE_C,
            json!({"c": [
                {"content": "likes tea", "observerId": "alice", "observedId": "bob"},
                {"content": "not alice's", "observerId": "carol", "observedId": "bob"},
                {"content": "likes cake", "observerId": "alice", "observedId": "carol"}]}),
        )
        .await;
    assert!(created.get("errors").is_none(), "{created}");
    let tea = created["data"]["createConclusions"][0]["id"].clone();
    for sub in &mut subs {
        let got = take(sub, 2, Duration::from_secs(10)).await;
        let c: Vec<&Value> = got
            .iter()
            .map(|r| {
                assert!(r.get("errors").is_none(), "{r}");
                &r["data"]["conclusionCreated"]
            })
            .collect();
        assert_eq!(c[0]["content"], "likes tea");
        assert_eq!(c[0]["observer"], json!({"id": "alice"}));
        assert_eq!(c[0]["observed"], json!({"id": "bob"}));
        assert_eq!(c[1]["content"], "likes cake", "in creation order");
        assert_eq!(c[1]["observed"], json!({"id": "carol"}));
    }
    assert_eq!(
        app.take_statements(),
        2,
        "rows and peers of the batch, once for both subscribers"
    );

    // A derived conclusion is an event when first recorded, not when reinforced.
    const DERIVE: &str = "mutation($i: DerivedConclusionInput!) {
        recordDerivedConclusion(workspaceId: \"ws\", input: $i) { timesDerived } }";
    let input = json!({"i": {"content": "enjoys warm drinks", "observerId": "alice",
        "observedId": "bob", "level": "DEDUCTIVE", "sourceIds": [tea]}});
    for times in [1, 2] {
        let r = b.post(DERIVE, input.clone()).await;
        assert_eq!(
            r["data"]["recordDerivedConclusion"]["timesDerived"], times,
            "{r}"
        );
    }
    let got = take(&mut subs[0], 1, Duration::from_secs(10)).await;
    let c = &got[0]["data"]["conclusionCreated"];
    assert_eq!(c["content"], "enjoys warm drinks");
    assert_eq!(c["level"], "DEDUCTIVE");
    assert_eq!(c["sources"], json!([{"content": "likes tea"}]));
    assert_quiet(&mut subs[0], Duration::from_millis(300)).await;
}

#[tokio::test]
async fn peer_chat_streams_the_answer_piece_by_piece_and_completes_with_it() {
    use crate::fake_llm::{Chunk, FakeLlm, Reply};
    use std::sync::Arc;
    use tokio::sync::Notify;

    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let fake = FakeLlm::start(move |n, _| match n {
        1 => Reply::Stream(vec![
            Chunk::Content(" Alice"),
            Chunk::Wait(held.clone()),
            Chunk::Content(" hikes. "),
        ]),
        _ => Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(Duration::from_millis(100)),
            Chunk::Break,
        ]),
    })
    .await;
    let app = TestApp::new().await.with_llm(&fake.config());
    app.ok(
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "alice") { id } }"#,
        json!({}),
    )
    .await;
    let chat = |schema: &AppSchema, peer: &str| {
        let doc = format!(
            r#"subscription {{ peerChat(workspaceId: "ws", peerId: "{peer}",
                query: "What does alice do?", reasoningLevel: MINIMAL) {{ content }} }}"#
        );
        graphql::execute_stream(schema, Request::new(doc), None)
    };
    let piece = |v: &Value| v["data"]["peerChat"]["content"].clone();
    let limit = Duration::from_secs(10);

    let mut sub = chat(&app.schema, "alice");
    // The model holds the rest of its answer until this piece has come through.
    assert_eq!(piece(&take(&mut sub, 1, limit).await[0]), "Alice");
    gate.notify_one();
    assert_eq!(piece(&take(&mut sub, 1, limit).await[0]), " hikes.");
    let end = tokio::time::timeout(limit, sub.next()).await.unwrap();
    assert!(end.is_none(), "completes with the answer: {end:?}");
    assert_eq!(fake.requests()[0]["stream"], true);
    assert_eq!(fake.requests()[0]["max_tokens"], 512);

    // A model that breaks off: the pieces sent, then one error, then the end.
    let mut sub = chat(&app.schema, "alice");
    let got = take(&mut sub, 2, limit).await;
    assert_eq!(piece(&got[0]), "Alice");
    assert_eq!(
        got[1]["errors"][0]["extensions"]["code"], "SERVICE_UNAVAILABLE",
        "{got:?}"
    );
    assert!(
        tokio::time::timeout(limit, sub.next())
            .await
            .unwrap()
            .is_none()
    );

    // Before the model is asked: an unknown peer, or no LLM at all.
    let hits = fake.hits();
    let got = take(&mut chat(&app.schema, "nobody"), 1, limit).await;
    assert_eq!(got[0]["errors"][0]["extensions"]["code"], "NOT_FOUND");
    let without = graphql::build_schema(app.store.clone(), &Limits::default());
    let got = take(&mut chat(&without, "alice"), 1, limit).await;
    assert_eq!(
        got[0]["errors"][0]["extensions"]["code"], "SERVICE_UNAVAILABLE",
        "{got:?}"
    );
    assert_eq!(fake.hits(), hits, "the model was not asked");
}
