//! Dreams end to end against the fake LLM: duplicates merged with their provenance, a
//! contradiction that cites both sides and deletes nothing, an induction across sessions, a graph
//! that stays acyclic, on demand over REST and GraphQL under auth, scheduled by Honcho's trigger,
//! and failures made visible.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use honcho_graphql::auth::KeySpec;
use honcho_graphql::deriver::{Deriver, DeriverArgs, DreamArgs, DreamReport};
use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply, deriving_on, prompts};
use crate::harness::{AppServer, TestApp, bearer, find_by_content as find};

/// `[id] (level, session) content` lines of a dream prompt, as (id, content).
fn shown(user: &str) -> Vec<(String, String)> {
    user.lines()
        .filter_map(|l| {
            let (id, rest) = l.strip_prefix('[')?.split_once("] (")?;
            Some((id.to_owned(), rest.split_once(") ")?.1.to_owned()))
        })
        .collect()
}

/// A fake LLM that dreams `plan`, written with contents where the answer has ids: each
/// `ids` list names conclusions by content, and is sent with the ids the prompt showed them
/// under. Any other request fails the test.
async fn dreamer(plan: Value) -> Arc<FakeLlm> {
    FakeLlm::start(move |_, body| {
        let (system, user) = prompts(body);
        assert!(system.starts_with("You consolidate"), "{system}");
        let shown = shown(&user);
        let id = |content: &Value| -> Value {
            let content = content.as_str().unwrap();
            let found = shown.iter().find(|(_, c)| c == content);
            json!(found.map_or_else(|| format!("unshown:{content}"), |(i, _)| i.clone()))
        };
        let mut answer = plan.clone();
        for key in ["duplicates", "contradictions", "inductions"] {
            for item in answer[key].as_array_mut().into_iter().flatten() {
                let ids: Vec<Value> = item["ids"].as_array().unwrap().iter().map(id).collect();
                item["ids"] = json!(ids);
            }
        }
        Reply::json(answer)
    })
    .await
}

fn config() -> DeriverArgs {
    DeriverArgs {
        batch_secs: 0.0,
        ..DeriverArgs::default()
    }
}

/// An app that derives (so dreams may be asked for), and a deriver on `fake`.
async fn app_with(fake: &FakeLlm, cfg: DeriverArgs) -> (TestApp, Arc<Deriver>) {
    deriving_on(TestApp::with_embedder().await, fake, cfg)
}

async fn peers_and_sessions(app: &TestApp) {
    app.ok(
        "mutation { a: getOrCreateSession(workspaceId: \"w\", id: \"s1\", \
           peers: [{peerId: \"alice\"}, {peerId: \"bob\"}]) { id } \
         b: getOrCreateSession(workspaceId: \"w\", id: \"s2\", peers: [{peerId: \"alice\"}]) { id } \
         c: getOrCreateWorkspace(id: \"w2\") { id } }",
        json!({}),
    )
    .await;
}

/// Alice's explicit conclusions about herself, in `session`; their ids.
async fn state(app: &TestApp, session: &str, contents: &[&str]) -> Vec<String> {
    let items = contents.iter().map(
        |c| json!({"content": c, "observerId": "alice", "observedId": "alice", "sessionId": session}),
    );
    app.create_conclusions("w", items).await
}

