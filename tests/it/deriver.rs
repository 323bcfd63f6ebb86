//! The deriver end to end against the fake LLM: the queue and its observation rules, leases,
//! explicit facts with their messages, reinforcement, the reasoning pass and its refusals, a
//! three-level tree, failures made visible, and the status query under auth.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use honcho_graphql::auth::KeySpec;
use honcho_graphql::deriver::{BatchReport, Deriver};
use honcho_graphql::store::StoreError;
use honcho_graphql::store::queue::ClaimRules;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply, at_once as config, deriving_on, prompts};
use crate::harness::{ServerProcess, TestApp, bearer, find_by_content as find};

/// Which pass a request is for, and its user prompt.
enum Pass<'a> {
    Explicit { observed: &'a str, user: &'a str },
    Reasoning { user: &'a str },
}

/// A fake LLM answering the explicit pass with `explicit` and the reasoning pass with
/// `reasoning` (default: no conclusions).
async fn fake(script: impl Fn(Pass<'_>) -> Value + Send + Sync + 'static) -> Arc<FakeLlm> {
    FakeLlm::start(move |_, body| {
        let (system, user) = prompts(body);
        let pass = if system.contains("NEW messages") {
            // "You keep X's memory of themselves" / "You keep what X knows about Y".
            let observed = match system.strip_prefix("You keep what ") {
                Some(rest) => rest.split(" knows about ").nth(1).unwrap(),
                None => system.strip_prefix("You keep ").unwrap(),
            };
            let observed = observed.split(['\'', '.']).next().unwrap();
            Pass::Explicit {
                observed,
                user: &user,
            }
        } else {
            Pass::Reasoning { user: &user }
        };
        Reply::json(script(pass))
    })
    .await
}

/// The NEW part of an explicit-pass prompt.
fn new_part(user: &str) -> &str {
    user.split("NEW messages:").nth(1).unwrap_or("")
}

fn facts(list: &[(&str, &[i64])]) -> Value {
    json!({"facts": list.iter().map(|(c, s)| json!({"content": c, "source_seqs": s})).collect::<Vec<_>>()})
}

fn no_conclusions() -> Value {
    json!({"conclusions": []})
}

/// `[id] (level) content` lines of a reasoning prompt, as (id, content).
fn shown(user: &str) -> Vec<(String, String)> {
    user.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('[')?;
            let (id, content) = rest.split_once("] ")?;
            let content = match content.strip_prefix('(') {
                Some(c) => c.split_once(") ")?.1,
                None => content,
            };
            Some((id.to_owned(), content.to_owned()))
        })
        .collect()
}

fn id_of(user: &str, content: &str) -> String {
    shown(user)
        .into_iter()
        .find(|(_, c)| c == content)
        .unwrap_or_else(|| panic!("{content:?} not shown in {user}"))
        .0
}

async fn app_with(fake: &FakeLlm) -> (TestApp, Arc<Deriver>) {
    deriving_on(TestApp::with_embedder().await, fake, config())
}

/// Processes ready batches until none is left.
async fn drain_any(d: &Deriver) -> Vec<BatchReport> {
    let mut out = Vec::new();
    while let Some(r) = d.run_once("test").await.unwrap() {
        out.push(r);
    }
    out
}

/// Processes ready batches until none is left; each must succeed.
async fn drain(d: &Deriver) -> Vec<BatchReport> {
    let out = drain_any(d).await;
    for r in &out {
        assert!(matches!(r, BatchReport::Done { .. }), "{r:?}");
    }
    out
}

async fn say(app: &TestApp, session: &str, messages: &[(&str, &str)]) {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(p, c)| json!({"peerId": p, "content": c}))
        .collect();
    app.ok(
        "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"w\", \
         sessionId: $s, messages: $m) { id } }",
        json!({"s": session, "m": messages}),
    )
    .await;
}

/// Live conclusions of the workspace, oldest first, with their source messages.
async fn conclusions(app: &TestApp) -> Vec<Value> {
    let data = app
        .ok(
            "{ workspace(id: \"w\") { conclusions(first: 100, order: ASC) { nodes { id content \
             level timesDerived observerId observedId sessionId sourceIds \
             sourceMessages { seqInSession peerId content } } } } }",
            json!({}),
        )
        .await;
    data["workspace"]["conclusions"]["nodes"]
        .as_array()
        .unwrap()
        .clone()
}

