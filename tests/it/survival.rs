//! No request takes the process down. The requests here once did (a stack overflow in the parser
//! or validation, an 80 GB allocation); they run against the real binary, because an abort kills
//! whatever process it happens in and only another process can see that it survived.

use std::time::{Duration, Instant};

use honcho_graphql::auth::KeySpec;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::{ServerProcess, TestApp, bearer, seeded_w1};

fn body(query: &str) -> String {
    json!({ "query": query }).to_string()
}

/// The first error of a refused request: its code and the limit it names.
fn refusal(resp: &Value) -> (&str, &str) {
    let e = &resp["errors"][0]["extensions"];
    (
        e["code"].as_str().unwrap_or(""),
        e["limit"].as_str().unwrap_or(""),
    )
}

#[tokio::test]
async fn deeply_nested_literals_are_refused_before_parsing_and_the_server_lives() {
    let app = TestApp::new().await;
    let server = ServerProcess::start(&app._db, &[]).await;
    let list = |n: usize| {
        format!(
            "{{workspace(id:\"W1\"){{messages(filters:{}1{}){{totalCount}}}}}}",
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    let object = |n: usize| {
        format!(
            "{{workspace(id:\"W1\"){{messages(filters:{}1{}){{totalCount}}}}}}",
            "{a:".repeat(n),
            "}".repeat(n)
        )
    };
    // 2,000 and 5,000 levels overflowed the stack once; 300-400 overflowed a debug build too.
    for query in [list(2000), object(5000), list(400), object(300), list(70)] {
        let (status, resp) = server.post(body(&query), None).await;
        assert_eq!(status, 400, "{resp}");
        assert_eq!(
            refusal(&resp),
            ("BAD_USER_INPUT", "HONCHO_MAX_NESTING"),
            "{resp}"
        );
        assert!(server.alive(), "the server died");
    }
    // Within the limit the document is parsed and executed as usual (and fails validation on
    // its own terms, not the limit's).
    let (status, resp) = server.post(body(&list(20)), None).await;
    assert_eq!(status, 200, "{resp}");
    assert_ne!(refusal(&resp).1, "HONCHO_MAX_NESTING", "{resp}");
    assert!(server.healthy().await);
}

#[tokio::test]
async fn a_long_chain_of_fragments_is_refused_before_validation() {
    let app = TestApp::new().await;
    let server = ServerProcess::start(&app._db, &[]).await;
    let chain = |n: usize| {
        let mut q = String::from("{...F1}");
        for i in 1..n {
            q.push_str(&format!(" fragment F{i} on QueryRoot {{...F{}}}", i + 1));
        }
        q.push_str(&format!(" fragment F{n} on QueryRoot {{__typename}}"));
        q
    };
    let started = Instant::now();
    let (status, resp) = server.post(body(&chain(5000)), None).await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(refusal(&resp), ("BAD_USER_INPUT", "HONCHO_MAX_FRAGMENTS"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(server.alive(), "the server died");
    // Up to the default of 100 fragments the document reaches validation, which answers on its
    // own terms: a chain deeper than async-graphql's recursion limit (32) is an error, a short one
    // is a valid query.
    let (status, resp) = server.post(body(&chain(100)), None).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(refusal(&resp).0, "BAD_USER_INPUT", "{resp}");
    assert_eq!(refusal(&resp).1, "", "{resp}");
    let (status, resp) = server.post(body(&chain(20)), None).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["data"]["__typename"], "QueryRoot", "{resp}");
}

#[tokio::test]
async fn a_document_of_too_many_tokens_is_refused() {
    let app = TestApp::new().await;
    let server = ServerProcess::start(&app._db, &[("HONCHO_MAX_TOKENS", "1000")]).await;
    let many = format!("{{{}}}", "__typename ".repeat(1000));
    let (status, resp) = server.post(body(&many), None).await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(refusal(&resp), ("BAD_USER_INPUT", "HONCHO_MAX_TOKENS"));
    assert_eq!(resp["errors"][0]["extensions"]["max"], 1000);
}

#[tokio::test]
async fn a_peer_key_asking_for_a_huge_context_window_gets_an_error_not_an_abort() {
    let app = seeded_w1().await;
    let server = ServerProcess::start(&app._db, &[]).await;
    let key = bearer(KeySpec {
        workspace: Some("W1".into()),
        peer: Some("alice".into()),
        ..Default::default()
    });
    let query = r#"{workspace(id:"W1"){session(id:"s"){messages(first:1){nodes{context(before:0,after:2147483647){id}}}}}}"#;
    let (status, resp) = server.post(body(query), Some(&key)).await;
    // The cost of such a window is refused before anything runs (a window within the cost but
    // out of range is refused by the resolvers and look-aheads: the test below).
    assert_eq!(status, 400, "{resp}");
    assert_eq!(
        refusal(&resp),
        ("BAD_USER_INPUT", "HONCHO_MAX_COMPLEXITY"),
        "{resp}"
    );
    assert!(server.alive(), "the server died");
    // The same key still reads within the limit.
    let ok = r#"{workspace(id:"W1"){session(id:"s"){messages(first:1){nodes{context(before:0,after:10){id}}}}}}"#;
    let (_, resp) = server.post(body(ok), Some(&key)).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let ctx = &resp["data"]["workspace"]["session"]["messages"]["nodes"][0]["context"];
    assert_eq!(ctx.as_array().map(Vec::len), Some(5), "{resp}");
}

#[tokio::test]
async fn configured_limits_above_their_ceilings_stop_the_server_at_start() {
    let app = TestApp::new().await;
    for (var, value) in [
        ("HONCHO_MAX_NESTING", "129"),
        ("HONCHO_MAX_FRAGMENTS", "501"),
        ("HONCHO_MAX_NESTING", "0"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_honcho-graphql"))
            .arg("serve")
            .env("DATABASE_URL", app._db.url())
            .env("HONCHO_LISTEN", "127.0.0.1:0")
            .env("HONCHO_EMBEDDER", "none")
            .env(var, value)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{var}={value} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(value), "{var}={value}: {stderr}");
    }
}

/// Every place that reads `context(before, after)` ahead of its resolver: a list of messages, the
/// matches of a search and their snippets, `context` inside `context`, and the messages a
/// mutation returns.
#[tokio::test]
async fn every_path_to_a_context_window_refuses_one_out_of_range() {
    let app = seeded_w1().await;
    // Just out of range, so the document's cost lets it through to the checks themselves.
    let ctx = "context(before: 0, after: 11) { id }";
    let queries = [
        format!(r#"{{ workspace(id: "W1") {{ messages {{ nodes {{ {ctx} }} }} }} }}"#),
        format!(r#"{{ workspace(id: "W1") {{ messages {{ edges {{ node {{ {ctx} }} }} }} }} }}"#),
        format!(
            r#"{{ workspace(id: "W1") {{ session(id: "s") {{ messages(first: 2) {{ nodes {{ context {{ {ctx} }} }} }} }} }} }}"#
        ),
        format!(
            r#"{{ workspace(id: "W1") {{ search(query: "message") {{ ... on MessageHits {{ results {{ {ctx} }} }} }} }} }}"#
        ),
        format!(
            r#"{{ workspace(id: "W1") {{ search(query: "message", includeContext: true) {{ ... on SnippetHits {{ snippets {{ matched {{ {ctx} }} context {{ {ctx} }} }} }} }} }} }}"#
        ),
        r#"{ workspace(id: "W1") { messages { nodes { context(before: -1) { id } } } } }"#.into(),
        r#"{ workspace(id: "W1") { messages { nodes { context(after: 11) { id } } } } }"#.into(),
    ];
    for q in &queries {
        let (code, msg) = app.err(q, json!({})).await;
        assert_eq!(code, "BAD_USER_INPUT", "{q}: {msg}");
        assert!(msg.contains("between 0 and 10"), "{q}: {msg}");
    }
}

#[tokio::test]
async fn create_messages_refuses_an_out_of_range_context_before_writing() {
    let app = seeded_w1().await;
    let q = r#"mutation { createMessages(workspaceId: "W1", sessionId: "s",
        messages: [{peerId: "alice", content: "one more"}]) { id context(after: 2147483647) { id } } }"#;
    let (code, msg) = app.err(q, json!({})).await;
    assert_eq!(code, "BAD_USER_INPUT", "{msg}");
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages").await,
        5,
        "nothing is written"
    );
}

fn nested(depth: usize, open: &'static str, close: &'static str) -> String {
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

/// Random documents built from the pieces that hurt parsers (deep brackets, fragments, strings,
/// comments, huge numbers), and random bytes, sent to the real binary: every answer is an HTTP
/// response with a coded GraphQL error or data, and the process lives. Cases: HONCHO_FUZZ_CASES
/// (default 200).
#[test]
fn fuzzed_documents_never_take_the_server_down() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (app, server) = rt.block_on(async {
        let app = seeded_w1().await;
        let server = ServerProcess::start(&app._db, &[]).await;
        (app, server)
    });
    let key = bearer(KeySpec {
        workspace: Some("W1".into()),
        peer: Some("alice".into()),
        ..Default::default()
    });
    let piece = prop_oneof![
        (0usize..3000).prop_map(|n| nested(n, "[", "]")),
        (0usize..3000).prop_map(|n| nested(n, "{a:", "}")),
        (0usize..600).prop_map(|n| "{".repeat(n)),
        (0usize..600).prop_map(|n| "(".repeat(n)),
        (0usize..700).prop_map(|n| (0..n)
            .map(|i| format!(" fragment F{i} on QueryRoot {{...F{}}}", i + 1))
            .collect()),
        (any::<i64>(), any::<i64>())
            .prop_map(|(b, a)| format!("context(before:{b},after:{a}){{id}}")),
        "\"[^\"]{0,40}\"".prop_map(|s| s),
        Just("\"\"\"".to_owned()),
        Just("#".to_owned()),
        Just("...".to_owned()),
        "[a-z{}()\\[\\]:,!$@ ]{0,30}".prop_map(|s| s),
    ];
    let prefix = prop_oneof![
        Just(r#"{workspace(id:"W1"){messages(filters:"#.to_owned()),
        Just(r#"{workspace(id:"W1"){session(id:"s"){messages{nodes{"#.to_owned()),
        Just("query Q($v: JSON) ".to_owned()),
        Just(String::new()),
    ];
    let cases = std::env::var("HONCHO_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (
        prefix,
        proptest::collection::vec(piece, 1..6),
        any::<bool>(),
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(prefix, pieces, with_key, as_json)| {
        let query = format!("{prefix}{}", pieces.concat());
        let raw = if as_json { body(&query) } else { query.clone() };
        let auth = with_key.then_some(key.as_str());
        let (status, resp) = rt.block_on(server.post(raw, auth));
        prop_assert!(server.alive(), "the server died on {query:.300}");
        prop_assert!(
            [200u16, 400, 413, 415, 422].contains(&status),
            "status {status} for {query:.300}"
        );
        if let Some(errors) = resp.get("errors").and_then(Value::as_array) {
            for e in errors {
                prop_assert!(
                    e["extensions"]["code"].is_string(),
                    "an uncoded error {e} for {query:.300}"
                );
            }
        }
        Ok(())
    });
    assert!(
        rt.block_on(server.healthy()),
        "the server stopped answering"
    );
    drop(server);
    drop(app);
    result.unwrap();
}