/// A DEDUCTIVE conclusion of alice's about herself citing `sources`; its id.
async fn deduce(app: &TestApp, content: &str, sources: &[&str]) -> String {
    app.ok(
        "mutation($i: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: \"w\", \
         input: $i) { id } }",
        json!({"i": {"content": content, "observerId": "alice", "observedId": "alice",
                     "level": "DEDUCTIVE", "sourceIds": sources}}),
    )
    .await["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Live conclusions of the workspace, oldest first.
async fn conclusions(app: &TestApp) -> Vec<Value> {
    app.ok(
        "{ workspace(id: \"w\") { conclusions(first: 100, order: ASC) { nodes { id content \
         level timesDerived sessionId sourceIds mergedIds } } } }",
        json!({}),
    )
    .await["workspace"]["conclusions"]["nodes"]
        .as_array()
        .unwrap()
        .clone()
}

fn ids(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap())
        .collect()
}

async fn schedule(app: &TestApp, observer: &str) {
    let d = app
        .ok(
            "mutation($o: ID!) { scheduleDream(workspaceId: \"w\", observerId: $o) }",
            json!({"o": observer}),
        )
        .await;
    assert_eq!(d["scheduleDream"], json!(true));
}

async fn dream(d: &Deriver) -> DreamReport {
    let report = d
        .dream_once("test")
        .await
        .unwrap()
        .expect("a pending dream");
    assert!(d.dream_once("test").await.unwrap().is_none(), "one dream");
    report
}

/// Whether the live reasoning graph of the workspace holds a cycle.
async fn has_cycle(app: &TestApp) -> bool {
    app.sql_one::<bool>(
        "WITH RECURSIVE walk(start, id, path) AS ( \
           SELECT c.id, s, ARRAY[c.id] FROM conclusions c \
           CROSS JOIN LATERAL unnest(c.source_ids) s WHERE c.deleted_at IS NULL \
           UNION ALL \
           SELECT w.start, s, w.path || w.id FROM walk w \
           JOIN conclusions c ON c.id = w.id AND c.deleted_at IS NULL \
           CROSS JOIN LATERAL unnest(c.source_ids) s \
           WHERE NOT w.id = ANY(w.path)) \
         SELECT EXISTS (SELECT 1 FROM walk WHERE id = start) AS cycle",
    )
    .await
}

/// Live conclusions citing a conclusion that is not live.
async fn dangling(app: &TestApp) -> i64 {
    app.sql_i64(
        "SELECT count(*) FROM conclusions c CROSS JOIN LATERAL unnest(c.source_ids) s \
         WHERE c.deleted_at IS NULL AND NOT EXISTS ( \
           SELECT 1 FROM conclusions p WHERE p.id = s AND p.deleted_at IS NULL)",
    )
    .await
}

const RUNS: &str = "Alice runs every morning";
const JOGS: &str = "Alice jogs each morning";
const VEGETARIAN: &str = "Alice is a vegetarian";
const STEAK: &str = "Alice ate a steak for dinner";
const RACE: &str = "Alice runs a 10k race on weekends";
const EARLY: &str = "Alice is an early riser";
const CONFLICT: &str = "Alice says she is a vegetarian, yet she ate a steak";
const PATTERN: &str = "Alice exercises regularly, week after week";

/// Two sessions of alice's: s1 states RUNS and VEGETARIAN, s2 states JOGS (a duplicate of RUNS),
/// STEAK (which contradicts VEGETARIAN) and RACE; EARLY is deduced from JOGS.
async fn two_sessions(app: &TestApp) -> (Vec<String>, Vec<String>, String) {
    peers_and_sessions(app).await;
    let s1 = state(app, "s1", &[RUNS, VEGETARIAN]).await;
    let s2 = state(app, "s2", &[JOGS, STEAK, RACE]).await;
    let early = deduce(app, EARLY, &[&s2[0]]).await;
    (s1, s2, early)
}

fn consolidation() -> Value {
    json!({
        "duplicates": [{"ids": [RUNS, JOGS]}],
        "contradictions": [{"ids": [VEGETARIAN, STEAK], "content": CONFLICT}],
        "inductions": [
            {"ids": [JOGS, RACE], "content": PATTERN},
            // One session only: not an induction across sessions.
            {"ids": [RUNS, VEGETARIAN], "content": "Alice keeps healthy habits"}
        ]
    })
}

#[tokio::test]
async fn duplicates_merge_into_the_oldest_keeping_counts_and_citations() {
    let fake = dreamer(consolidation()).await;
    let (app, deriver) = app_with(&fake, config()).await;
    let (s1, s2, early) = two_sessions(&app).await;
    schedule(&app, "alice").await;
    let DreamReport::Done { outcome, .. } = dream(&deriver).await else {
        panic!("the dream failed")
    };
    assert_eq!(outcome.merged, vec![(s1[0].clone(), vec![s2[0].clone()])]);

    let list = conclusions(&app).await;
    assert!(!list.iter().any(|c| c["content"] == JOGS), "{list:#?}");
    let runs = find(&list, RUNS);
    assert_eq!(runs["id"], json!(s1[0]));
    assert_eq!(
        runs["timesDerived"],
        json!(2),
        "its own and the duplicate's"
    );
    assert_eq!(ids(&runs["mergedIds"]), vec![s2[0].as_str()]);
    // What cited the duplicate cites the survivor.
    assert_eq!(ids(&find(&list, EARLY)["sourceIds"]), vec![s1[0].as_str()]);
    // The duplicate is kept as a deleted row that names its survivor.
    let into: String = app
        .sql_one(&format!(
            "SELECT internal_metadata->>'merged_into' AS x FROM conclusions \
             WHERE id = '{}' AND deleted_at IS NOT NULL",
            s2[0]
        ))
        .await;
    assert_eq!(into, s1[0]);
    assert_eq!(dangling(&app).await, 0);
    assert!(!early.is_empty());
    // A conclusion that cited the duplicate reads as citing the survivor in the tree too.
    let tree = app
        .ok(
            "query($id: ID!) { workspace(id: \"w\") { conclusion(id: $id) { sources { id } } } }",
            json!({"id": early}),
        )
        .await;
    assert_eq!(
        tree["workspace"]["conclusion"]["sources"][0]["id"],
        json!(s1[0])
    );
}

#[tokio::test]
async fn a_contradiction_cites_both_sides_and_deletes_nothing() {
    let fake = dreamer(consolidation()).await;
    let (app, deriver) = app_with(&fake, config()).await;
    let (s1, s2, _) = two_sessions(&app).await;
    let before = app.sql_i64("SELECT count(*) FROM conclusions").await;
    schedule(&app, "alice").await;
    dream(&deriver).await;

    let list = conclusions(&app).await;
    let conflict = find(&list, CONFLICT);
    assert_eq!(conflict["level"], json!("CONTRADICTION"));
    assert_eq!(
        ids(&conflict["sourceIds"]),
        vec![s1[1].as_str(), s2[1].as_str()]
    );
    // Across two sessions: it belongs to neither.
    assert_eq!(conflict["sessionId"], Value::Null);
    // Both sides stay, unchanged.
    assert_eq!(find(&list, VEGETARIAN)["timesDerived"], json!(1));
    assert_eq!(find(&list, STEAK)["timesDerived"], json!(1));
    // Rows are only added; the one deleted is the merged duplicate, with its record.
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE deleted_at IS NOT NULL")
            .await,
        1
    );
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions").await,
        before + 2,
        "the contradiction and the induction"
    );
}

