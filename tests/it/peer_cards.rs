//! Peer cards the deriver keeps, against the fake LLM: bounded, deduplicated and citing the
//! conclusions they came from; revised with what the model was shown; a client's card kept and
//! merged; and the configuration cascade of reasoning and peer cards (workspace, session,
//! message).

use std::sync::{Arc, Mutex};

use honcho_graphql::deriver::{BatchReport, Deriver};
use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply, at_once, deriving_on, prompts};
use crate::harness::{AppServer, TestApp};

/// A fake LLM whose explicit pass states `facts` about whoever is observed and whose reasoning
/// pass answers `reasoning()` (the answers can be changed between batches). Every reasoning
/// request is kept as (system, user, schema).
struct Script {
    facts: Mutex<Vec<String>>,
    reasoning: Mutex<Value>,
    seen: Mutex<Vec<(String, String, Value)>>,
}

async fn fake(script: Arc<Script>) -> Arc<FakeLlm> {
    FakeLlm::start(move |_, body| {
        let (system, user) = prompts(body);
        if system.contains("NEW messages") {
            let facts: Vec<Value> = script
                .facts
                .lock()
                .unwrap()
                .iter()
                .map(|f| json!({"content": f, "source_seqs": []}))
                .collect();
            return Reply::json(json!({ "facts": facts }));
        }
        let schema = body["response_format"]["json_schema"]["schema"].clone();
        script.seen.lock().unwrap().push((system, user, schema));
        Reply::json(script.reasoning.lock().unwrap().clone())
    })
    .await
}

fn script(facts: &[&str], reasoning: Value) -> Arc<Script> {
    Arc::new(Script {
        facts: Mutex::new(facts.iter().map(|f| f.to_string()).collect()),
        reasoning: Mutex::new(reasoning),
        seen: Mutex::new(Vec::new()),
    })
}

async fn app_with(fake: &FakeLlm) -> (TestApp, Arc<Deriver>) {
    deriving_on(TestApp::with_embedder().await, fake, at_once())
}

async fn drain(d: &Deriver) {
    while let Some(r) = d.run_once("test").await.unwrap() {
        assert!(
            matches!(r, BatchReport::Done { .. } | BatchReport::Summarized { .. }),
            "{r:?}"
        );
    }
}

/// alice alone says `content` in session `s`.
async fn alice_says(app: &TestApp, session: &str, content: &str) {
    app.ok(
        "mutation($s: ID!, $c: String!) { createMessages(workspaceId: \"w\", sessionId: $s, \
         messages: [{peerId: \"alice\", content: $c}]) { id } }",
        json!({"s": session, "c": content}),
    )
    .await;
}

/// alice's card of herself, entry by entry.
async fn card(app: &TestApp) -> Value {
    app.ok(
        "{ workspace(id: \"w\") { peer(id: \"alice\") { card { content origin sourceIds } } } }",
        json!({}),
    )
    .await["workspace"]["peer"]["card"]
        .clone()
}