async fn status(app: &TestApp) -> Value {
    app.ok(
        "{ workspace(id: \"w\") { deriverStatus { pending inProgress failed \
         lastError { message at sessionId } } } }",
        json!({}),
    )
    .await["workspace"]["deriverStatus"]
        .clone()
}

#[tokio::test]
async fn messages_become_explicit_conclusions_grounded_in_their_messages() {
    let fake = fake(|pass| match pass {
        Pass::Explicit {
            observed: "alice",
            user,
            ..
        } => {
            assert!(user.contains("NEW messages:\n[seq 1]"), "{user}");
            assert!(user.contains("alice: I moved to Paris in 2020"), "{user}");
            facts(&[
                ("Alice has lived in Paris since 2020", &[1]),
                ("Alice works as a nurse", &[3]),
            ])
        }
        Pass::Explicit { .. } => facts(&[]),
        Pass::Reasoning { .. } => no_conclusions(),
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(
        &app,
        "s",
        &[
            ("alice", "I moved to Paris in 2020."),
            ("bob", "Nice! What do you do there?"),
            ("alice", "I'm a nurse at a hospital."),
        ],
    )
    .await;
    assert_eq!(status(&app).await["pending"], 3, "alice twice, bob once");
    let reports = drain(&deriver).await;
    assert_eq!(
        reports.len(),
        2,
        "one batch per unit: (alice, alice), (bob, bob)"
    );
    let list = conclusions(&app).await;
    assert_eq!(list.len(), 2);
    let paris = find(&list, "Alice has lived in Paris since 2020");
    assert_eq!(paris["level"], "EXPLICIT");
    assert_eq!(paris["observerId"], "alice");
    assert_eq!(paris["observedId"], "alice");
    assert_eq!(paris["sessionId"], "s");
    assert_eq!(paris["timesDerived"], 1);
    assert_eq!(
        paris["sourceMessages"],
        json!([{"seqInSession": 1, "peerId": "alice", "content": "I moved to Paris in 2020."}])
    );
    let nurse = find(&list, "Alice works as a nurse");
    assert_eq!(nurse["sourceMessages"][0]["seqInSession"], 3);
    let s = status(&app).await;
    assert_eq!(
        (s["pending"].clone(), s["failed"].clone()),
        (json!(0), json!(0))
    );
    // Embedded with the configured embedder: found by meaning.
    let found = app
        .ok(
            "{ workspace(id: \"w\") { queryConclusions(query: \"which city does alice live in\", \
             topK: 1) { content } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        found["workspace"]["queryConclusions"][0]["content"],
        "Alice has lived in Paris since 2020"
    );
}

#[tokio::test]
async fn observation_rules_pick_the_observers_of_each_message() {
    let fake = fake(|_| facts(&[])).await;
    let (app, _) = app_with(&fake).await;
    app.ok(
        "mutation { \
           dave: getOrCreatePeer(workspaceId: \"w\", id: \"dave\", \
             configuration: {observe_me: false}) { id } \
           eve: getOrCreatePeer(workspaceId: \"w\", id: \"eve\", \
             configuration: {observe_me: false}) { id } \
           getOrCreateSession(workspaceId: \"w\", id: \"s\", peers: [ \
             {peerId: \"alice\", observeMe: false}, \
             {peerId: \"bob\", observeOthers: true}, \
             {peerId: \"carol\"}, {peerId: \"dave\"}, \
             {peerId: \"eve\", observeMe: true}]) { id } }",
        json!({}),
    )
    .await;
    say(
        &app,
        "s",
        &[
            ("alice", "hidden by her session config"),
            ("carol", "seen by herself and bob"),
            ("dave", "hidden by his peer config"),
            ("eve", "peer config says no, the session says yes"),
        ],
    )
    .await;
    let rows = app
        .store
        .db()
        .query_all_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT observer || '>' || observed AS pair FROM deriver_units ORDER BY 1",
        ))
        .await
        .unwrap();
    let pairs: Vec<String> = rows
        .iter()
        .map(|r| r.try_get("", "pair").unwrap())
        .collect();
    assert_eq!(pairs, ["bob>carol", "bob>eve", "carol>carol", "eve>eve"]);
}