#[tokio::test]
async fn an_induction_cites_premises_from_two_sessions_and_one_from_a_single_session_is_refused() {
    let fake = dreamer(consolidation()).await;
    let (app, deriver) = app_with(&fake, config()).await;
    let (s1, s2, _) = two_sessions(&app).await;
    schedule(&app, "alice").await;
    let DreamReport::Done { outcome, .. } = dream(&deriver).await else {
        panic!("the dream failed")
    };
    assert_eq!(outcome.inductions.len(), 1);
    assert_eq!(outcome.refused, 1, "the single-session one");

    let list = conclusions(&app).await;
    let pattern = find(&list, PATTERN);
    assert_eq!(pattern["level"], json!("INDUCTIVE"));
    // JOGS was merged into RUNS: the induction cites the survivor (s1) and RACE (s2).
    assert_eq!(
        ids(&pattern["sourceIds"]),
        vec![s1[0].as_str(), s2[2].as_str()]
    );
    let sessions: Vec<&Value> = ids(&pattern["sourceIds"])
        .into_iter()
        .map(|id| &list.iter().find(|c| c["id"] == id).unwrap()["sessionId"])
        .collect();
    assert_eq!(sessions, vec![&json!("s1"), &json!("s2")]);
    assert!(
        !list
            .iter()
            .any(|c| c["content"] == "Alice keeps healthy habits")
    );
}