fn contents(card: &Value) -> Vec<String> {
    card.as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["content"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The id of the live conclusion with this content.
async fn conclusion_id(app: &TestApp, content: &str) -> String {
    let data = app
        .ok(
            "{ workspace(id: \"w\") { conclusions(first: 100) { nodes { id content } } } }",
            json!({}),
        )
        .await;
    data["workspace"]["conclusions"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["content"] == content)
        .unwrap_or_else(|| panic!("no conclusion {content:?}: {data}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn entry(content: &str, ids: &[&str]) -> Value {
    json!({"entry": content, "source_ids": ids})
}

#[tokio::test]
async fn the_deriver_keeps_a_bounded_deduplicated_card_citing_its_conclusions() {
    let mut items = vec![
        entry("ATTRIBUTE: Lives in Paris", &["n1"]),
        entry("attribute:  lives in PARIS", &["n1"]),
        entry("ATTRIBUTE: Works as a nurse", &["n2", "not-shown"]),
        entry("TRAIT: Caring", &["n2"]),
        entry("ATTRIBUTE: Has a cat", &["not-shown"]),
        entry("IDENTITY: Name: Alice", &["n1", "n2"]),
    ];
    items.extend((0..50).map(|i| entry(&format!("ATTRIBUTE: Filler fact {i}"), &["n1"])));
    let s = script(
        &["Alice lives in Paris", "Alice works as a nurse"],
        json!({"conclusions": [], "card": items}),
    );
    let fake = fake(s.clone()).await;
    let (app, deriver) = app_with(&fake).await;
    alice_says(&app, "s", "I live in Paris and work as a nurse.").await;
    drain(&deriver).await;

    let (system, user, schema) = s.seen.lock().unwrap()[0].clone();
    assert!(system.contains("PEER CARD of alice"), "{system}");
    assert!(user.contains("PEER CARD now:\n(empty)"), "{user}");
    assert!(schema["properties"]["card"].is_object(), "{schema}");

    let card = card(&app).await;
    let lines = contents(&card);
    assert_eq!(lines.len(), 40, "bounded: {lines:?}");
    assert_eq!(
        lines[..3],
        [
            "ATTRIBUTE: Lives in Paris",
            "ATTRIBUTE: Works as a nurse",
            "IDENTITY: Name: Alice"
        ]
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("Caring") || l.contains("cat"))
    );
    let paris = conclusion_id(&app, "Alice lives in Paris").await;
    let nurse = conclusion_id(&app, "Alice works as a nurse").await;
    assert_eq!(card[0]["origin"], "DERIVER");
    assert_eq!(card[0]["sourceIds"], json!([paris]));
    assert_eq!(card[1]["sourceIds"], json!([nurse]));
    let mut both = vec![paris.clone(), nurse.clone()];
    both.sort();
    let mut cited: Vec<String> = serde_json::from_value(card[2]["sourceIds"].clone()).unwrap();
    cited.sort();
    assert_eq!(cited, both);

    // REST reads the same lines.
    let server = AppServer::start(app).await;
    let rest: Value = server
        .client
        .get(format!("{}/v3/workspaces/w/peers/alice/card", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["peer_card"], json!(lines));
}

#[tokio::test]
async fn the_next_batch_is_shown_the_card_and_revises_it() {
    let s = script(
        &["Alice lives in Paris"],
        json!({"conclusions": [], "card": [entry("ATTRIBUTE: Lives in Paris", &["n1"])]}),
    );
    let fake = fake(s.clone()).await;
    let (app, deriver) = app_with(&fake).await;
    alice_says(&app, "s", "I live in Paris.").await;
    drain(&deriver).await;
    let paris = conclusion_id(&app, "Alice lives in Paris").await;

    *s.facts.lock().unwrap() = vec!["Alice moved to Lyon".into()];
    // Paris is dropped, Lyon added; the unchanged entry without sources keeps its own.
    *s.reasoning.lock().unwrap() = json!({"conclusions": [], "card": [
        entry("ATTRIBUTE: Lives in Lyon", &["n1"]),
        entry("ATTRIBUTE: Speaks French", &[paris.as_str()]),
    ]});
    alice_says(&app, "s", "I just moved to Lyon.").await;
    drain(&deriver).await;
    let (_, user, _) = s.seen.lock().unwrap()[1].clone();
    assert!(
        user.contains(&format!(
            "- ATTRIBUTE: Lives in Paris (source_ids: {paris})"
        )),
        "{user}"
    );
    let lyon = conclusion_id(&app, "Alice moved to Lyon").await;
    let now = card(&app).await;
    assert_eq!(
        contents(&now),
        ["ATTRIBUTE: Lives in Lyon", "ATTRIBUTE: Speaks French"]
    );
    assert_eq!(now[0]["sourceIds"], json!([lyon]));
    assert_eq!(now[1]["sourceIds"], json!([paris]));

    // An answer that would empty the card, or has none, leaves it.
    *s.reasoning.lock().unwrap() = json!({"conclusions": [], "card": []});
    alice_says(&app, "s", "Still in Lyon.").await;
    drain(&deriver).await;
    *s.reasoning.lock().unwrap() = json!({"conclusions": []});
    alice_says(&app, "s", "Yes, Lyon.").await;
    drain(&deriver).await;
    assert_eq!(card(&app).await, now);

    // A cited conclusion deleted takes the entries that rested on it alone.
    app.ok(
        "mutation($id: ID!) { deleteConclusion(workspaceId: \"w\", id: $id) }",
        json!({"id": paris}),
    )
    .await;
    assert_eq!(contents(&card(&app).await), ["ATTRIBUTE: Lives in Lyon"]);
    // Erased for good with the message it came from: the line is gone from the database too.
    let first = app
        .ok(
            "{ workspace(id: \"w\") { session(id: \"s\") { messages(first: 1) { nodes { id } } } } }",
            json!({}),
        )
        .await["workspace"]["session"]["messages"]["nodes"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.ok(
        "mutation($id: ID!) { deleteMessage(workspaceId: \"w\", id: $id) { __typename } }",
        json!({"id": first}),
    )
    .await;
    let left = app
        .sql_i64("SELECT count(*) FROM peer_card_entries WHERE content LIKE '%French%'")
        .await;
    assert_eq!(left, 0);
    assert_eq!(contents(&card(&app).await), ["ATTRIBUTE: Lives in Lyon"]);
}

#[tokio::test]
async fn a_card_written_by_a_client_survives_the_deriver_and_merges_with_its_entries() {
    let s = script(
        &["Alice lives in Paris"],
        json!({"conclusions": [], "card": [
            entry("INSTRUCTION: call me  al", &["n1"]),
            entry("ATTRIBUTE: Lives in Paris", &["n1"]),
        ]}),
    );
    let fake = fake(s.clone()).await;
    let (app, deriver) = app_with(&fake).await;
    let server = AppServer::start(app).await;
    let put = |card: Value| {
        let client = server.client.clone();
        let url = format!("{}/v3/workspaces/w/peers/alice/card", server.base);
        async move {
            let resp = client
                .request(Method::PUT, url)
                .json(&json!({ "peer_card": card }))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Value>().await.unwrap()
        }
    };
    let app = &server.app;
    app.ok(
        "mutation { getOrCreatePeer(workspaceId: \"w\", id: \"alice\") { id } }",
        json!({}),
    )
    .await;
    put(json!(["INSTRUCTION: Call me Al", "Likes jazz"])).await;
    alice_says(app, "s", "I live in Paris.").await;
    drain(&deriver).await;
    let (_, user, _) = s.seen.lock().unwrap()[0].clone();
    assert!(
        user.contains("- KEPT INSTRUCTION: Call me Al\n- KEPT Likes jazz\n"),
        "{user}"
    );
    let merged = card(app).await;
    assert_eq!(
        contents(&merged),
        [
            "INSTRUCTION: Call me Al",
            "Likes jazz",
            "ATTRIBUTE: Lives in Paris"
        ]
    );
    assert_eq!(merged[0]["origin"], "CLIENT");
    assert_eq!(merged[0]["sourceIds"], json!([]));
    assert_eq!(merged[2]["origin"], "DERIVER");

    // The client writes the card back without its instruction: the deriver's entry it kept
    // stays the deriver's, with its source; what it left out is gone.
    let written = put(json!(["ATTRIBUTE: Lives in Paris", "Likes jazz"])).await;
    assert_eq!(
        written["peer_card"],
        json!(["Likes jazz", "ATTRIBUTE: Lives in Paris"])
    );
    let after = card(app).await;
    assert_eq!(after[1]["origin"], "DERIVER");
    assert_eq!(after[1]["sourceIds"], merged[2]["sourceIds"]);
}

async fn pending(app: &TestApp) -> i64 {
    app.ok(
        "{ workspace(id: \"w\") { deriverStatus { pending } } }",
        json!({}),
    )
    .await["workspace"]["deriverStatus"]["pending"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn reasoning_turns_off_by_workspace_session_and_message() {
    let s = script(&[], json!({"conclusions": []}));
    let fake = fake(s).await;
    let (app, _deriver) = app_with(&fake).await;
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"w\", configuration: {reasoning: {enabled: false}}) \
         { id } getOrCreateSession(workspaceId: \"w\", id: \"on\", \
         configuration: {reasoning: {enabled: true}}) { id } }",
        json!({}),
    )
    .await;
    alice_says(&app, "off", "nobody learns from this").await;
    assert_eq!(pending(&app).await, 0, "off for the workspace");
    alice_says(&app, "on", "the session turns it back on").await;
    assert_eq!(pending(&app).await, 1);
    app.ok(
        "mutation { createMessages(workspaceId: \"w\", sessionId: \"on\", messages: [\
           {peerId: \"alice\", content: \"private\", configuration: {reasoning: {enabled: false}}}, \
           {peerId: \"alice\", content: \"public\"}]) { id } }",
        json!({}),
    )
    .await;
    assert_eq!(
        pending(&app).await,
        2,
        "the first message turned it off for itself"
    );
    // Legacy key, and a message that turns it on in a workspace where it is off.
    app.ok(
        "mutation { updateSession(workspaceId: \"w\", id: \"on\", \
         configuration: {reasoning: null, deriver: {enabled: false}}) { id } \
         createMessages(workspaceId: \"w\", sessionId: \"off\", messages: [\
           {peerId: \"alice\", content: \"learn this one\", \
            configuration: {reasoning: {enabled: true}}}]) { id } }",
        json!({}),
    )
    .await;
    assert_eq!(pending(&app).await, 3);
    alice_says(&app, "on", "legacy off").await;
    assert_eq!(pending(&app).await, 3);
    let (code, message) = app
        .err(
            "mutation { createMessages(workspaceId: \"w\", sessionId: \"on\", messages: [\
               {peerId: \"alice\", content: \"x\", configuration: {reasoning: {enabled: 1}}}]) \
             { id } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("messages[0].configuration.reasoning.enabled"),
        "{message}"
    );
}

#[tokio::test]
async fn peer_card_creation_and_use_follow_the_workspace_then_session_configuration() {
    let s = script(
        &["Alice lives in Paris"],
        json!({"conclusions": [], "card": [entry("ATTRIBUTE: Lives in Paris", &["n1"])]}),
    );
    let fake = fake(s.clone()).await;
    let (app, deriver) = app_with(&fake).await;
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"w\", configuration: {peer_card: {create: false}}) \
         { id } getOrCreateSession(workspaceId: \"w\", id: \"blind\", \
         configuration: {peer_card: {create: true, use: false}}) { id } }",
        json!({}),
    )
    .await;
    alice_says(&app, "off", "I live in Paris.").await;
    drain(&deriver).await;
    let (system, user, schema) = s.seen.lock().unwrap()[0].clone();
    assert!(!system.contains("PEER CARD") && !user.contains("PEER CARD"));
    assert!(schema["properties"].get("card").is_none(), "{schema}");
    assert_eq!(card(&app).await, Value::Null, "nothing written");

    // Created but not shown: the model proposes, the entries already there stay.
    alice_says(&app, "blind", "I live in Paris.").await;
    drain(&deriver).await;
    assert_eq!(contents(&card(&app).await), ["ATTRIBUTE: Lives in Paris"]);
    *s.facts.lock().unwrap() = vec!["Alice works as a nurse".into()];
    *s.reasoning.lock().unwrap() = json!({"conclusions": [], "card": [
        entry("ATTRIBUTE: Works as a nurse", &["n1"])]});
    alice_says(&app, "blind", "I work as a nurse.").await;
    drain(&deriver).await;
    let (_, user, _) = s.seen.lock().unwrap().last().unwrap().clone();
    assert!(user.contains("PEER CARD: not shown"), "{user}");
    assert!(!user.contains("Lives in Paris"), "{user}");
    assert_eq!(
        contents(&card(&app).await),
        ["ATTRIBUTE: Lives in Paris", "ATTRIBUTE: Works as a nurse"]
    );

    // With reasoning off, no card is made whatever peer_card says.
    app.ok(
        "mutation { updateSession(workspaceId: \"w\", id: \"blind\", \
         configuration: {reasoning: {enabled: false}}) { id } }",
        json!({}),
    )
    .await;
    let before = s.seen.lock().unwrap().len();
    alice_says(&app, "blind", "Something else.").await;
    drain(&deriver).await;
    assert_eq!(s.seen.lock().unwrap().len(), before);
}
