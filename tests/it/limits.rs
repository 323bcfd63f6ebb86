//! Limits and failure behaviour: every error is coded, limits hold, the database going away is a
//! typed, retryable error and the pool recovers by itself.

use std::process::Command;
use std::time::{Duration, Instant};

use honcho_graphql::graphql::{self, Limits, build_schema};
use honcho_graphql::store::Store;
use migration::MigratorTrait;
use proptest::prelude::*;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::harness::{Served, TestApp, get_text};

const CODES: [&str; 7] = [
    "BAD_USER_INPUT",
    "NOT_FOUND",
    "CONFLICT",
    "UNAUTHENTICATED",
    "FORBIDDEN",
    "SERVICE_UNAVAILABLE",
    "INTERNAL_SERVER_ERROR",
];

fn codes(resp: &Value) -> Vec<String> {
    resp["errors"]
        .as_array()
        .map(|errs| {
            errs.iter()
                .map(|e| {
                    e["extensions"]["code"]
                        .as_str()
                        .unwrap_or("<none>")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn syntax_validation_depth_and_complexity_errors_are_coded() {
    let app = TestApp::new().await;
    for doc in [
        "{ workspace(id: ",
        "{ nope }",
        "{ workspace(id: \"w\") { peers(first: \"x\") { totalCount } } }",
        "{ workspace(id: \"w\") { session(id: \"s\") { messages { nodes { session { messages { nodes { session { messages { nodes { session { messages { nodes { session { messages { nodes { id } } } } } } } } } } } } } } } } }",
    ] {
        let resp = app.exec(doc, json!({})).await;
        let c = codes(&resp);
        assert!(!c.is_empty(), "{doc} should fail");
        assert!(c.iter().all(|c| c == "BAD_USER_INPUT"), "{doc}: {c:?}");
    }
    let tight = build_schema(
        app.store.clone(),
        &Limits {
            max_complexity: 5,
            ..Limits::default()
        },
    );
    let resp = serde_json::to_value(
        graphql::execute(
            &tight,
            async_graphql::Request::new("{ workspace(id: \"w\") { id metadata configuration createdAt peers { totalCount } } }"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(codes(&resp), ["BAD_USER_INPUT"], "{resp}");
}

#[tokio::test]
async fn a_document_sent_again_is_costed_for_its_new_variables_and_keeps_its_errors() {
    let app = TestApp::new().await;
    let tight = build_schema(
        app.store.clone(),
        &Limits {
            max_complexity: 30,
            ..Limits::default()
        },
    );
    let run = |doc: &'static str, vars: Value| {
        let schema = tight.clone();
        async move {
            let req = async_graphql::Request::new(doc)
                .variables(async_graphql::Variables::from_json(vars));
            serde_json::to_value(graphql::execute(&schema, req).await).unwrap()
        }
    };
    // The same text, kept parsed after the first request: the page size comes from each
    // request's own variables, so the second is refused and the third is not.
    let page = "query P($n: Int) { workspaces(first: $n) { nodes { id metadata } } }";
    for (n, refused) in [(2, false), (50, true), (3, false)] {
        let resp = run(page, json!({ "n": n })).await;
        assert_eq!(
            codes(&resp) == ["BAD_USER_INPUT"],
            refused,
            "first: {n}: {resp}"
        );
    }
    // A document that does not parse is refused each time it comes.
    for _ in 0..2 {
        assert_eq!(
            codes(&run("{ workspaces(", json!({})).await),
            ["BAD_USER_INPUT"]
        );
    }
}

#[tokio::test]
async fn introspection_can_be_switched_off() {
    let app = TestApp::new().await;
    let q = "{ __schema { queryType { name } } }";
    assert!(app.exec(q, json!({})).await.get("errors").is_none());
    let closed = build_schema(
        app.store.clone(),
        &Limits {
            introspection: false,
            ..Limits::default()
        },
    );
    let resp =
        serde_json::to_value(graphql::execute(&closed, async_graphql::Request::new(q)).await)
            .unwrap();
    assert!(
        resp.get("errors").is_some() || resp["data"]["__schema"].is_null(),
        "{resp}"
    );
}

#[tokio::test]
async fn a_statement_over_the_timeout_is_service_unavailable_and_writes_nothing() {
    let app = TestApp::new().await;
    let url = app._db.url();
    let store = Store::connect(&url, 4, Some(Duration::from_millis(300)))
        .await
        .unwrap();
    let schema = build_schema(store.clone(), &Limits::default());
    // Another connection holds the session's write lock, so the write waits past the timeout.
    let blocker = sea_orm::Database::connect(url).await.unwrap();
    let txn = sea_orm::TransactionTrait::begin(&blocker).await.unwrap();
    txn.execute_unprepared("SELECT pg_advisory_xact_lock(hashtext('ws'), hashtext('s'))")
        .await
        .unwrap();
    let started = Instant::now();
    let resp = serde_json::to_value(
        graphql::execute(
            &schema,
            async_graphql::Request::new(
                "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [{peerId: \"a\", content: \"x\"}]) { id } }",
            ),
        )
        .await,
    )
    .unwrap();
    assert_eq!(codes(&resp), ["SERVICE_UNAVAILABLE"], "{resp}");
    assert!(started.elapsed() < Duration::from_secs(3));
    txn.rollback().await.unwrap();
    assert_eq!(app.sql_i64("SELECT count(*) FROM messages").await, 0);
}

#[tokio::test]
async fn http_answers_carry_request_ids_and_metrics_count_operations() {
    let app = TestApp::new().await;
    let router = honcho_graphql::http::router(app.schema.clone(), app.store.clone(), 1 << 20);
    let server = Served::start(router).await;
    let graphql = server.url("/graphql");
    let client = honcho_graphql::outbound::client();
    let resp = client
        .post(&graphql)
        .json(&json!({"query": "query MetricsProbe { workspace(id: \"x\") { id } }", "operationName": "MetricsProbe"}))
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("x-request-id").is_some());
    // Without operationName, the document's one named operation names it.
    client
        .post(&graphql)
        .json(&json!({"query": "query ImplicitName { workspace(id: \"x\") { id } }"}))
        .send()
        .await
        .unwrap();
    let echoed = client
        .post(&graphql)
        .header("x-request-id", "trace-me-42")
        .json(&json!({"query": "{ __typename }"}))
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-me-42");
    let text = get_text(&server.url("/metrics")).await;
    assert!(
        text.contains("honcho_graphql_requests_total{operation=\"MetricsProbe\",outcome=\"ok\"}"),
        "{text}"
    );
    assert!(
        text.contains("honcho_graphql_requests_total{operation=\"ImplicitName\",outcome=\"ok\"}"),
        "{text}"
    );
    assert!(text.contains("honcho_graphql_request_duration_seconds_bucket"));
}

fn pg_bin() -> Option<std::path::PathBuf> {
    let mut versions: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn as_postgres(bin: &std::path::Path, args: &[&str]) -> bool {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    let mut cmd = if is_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A private PostgreSQL cluster restarted under the server: requests during the outage fail fast
/// with SERVICE_UNAVAILABLE, and the pool recovers without a restart of ours.
#[tokio::test]
async fn the_server_survives_postgresql_restarting() {
    let Some(bin) = pg_bin() else {
        crate::harness::skip("no PostgreSQL server binaries under /usr/lib/postgresql");
        return;
    };
    let dir = format!("/tmp/honcho-restart-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _ = Command::new("chown")
        .args(["postgres:postgres", &dir])
        .status();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let data = format!("{dir}/data");
    assert!(
        as_postgres(
            &bin.join("initdb"),
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"]
        ),
        "initdb"
    );
    let opts = format!("-p {port} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off");
    let log = format!("{dir}/log");
    let start = || {
        as_postgres(
            &bin.join("pg_ctl"),
            &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"],
        )
    };
    let stop = || {
        as_postgres(
            &bin.join("pg_ctl"),
            &["-D", &data, "-m", "fast", "-w", "stop"],
        )
    };
    assert!(start(), "pg_ctl start");

    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let store = Store::connect(&url, 4, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    migration::Migrator::up(store.db(), None).await.unwrap();
    let schema = build_schema(store.clone(), &Limits::default());
    let write = |n: usize| {
        let schema = schema.clone();
        async move {
            let q = format!(
                "mutation {{ createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [{{peerId: \"a\", content: \"m{n}\"}}]) {{ seqInSession }} }}"
            );
            serde_json::to_value(graphql::execute(&schema, async_graphql::Request::new(q)).await)
                .unwrap()
        }
    };
    assert!(write(1).await.get("errors").is_none());

    assert!(stop(), "pg_ctl stop");
    let t = Instant::now();
    let during = write(2).await;
    let took = t.elapsed();
    assert_eq!(codes(&during), ["SERVICE_UNAVAILABLE"], "{during}");
    assert!(took < Duration::from_secs(5), "failed fast: {took:?}");

    assert!(start(), "pg_ctl start again");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut recovered = None;
    while Instant::now() < deadline {
        let r = write(3).await;
        if r.get("errors").is_none() {
            recovered = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recovered = recovered.expect("the pool reconnects by itself");
    assert_eq!(
        recovered["data"]["createMessages"][0]["seqInSession"], 2,
        "the failed write left no gap"
    );
    store.db().clone().close().await.ok();
    stop();
    let _ = std::fs::remove_dir_all(&dir);
}

fn arb_document() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        "workspace",
        "workspaces",
        "peer",
        "session",
        "message",
        "conclusion",
        "peers",
        "sessions",
        "messages",
        "conclusions",
        "nodes",
        "edges",
        "node",
        "id",
        "content",
        "metadata",
        "search",
        "results",
        "snippets",
        "context",
        "reasoningTree",
        "sources",
        "derived",
        "totalCount",
        "seqInSession",
        "createMessages",
        "getOrCreateWorkspace",
        "__typename",
        "pageInfo",
        "bogus",
    ]);
    let args = prop::sample::select(vec![
        "",
        "(id: \"w\")",
        "(id: 1)",
        "(first: 0)",
        "(first: 5)",
        "(filters: {nope: 1})",
        "(filters: {seqInSession: {gte: \"x\"}})",
        "(query: \"hello\")",
        "(last: 200)",
        "(after: \"zzz\")",
        "(workspaceId: \"w\", sessionId: \"s\", messages: [])",
        "(id: null)",
        "(filters: [1])",
        "(limit: -1)",
        "(contextWindow: 99)",
    ]);
    let field = (names, args).prop_map(|(n, a)| format!("{n}{a}"));
    prop::collection::vec((field, 0..3usize), 1..8).prop_map(|fields| {
        let mut doc = String::new();
        let mut open = 0;
        for (f, nest) in fields {
            doc.push_str(&f);
            if nest == 1 {
                doc.push_str(" { ");
                open += 1;
            } else if nest == 2 && open > 0 {
                doc.push_str(" } ");
                open -= 1;
            } else {
                doc.push(' ');
            }
        }
        for _ in 0..open {
            doc.push('}');
        }
        let op = if doc.contains("createMessages") || doc.contains("getOrCreate") {
            "mutation"
        } else {
            "query"
        };
        format!("{op} {{ {doc} }}")
    })
}

#[test]
fn random_documents_never_panic_and_every_error_is_coded() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = rt.block_on(TestApp::new());
    // Bounded for `make test`; HONCHO_FUZZ_CASES=100000 for a long run.
    let cases = std::env::var("HONCHO_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(300);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&(arb_document(), any::<Option<i32>>()), |(doc, var)| {
            let resp = rt.block_on(async {
                futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
                    app.exec(&doc, json!({"v": var})),
                ))
                .await
            });
            let resp = resp.map_err(|_| TestCaseError::fail(format!("panic on {doc}")))?;
            for code in codes(&resp) {
                prop_assert!(
                    CODES.contains(&code.as_str()),
                    "{doc}: uncoded error {resp}"
                );
            }
            Ok(())
        })
        .unwrap();
}