#[tokio::test]
async fn a_merge_that_would_close_a_cycle_is_refused_and_the_graph_stays_acyclic() {
    // SPORTY <- EVENTS <- ATHLETIC: merging ATHLETIC into SPORTY (the older) would give SPORTY
    // ATHLETIC's source EVENTS, which derives from SPORTY.
    const BASE: &str = "Alice swims twice a week";
    const SPORTY: &str = "Alice is sporty";
    const EVENTS: &str = "Alice enjoys watching sport events";
    const ATHLETIC: &str = "Alice is an athletic person";
    let fake = dreamer(json!({
        "duplicates": [{"ids": [SPORTY, ATHLETIC]}],
        "contradictions": [],
        // Cites a conclusion it was not shown: dropped, which leaves it one premise, so it is
        // dropped before the store sees it.
        "inductions": [{"ids": [BASE, "nonsense"], "content": "Alice loves water"}]
    }))
    .await;
    let (app, deriver) = app_with(&fake, config()).await;
    peers_and_sessions(&app).await;
    let base = state(&app, "s1", &[BASE]).await;
    let sporty = deduce(&app, SPORTY, &[&base[0]]).await;
    let events = deduce(&app, EVENTS, &[&sporty]).await;
    let athletic = deduce(&app, ATHLETIC, &[&events]).await;
    schedule(&app, "alice").await;
    let DreamReport::Done { outcome, .. } = dream(&deriver).await else {
        panic!("the dream failed")
    };
    assert!(outcome.merged.is_empty());
    assert_eq!(outcome.refused, 1, "the merge");
    assert!(outcome.inductions.is_empty());

    let list = conclusions(&app).await;
    assert_eq!(
        ids(&find(&list, SPORTY)["sourceIds"]),
        vec![base[0].as_str()]
    );
    assert_eq!(find(&list, SPORTY)["timesDerived"], json!(1));
    assert_eq!(
        ids(&find(&list, EVENTS)["sourceIds"]),
        vec![sporty.as_str()]
    );
    assert_eq!(find(&list, ATHLETIC)["id"], json!(athletic));
    assert!(!has_cycle(&app).await);
    assert_eq!(dangling(&app).await, 0);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM conclusions WHERE deleted_at IS NOT NULL")
            .await,
        0
    );
}

#[tokio::test]
async fn after_a_full_dream_the_graph_is_acyclic_and_every_citation_is_live() {
    let fake = dreamer(consolidation()).await;
    let (app, deriver) = app_with(&fake, config()).await;
    two_sessions(&app).await;
    schedule(&app, "alice").await;
    dream(&deriver).await;
    assert!(!has_cycle(&app).await);
    assert_eq!(dangling(&app).await, 0);
}