#[tokio::test]
async fn without_an_llm_nothing_is_queued() {
    let app = TestApp::new().await;
    say(&app, "s", &[("alice", "hello"), ("bob", "hi")]).await;
    assert_eq!(app.sql_i64("SELECT count(*) FROM deriver_items").await, 0);
    assert_eq!(app.sql_i64("SELECT count(*) FROM deriver_units").await, 0);
    assert_eq!(status(&app).await["pending"], 0);
}

#[tokio::test]
async fn duplicate_facts_and_conclusions_reinforce_instead_of_repeating() {
    let fake = fake(|pass| match pass {
        Pass::Explicit { user, .. } if new_part(user).contains("[seq 1]") => {
            facts(&[("Alice loves green tea", &[1])])
        }
        // The same fact again, once verbatim and once nearly (cosine above the threshold).
        Pass::Explicit { .. } => facts(&[
            ("Alice loves green tea", &[2]),
            ("Alice loves green tea!", &[2]),
            ("Alice drinks black coffee at work", &[2]),
        ]),
        Pass::Reasoning { user } => {
            let n1 = id_of(user, "Alice loves green tea");
            json!({"conclusions": [{"level": "deductive",
                "content": "Alice drinks tea regularly", "source_ids": [n1]}]})
        }
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", &[("alice", "Green tea is my favourite drink")]).await;
    drain(&deriver).await;
    say(&app, "s", &[("alice", "I had green tea again, I love it")]).await;
    drain(&deriver).await;
    let list = conclusions(&app).await;
    assert_eq!(list.len(), 3, "{list:#?}");
    let coffee = find(&list, "Alice drinks black coffee at work");
    assert_eq!(
        coffee["timesDerived"], 1,
        "a different fact is not a duplicate"
    );
    let tea = find(&list, "Alice loves green tea");
    assert_eq!(tea["timesDerived"], 3, "created once, reinforced twice");
    let seqs: Vec<i64> = tea["sourceMessages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2], "grounded in both messages");
    let drinks = find(&list, "Alice drinks tea regularly");
    assert_eq!(drinks["timesDerived"], 2, "derived in each batch");
    assert_eq!(drinks["sourceIds"], json!([tea["id"]]));
}

#[tokio::test]
async fn a_three_level_tree_forms_from_a_conversation() {
    let fake = fake(|pass| match pass {
        Pass::Explicit { user, .. } if new_part(user).contains("marathon") => facts(&[
            ("Alice runs every morning before work", &[1]),
            ("Alice signed up for the Berlin marathon in April", &[2]),
        ]),
        Pass::Explicit { .. } => facts(&[("Alice swims on weekends", &[3])]),
        Pass::Reasoning { user } if !user.contains("swims") => {
            json!({"conclusions": [{"level": "deductive",
                "content": "Alice is training for the Berlin marathon",
                "source_ids": [id_of(user, "Alice runs every morning before work"),
                               id_of(user, "Alice signed up for the Berlin marathon in April")]}]})
        }
        Pass::Reasoning { user } => json!({"conclusions": [{"level": "inductive",
            "content": "Alice organises her week around endurance sports",
            "source_ids": [id_of(user, "Alice is training for the Berlin marathon"),
                           id_of(user, "Alice swims on weekends")]}]}),
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(
        &app,
        "s",
        &[
            ("alice", "I run every morning before work."),
            (
                "alice",
                "And I just signed up for the Berlin marathon in April!",
            ),
        ],
    )
    .await;
    drain(&deriver).await;
    say(
        &app,
        "s",
        &[("alice", "On weekends I swim to rest my legs.")],
    )
    .await;
    drain(&deriver).await;
    let list = conclusions(&app).await;
    let top = find(&list, "Alice organises her week around endurance sports");
    assert_eq!(top["level"], "INDUCTIVE");
    let tree = app
        .ok(
            "query($id: ID!) { workspace(id: \"w\") { conclusion(id: $id) { \
               reasoningTree(direction: SOURCES, maxDepth: 5) { \
                 nodes { content level } edges { from to } truncated } } } }",
            json!({"id": top["id"]}),
        )
        .await;
    let tree = &tree["workspace"]["conclusion"]["reasoningTree"];
    let nodes: Vec<(&str, &str)> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["level"].as_str().unwrap(), n["content"].as_str().unwrap()))
        .collect();
    assert_eq!(nodes.len(), 5, "{nodes:?}");
    assert_eq!(nodes[0].0, "INDUCTIVE");
    let levels: Vec<&str> = nodes.iter().map(|n| n.0).collect();
    assert_eq!(
        levels.iter().filter(|l| **l == "DEDUCTIVE").count(),
        1,
        "{nodes:?}"
    );
    assert_eq!(levels.iter().filter(|l| **l == "EXPLICIT").count(), 3);
    assert_eq!(tree["edges"].as_array().unwrap().len(), 4);
    assert_eq!(tree["truncated"], false);
    // The explicit leaves reach down to the messages.
    let leaf = find(&list, "Alice swims on weekends");
    assert_eq!(leaf["sourceMessages"][0]["seqInSession"], 3);
}

#[tokio::test]
async fn unknown_premises_are_dropped_and_self_citations_and_cycles_refused() {
    let fake = fake(|pass| match pass {
        Pass::Explicit { user, .. } if new_part(user).contains("[seq 1]") => {
            facts(&[("Alice wakes up at 5am", &[1])])
        }
        Pass::Explicit { user, .. } if new_part(user).contains("[seq 2]") => {
            facts(&[("Alice plans her day before breakfast", &[2])])
        }
        Pass::Explicit { .. } => facts(&[("Alice likes quiet mornings", &[3])]),
        Pass::Reasoning { user } if !user.contains("Alice is a morning person") => {
            json!({"conclusions": [
                {"level": "deductive", "content": "Alice is a morning person",
                 "source_ids": ["n1", "made-up-id"]},
                {"level": "deductive", "content": "Alice never sleeps", "source_ids": ["nope"]},
                {"level": "hunch", "content": "Alice dreams of mornings", "source_ids": ["n1"]}]})
        }
        Pass::Reasoning { user } if !user.contains("Alice structures her mornings") => {
            json!({"conclusions": [{"level": "inductive",
                "content": "Alice structures her mornings",
                "source_ids": [id_of(user, "Alice is a morning person"), "n1"]}]})
        }
        Pass::Reasoning { user } => {
            let morning = id_of(user, "Alice is a morning person");
            let structures = id_of(user, "Alice structures her mornings");
            json!({"conclusions": [
                // Cites itself.
                {"level": "deductive", "content": "Alice is a morning person",
                 "source_ids": [morning, "n1"]},
                // Would make a premise of what derives from it.
                {"level": "deductive", "content": "Alice is a morning person",
                 "source_ids": [structures]}]})
        }
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    for text in [
        "I'm up at 5am",
        "I plan my day before breakfast",
        "I like quiet mornings",
    ] {
        say(&app, "s", &[("alice", text)]).await;
        let reports = drain(&deriver).await;
        assert!(
            matches!(reports.as_slice(), [BatchReport::Done { .. }]),
            "{reports:?}"
        );
    }
    let list = conclusions(&app).await;
    let morning = find(&list, "Alice is a morning person");
    let wakes = find(&list, "Alice wakes up at 5am");
    assert_eq!(
        morning["sourceIds"],
        json!([wakes["id"]]),
        "the unknown id was dropped"
    );
    assert_eq!(
        morning["timesDerived"], 1,
        "the self-citation and the cycle were refused"
    );
    assert!(list.iter().all(|c| c["content"] != "Alice never sleeps"));
    assert!(
        list.iter()
            .all(|c| c["content"] != "Alice dreams of mornings")
    );
    let metrics =
        honcho_graphql::graphql::metrics::encode(&honcho_graphql::deriver::metrics::gather());
    assert!(
        metrics.contains("honcho_deriver_unknown_sources_total"),
        "{metrics}"
    );
}

/// While `broken`, a model that cannot produce JSON; else one that hears Alice keep bees.
fn bees_unless(broken: bool, body: &Value) -> Reply {
    if broken {
        return Reply::Content("I am unable to produce JSON right now.".into());
    }
    let (system, _) = prompts(body);
    if system.contains("NEW messages") {
        Reply::json(facts(&[("Alice keeps bees", &[1])]))
    } else {
        Reply::json(no_conclusions())
    }
}

#[tokio::test]
async fn a_batch_the_llm_cannot_answer_fails_visibly_and_resumes_after_a_retry() {
    let broken = Arc::new(AtomicBool::new(true));
    let b = broken.clone();
    let fake = FakeLlm::start(move |_, body| bees_unless(b.load(Ordering::SeqCst), body)).await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", &[("alice", "My bees made honey this year")]).await;
    let reports = drain_any(&deriver).await;
    let [BatchReport::Failed { error, .. }] = reports.as_slice() else {
        panic!("{reports:?}");
    };
    assert!(error.contains("explicit pass"), "{error}");
    assert_eq!(fake.hits(), 3, "each output step was tried once");
    let s = status(&app).await;
    assert_eq!(s["failed"], 1);
    assert_eq!(s["pending"], 0);
    assert_eq!(s["lastError"]["sessionId"], "s");
    let message = s["lastError"]["message"].as_str().unwrap();
    assert!(message.contains("unable to produce JSON"), "{message}");
    assert!(conclusions(&app).await.is_empty(), "nothing half-written");
    // The unit waits: later messages do not overtake the failed ones.
    say(&app, "s", &[("alice", "I also grow lavender")]).await;
    assert!(drain_any(&deriver).await.is_empty());
    assert_eq!(status(&app).await["failed"], 2);

    broken.store(false, Ordering::SeqCst);
    let retried = app
        .ok(
            "mutation { retryFailedDerivations(workspaceId: \"w\") }",
            json!({}),
        )
        .await;
    assert_eq!(retried["retryFailedDerivations"], 2);
    let reports = drain(&deriver).await;
    assert!(
        matches!(reports.as_slice(), [BatchReport::Done { messages: 2, .. }]),
        "{reports:?}"
    );
    assert_eq!(
        find(&conclusions(&app).await, "Alice keeps bees")["timesDerived"],
        1
    );
    let s = status(&app).await;
    assert_eq!(
        (s["pending"].clone(), s["failed"].clone()),
        (json!(0), json!(0))
    );
    let metrics =
        honcho_graphql::graphql::metrics::encode(&honcho_graphql::deriver::metrics::gather());
    assert!(
        metrics.contains("honcho_deriver_batches_total{outcome=\"failed\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_units_last_error_is_cleared_once_its_retry_succeeds() {
    // Every call fails while `broken`; calls about lavender fail while `lavender_broken` too.
    let broken = Arc::new(AtomicBool::new(true));
    let lavender_broken = Arc::new(AtomicBool::new(true));
    let (b, l) = (broken.clone(), lavender_broken.clone());
    let fake = FakeLlm::start(move |_, body| {
        let lavender = prompts(body).1.contains("lavender");
        bees_unless(
            b.load(Ordering::SeqCst) || (l.load(Ordering::SeqCst) && lavender),
            body,
        )
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s1", &[("alice", "My bees made honey this year")]).await;
    say(&app, "s2", &[("alice", "I grow lavender")]).await;
    assert_eq!(drain_any(&deriver).await.len(), 2);
    assert_eq!(status(&app).await["failed"], 2);
    let retry = "mutation { retryFailedDerivations(workspaceId: \"w\") }";

    // s1's unit recovers, s2's fails again: the error shown is the unit still failing.
    broken.store(false, Ordering::SeqCst);
    app.ok(retry, json!({})).await;
    drain_any(&deriver).await;
    let s = status(&app).await;
    assert_eq!(s["failed"], 1);
    assert_eq!(s["lastError"]["sessionId"], "s2", "{s}");

    // Once every unit has recovered, no error is shown.
    lavender_broken.store(false, Ordering::SeqCst);
    app.ok(retry, json!({})).await;
    drain(&deriver).await;
    let s = status(&app).await;
    assert_eq!(s["failed"], 0);
    assert_eq!(s["lastError"], Value::Null, "{s}");
}

#[tokio::test]
async fn an_oversized_llm_answer_fails_the_unit_visibly_and_writes_nothing() {
    let too_long = "x".repeat(honcho_graphql::llm::MAX_ANSWER_BYTES + 1);
    let fake = FakeLlm::start(move |_, _| Reply::Content(too_long.clone())).await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", &[("alice", "My bees made honey this year")]).await;
    let reports = drain_any(&deriver).await;
    let [BatchReport::Failed { error, .. }] = reports.as_slice() else {
        panic!("{reports:?}");
    };
    assert!(
        error.contains("explicit pass") && error.contains("longer than"),
        "{error}"
    );
    assert_eq!(fake.hits(), 1, "not asked again");
    let s = status(&app).await;
    assert_eq!(
        (s["failed"].clone(), s["pending"].clone()),
        (json!(1), json!(0))
    );
    let message = s["lastError"]["message"].as_str().unwrap();
    assert!(message.contains("longer than"), "{message}");
    assert!(conclusions(&app).await.is_empty(), "nothing half-written");
}

#[tokio::test]
async fn a_killed_workers_unit_is_taken_over_after_its_lease_and_written_once() {
    let fake = fake(|pass| match pass {
        Pass::Explicit { .. } => facts(&[("Alice plays the cello", &[1])]),
        Pass::Reasoning { .. } => no_conclusions(),
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", &[("alice", "Cello practice again tonight")]).await;
    let rules = ClaimRules {
        ready_tokens: 1,
        ready_after: Duration::ZERO,
        max_batch_tokens: 4096,
        lease: Duration::from_millis(800),
    };
    // Worker 1 claims the unit and dies before writing anything.
    let dead = app.store.claim_unit("w1", rules).await.unwrap().unwrap();
    assert_eq!(status(&app).await["inProgress"], 1);
    assert!(
        deriver.run_once("w2").await.unwrap().is_none(),
        "a live lease keeps the unit from other workers"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let report = deriver.run_once("w2").await.unwrap();
    assert!(
        matches!(report, Some(BatchReport::Done { messages: 1, .. })),
        "{report:?}"
    );
    // Worker 1 comes back from the dead: its writes are refused.
    let late = app.store.complete_batch(&dead, &[], &[], 0.92).await;
    assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
    let renew = app.store.renew_lease(&dead, Duration::from_secs(60)).await;
    assert!(matches!(renew, Err(StoreError::Conflict(_))), "{renew:?}");
    assert_eq!(conclusions(&app).await.len(), 1);
    assert_eq!(app.sql_i64("SELECT count(*) FROM deriver_items").await, 0);
    assert!(deriver.run_once("w2").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_queue_without_processing_a_unit_twice() {
    let fake = FakeLlm::start(|_, body| {
        let (system, user) = prompts(body);
        let reply = if system.contains("NEW messages") {
            let session = user
                .split('.')
                .next()
                .unwrap()
                .trim_start_matches("Session ");
            let who = system
                .split_whitespace()
                .nth(2)
                .unwrap()
                .trim_end_matches("'s");
            facts(&[(&format!("{who} spoke in {session}"), &[])])
        } else {
            no_conclusions()
        };
        Reply::After(Duration::from_millis(20), Box::new(Reply::json(reply)))
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    for i in 0..6 {
        say(
            &app,
            &format!("s{i}"),
            &[("alice", "hello"), ("bob", "hi there")],
        )
        .await;
    }
    let workers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let d = deriver.clone();
            tokio::spawn(async move {
                let mut units = Vec::new();
                while let Some(r) = d.run_once(name).await.unwrap() {
                    let BatchReport::Done { unit, .. } = r else {
                        panic!("{r:?}")
                    };
                    units.push(unit);
                }
                units
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut per_worker = Vec::new();
    for w in workers {
        let units = w.await.unwrap();
        per_worker.push(units.len());
        all.extend(units);
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(
        before, 12,
        "12 units (6 sessions × 2 self-observers), each once"
    );
    assert_eq!(all.len(), 12, "no unit processed twice");
    assert!(
        per_worker.iter().all(|n| *n > 0),
        "both worked: {per_worker:?}"
    );
    // Similar facts of different sessions may reinforce one another: count derivations.
    assert_eq!(
        app.sql_i64("SELECT sum(times_derived)::bigint FROM conclusions")
            .await,
        12
    );
    assert_eq!(app.sql_i64("SELECT count(*) FROM deriver_items").await, 0);
}

#[tokio::test]
async fn deriver_status_follows_workspace_keys() {
    let fake = fake(|_| facts(&[])).await;
    let (app, _) = app_with(&fake).await;
    say(&app, "s", &[("alice", "hello")]).await;
    let app = app.auth_on();
    let query = "{ workspace(id: \"w\") { deriverStatus { pending inProgress failed } } }";
    let mine = bearer(KeySpec {
        workspace: Some("w".into()),
        ..KeySpec::default()
    });
    let resp = app.exec_as(Some(&mine), query, json!({})).await;
    assert_eq!(
        resp["data"]["workspace"]["deriverStatus"],
        json!({"pending": 1, "inProgress": 0, "failed": 0}),
        "{resp}"
    );
    let other = bearer(KeySpec {
        workspace: Some("x".into()),
        ..KeySpec::default()
    });
    let resp = app.exec_as(Some(&other), query, json!({})).await;
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "{resp}"
    );
    let retry = "mutation { retryFailedDerivations(workspaceId: \"w\") }";
    let resp = app.exec_as(Some(&mine), retry, json!({})).await;
    assert_eq!(
        resp["errors"][0]["extensions"]["code"], "FORBIDDEN",
        "admin only: {resp}"
    );
}

/// The real binary with HONCHO_LLM pointed at the fake: `createMessages` over HTTP becomes
/// conclusions with no other call, and the deriver's counters are on `/metrics`.
#[tokio::test]
async fn serve_derives_in_the_background_when_an_llm_is_configured() {
    let fake = fake(|pass| match pass {
        Pass::Explicit { .. } => facts(&[("Alice collects vinyl records", &[1])]),
        Pass::Reasoning { user } => json!({"conclusions": [{"level": "deductive",
            "content": "Alice owns a record player",
            "source_ids": [id_of(user, "Alice collects vinyl records")]}]}),
    })
    .await;
    let db = crate::harness::blank_database().await;
    let server = ServerProcess::start(
        &db,
        &[
            ("HONCHO_LLM", "openai"),
            ("HONCHO_LLM_BASE_URL", &fake.url),
            ("HONCHO_LLM_MODEL", "fake-model"),
            ("HONCHO_DERIVER_BATCH_SECS", "0"),
            ("HONCHO_DERIVER_POLL_MS", "50"),
        ],
    )
    .await;
    let admin = bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    });
    let body = json!({"query": "mutation { createMessages(workspaceId: \"w\", sessionId: \"s\", \
        messages: [{peerId: \"alice\", content: \"My vinyl collection passed 500 records\"}]) { id } }"});
    let (status, resp) = server.post(body.to_string(), Some(&admin)).await;
    assert_eq!(status, 200, "{resp}");
    let query = json!({"query": "{ workspace(id: \"w\") { conclusions(first: 10) { nodes { content level sourceIds } } } }"});
    let started = std::time::Instant::now();
    let nodes = loop {
        let (_, resp) = server.post(query.to_string(), Some(&admin)).await;
        let nodes = resp["data"]["workspace"]["conclusions"]["nodes"].clone();
        if nodes.as_array().is_some_and(|n| n.len() == 2) {
            break nodes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing derived: {resp}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let levels: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["level"].as_str().unwrap())
        .collect();
    assert!(
        levels.contains(&"EXPLICIT") && levels.contains(&"DEDUCTIVE"),
        "{nodes}"
    );
    let metrics = server.get_text("/metrics").await;
    assert!(
        metrics.contains("honcho_deriver_batches_total{outcome=\"ok\"} 1"),
        "{metrics}"
    );
}