/// A REST client of `app`'s router, with an optional key.
async fn rest(
    http: &AppServer,
    key: Option<&str>,
    method: Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let mut req = http
        .client
        .request(method, format!("{}{path}", http.base))
        .json(&body);
    if let Some(k) = key {
        req = req.header("authorization", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn dream_status(app: &TestApp) -> Value {
    app.ok(
        "{ workspace(id: \"w\") { deriverStatus { dreams { pending inProgress failed \
         lastError { message at } } } } }",
        json!({}),
    )
    .await["workspace"]["deriverStatus"]["dreams"]
        .clone()
}

#[tokio::test]
async fn dreams_are_asked_for_over_rest_and_graphql() {
    let fake = dreamer(consolidation()).await;
    let (app, deriver) = app_with(&fake, config()).await;
    two_sessions(&app).await;
    let http = AppServer::start(app).await;
    let app = &http.app;

    let path = "/v3/workspaces/w/schedule_dream";
    let (status, body) = rest(
        &http,
        None,
        Method::POST,
        path,
        json!({"observer": "alice", "dream_type": "omni"}),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    // Asking again while one waits changes nothing.
    let (status, _) = rest(
        &http,
        None,
        Method::POST,
        path,
        json!({"observer": "alice", "observed": "alice"}),
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(dream_status(app).await["pending"], json!(1));
    assert!(matches!(dream(&deriver).await, DreamReport::Done { .. }));
    assert_eq!(dream_status(app).await["pending"], json!(0));
    assert!(
        conclusions(app)
            .await
            .iter()
            .any(|c| c["content"] == CONFLICT)
    );

    // Bad requests: unknown peers, an unknown dream type, a missing observer.
    let (status, _) = rest(&http, None, Method::POST, path, json!({"observer": "zed"})).await;
    assert_eq!(status, 404);
    let (status, _) = rest(
        &http,
        None,
        Method::POST,
        path,
        json!({"observer": "alice", "dream_type": "card_refresh"}),
    )
    .await;
    assert_eq!(status, 422);
    let (status, _) = rest(&http, None, Method::POST, path, json!({})).await;
    assert_eq!(status, 422);
    let (code, _) = app
        .err(
            "mutation { scheduleDream(workspaceId: \"w\", observerId: \"alice\", observedId: \"zed\") }",
            json!({}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");

    // GraphQL: alice's view of bob (nothing to consolidate: no LLM call, the dream ends).
    let hits = fake.hits();
    let d = app
        .ok(
            "mutation { scheduleDream(workspaceId: \"w\", observerId: \"alice\", observedId: \"bob\") }",
            json!({}),
        )
        .await;
    assert_eq!(d["scheduleDream"], json!(true));
    let DreamReport::Done { outcome, .. } = dream(&deriver).await else {
        panic!("the dream failed")
    };
    assert!(outcome.merged.is_empty() && outcome.new_ids.is_empty());
    assert_eq!(fake.hits(), hits);
}

#[tokio::test]
async fn a_peer_key_cannot_schedule_a_dream_for_another_workspace() {
    let fake = dreamer(consolidation()).await;
    let (app, _deriver) = app_with(&fake, config()).await;
    two_sessions(&app).await;
    let app = app.auth_on();
    let http = AppServer::start(app).await;
    let key = |workspace: &str, peer: Option<&str>| {
        bearer(KeySpec {
            workspace: Some(workspace.into()),
            peer: peer.map(Into::into),
            ..KeySpec::default()
        })
    };
    let path = "/v3/workspaces/w/schedule_dream";
    let body = json!({"observer": "alice"});
    let query = "mutation { scheduleDream(workspaceId: \"w\", observerId: \"alice\") }";
    // A peer key of another workspace, and (Honcho: workspace keys only) alice's own key.
    for k in [
        key("w2", Some("alice")),
        key("w2", None),
        key("w", Some("alice")),
    ] {
        let (status, _) = rest(&http, Some(&k), Method::POST, path, body.clone()).await;
        assert_eq!(status, 403, "{k}");
        let resp = http.app.exec_as(Some(&k), query, json!({})).await;
        assert_eq!(
            resp["errors"][0]["extensions"]["code"],
            json!("FORBIDDEN"),
            "{resp}"
        );
    }
    assert_eq!(
        http.app.sql_i64("SELECT count(*) FROM dream_units").await,
        0,
        "nothing was queued"
    );
    let (status, _) = rest(&http, Some(&key("w", None)), Method::POST, path, body).await;
    assert_eq!(status, 204);
    let resp = http
        .app
        .exec_as(Some(&key("w", None)), query, json!({}))
        .await;
    assert_eq!(resp["data"]["scheduleDream"], json!(true), "{resp}");
}

#[tokio::test]
async fn dreams_are_refused_when_the_server_has_no_deriver() {
    let app = TestApp::new().await;
    peers_and_sessions(&app).await;
    let (code, message) = app
        .err(
            "mutation { scheduleDream(workspaceId: \"w\", observerId: \"alice\") }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(message.contains("not enabled"), "{message}");
}

#[tokio::test]
async fn scheduled_dreams_follow_the_threshold_the_idle_time_and_the_gap() {
    let fake = dreamer(json!({"duplicates": [], "contradictions": [], "inductions": []})).await;
    let cfg = |min_hours_between: f64| DeriverArgs {
        dream: DreamArgs {
            document_threshold: 3,
            idle_minutes: 0.0,
            min_hours_between,
            ..DreamArgs::default()
        },
        ..config()
    };
    let (app, deriver) = app_with(&fake, cfg(0.0)).await;
    peers_and_sessions(&app).await;
    state(&app, "s1", &["Alice likes tea", "Alice likes jazz"]).await;
    assert_eq!(deriver.schedule_due_dreams().await.unwrap(), 0, "2 < 3");
    state(&app, "s2", &["Alice likes rain"]).await;
    assert_eq!(deriver.schedule_due_dreams().await.unwrap(), 1);
    assert_eq!(
        deriver.schedule_due_dreams().await.unwrap(),
        0,
        "one pending already"
    );
    assert!(matches!(dream(&deriver).await, DreamReport::Done { .. }));
    assert_eq!(fake.hits(), 1);
    // Nothing new since the dream.
    assert_eq!(deriver.schedule_due_dreams().await.unwrap(), 0);
    state(
        &app,
        "s2",
        &["Alice likes cats", "Alice likes maps", "Alice likes snow"],
    )
    .await;
    // A minimum gap between dreams holds the next one back...
    let llm = honcho_graphql::llm::build(&fake.config()).unwrap().unwrap();
    let patient = Deriver::new(app.store.clone(), llm, cfg(8.0));
    assert_eq!(patient.schedule_due_dreams().await.unwrap(), 0);
    // ...and an idle time that has not passed does too.
    let llm = honcho_graphql::llm::build(&fake.config()).unwrap().unwrap();
    let mut waiting = cfg(0.0);
    waiting.dream.idle_minutes = 60.0;
    assert_eq!(
        Deriver::new(app.store.clone(), llm, waiting)
            .schedule_due_dreams()
            .await
            .unwrap(),
        0
    );
    assert_eq!(deriver.schedule_due_dreams().await.unwrap(), 1);
    // Off: nothing is scheduled.
    let llm = honcho_graphql::llm::build(&fake.config()).unwrap().unwrap();
    let mut off = cfg(0.0);
    off.dream.enabled = false;
    assert_eq!(
        Deriver::new(app.store.clone(), llm, off)
            .schedule_due_dreams()
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_failed_dream_is_reported_and_resumed_by_retry_failed_derivations() {
    let up = Arc::new(AtomicBool::new(false));
    let fake = FakeLlm::start({
        let up = up.clone();
        move |_, _| {
            if up.load(Ordering::SeqCst) {
                Reply::json(json!({"duplicates": [], "contradictions": [], "inductions": []}))
            } else {
                Reply::Status(500, "the model is down")
            }
        }
    })
    .await;
    let (app, deriver) = app_with(&fake, config()).await;
    two_sessions(&app).await;
    schedule(&app, "alice").await;
    let DreamReport::Failed { error, .. } = dream(&deriver).await else {
        panic!("the dream should fail")
    };
    assert!(error.contains("dream pass"), "{error}");
    let status = dream_status(&app).await;
    assert_eq!(status["failed"], json!(1), "{status}");
    assert!(
        status["lastError"]["message"]
            .as_str()
            .unwrap()
            .contains("dream pass"),
        "{status}"
    );
    // Stopped until retried.
    up.store(true, Ordering::SeqCst);
    assert!(deriver.dream_once("test").await.unwrap().is_none());
    let retried = app
        .ok(
            "mutation { retryFailedDerivations(workspaceId: \"w\") }",
            json!({}),
        )
        .await;
    assert_eq!(retried["retryFailedDerivations"], json!(1));
    assert!(matches!(dream(&deriver).await, DreamReport::Done { .. }));
    let status = dream_status(&app).await;
    assert_eq!(
        (status["failed"].clone(), status["lastError"].clone()),
        (json!(0), Value::Null)
    );
}
