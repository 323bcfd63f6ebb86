//! Session summaries written by the deriver against the fake LLM: at their thresholds and not
//! before, short ones building on each other, the long one, the same summary through REST,
//! GraphQL, the session context and MCP, a failing model reported and retried, a deleted message
//! taking its summaries with it, and the configuration cascade.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use honcho_graphql::deriver::{BatchReport, Deriver};
use honcho_graphql::store::summary::SummaryKind;
use serde_json::{Value, json};

use crate::fake_llm::{FakeLlm, Reply, at_once, deriving_on, format_of, prompts};
use crate::harness::{AppServer, TestApp};

/// A fake LLM: summary requests (plain text, "You write a ... summary") answered by
/// `summary(kind, user prompt)`, conclusion passes with nothing found.
async fn fake(summary: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> Arc<FakeLlm> {
    FakeLlm::start(move |_, body| {
        let (system, user) = prompts(body);
        if let Some(rest) = system.strip_prefix("You write a ") {
            assert_eq!(format_of(body), "text", "a summary is plain text");
            let kind = if rest.starts_with("concise") {
                "short"
            } else {
                "long"
            };
            return summary(kind, &user);
        }
        if system.contains("NEW messages") {
            Reply::json(json!({"facts": []}))
        } else {
            Reply::json(json!({"conclusions": []}))
        }
    })
    .await
}

/// Summary requests the fake received: (kind, user prompt).
fn summary_requests(fake: &FakeLlm) -> Vec<(String, String)> {
    fake.requests()
        .iter()
        .filter_map(|b| {
            let (system, user) = prompts(b);
            let rest = system.strip_prefix("You write a ")?;
            let kind = if rest.starts_with("concise") {
                "short"
            } else {
                "long"
            };
            Some((kind.to_owned(), user))
        })
        .collect()
}

async fn app_with(fake: &FakeLlm) -> (TestApp, Arc<Deriver>) {
    deriving_on(TestApp::new().await, fake, at_once())
}

async fn drain(d: &Deriver) -> Vec<BatchReport> {
    let mut out = Vec::new();
    while let Some(r) = d.run_once("test").await.unwrap() {
        out.push(r);
    }
    out
}

/// The (kind, to_seq) of the summaries written, in order.
fn summarized(reports: &[BatchReport]) -> Vec<(SummaryKind, i64)> {
    reports
        .iter()
        .filter_map(|r| match r {
            BatchReport::Summarized { kind, to_seq, .. } => Some((*kind, *to_seq)),
            _ => None,
        })
        .collect()
}

/// Messages `from..=to`, alternating alice and bob, in one createMessages.
async fn say(app: &TestApp, session: &str, from: usize, to: usize) -> Vec<String> {
    let messages: Vec<Value> = (from..=to)
        .map(|i| {
            let peer = if i % 2 == 1 { "alice" } else { "bob" };
            json!({"peerId": peer, "content": format!("message number {i} from {peer}")})
        })
        .collect();
    app.create_messages("w", session, messages).await
}

async fn graphql_summaries(app: &TestApp, session: &str) -> Value {
    app.ok(
        "query($s: ID!) { workspace(id: \"w\") { session(id: $s) { summaries { \
         short { kind content messageId seqInSession tokenCount createdAt } \
         long { kind content messageId seqInSession tokenCount createdAt } } } } }",
        json!({"s": session}),
    )
    .await["workspace"]["session"]["summaries"]
        .clone()
}

async fn status(app: &TestApp) -> Value {
    app.ok(
        "{ workspace(id: \"w\") { deriverStatus { pending inProgress failed \
         lastError { message sessionId } } } }",
        json!({}),
    )
    .await["workspace"]["deriverStatus"]
        .clone()
}

#[tokio::test]
async fn a_short_summary_appears_at_the_twentieth_message_and_not_before() {
    let fake = fake(|kind, _| Reply::Content(format!("The {kind} summary."))).await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", 1, 19).await;
    let reports = drain(&deriver).await;
    assert!(summarized(&reports).is_empty(), "{reports:?}");
    assert!(summary_requests(&fake).is_empty());
    let none = graphql_summaries(&app, "s").await;
    assert_eq!(none, json!({"short": null, "long": null}));

    let ids = say(&app, "s", 20, 20).await;
    let reports = drain(&deriver).await;
    assert_eq!(summarized(&reports), [(SummaryKind::Short, 20)]);
    let requests = summary_requests(&fake);
    assert_eq!(requests.len(), 1);
    let user = &requests[0].1;
    assert!(user.contains("(none: the messages below begin"), "{user}");
    assert!(user.contains("[seq 1] ") && user.contains("alice: message number 1 from alice"));
    assert!(user.contains("bob: message number 20 from bob"), "{user}");
    let both = graphql_summaries(&app, "s").await;
    assert_eq!(both["long"], Value::Null);
    let short = &both["short"];
    assert_eq!(short["kind"], "SHORT");
    assert_eq!(short["content"], "The short summary.");
    assert_eq!(short["messageId"], ids[0].as_str());
    assert_eq!(short["seqInSession"], 20);
    assert_eq!(short["tokenCount"], 4);
    assert_eq!(status(&app).await["pending"], 0);
}

#[tokio::test]
async fn short_summaries_build_on_the_previous_one_and_the_long_one_comes_at_sixty() {
    let fake = fake(|kind, user| {
        let last = user
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("[seq "))
            .and_then(|l| l.split(']').next())
            .unwrap()
            .to_owned();
        Reply::Content(format!("{kind} summary up to {last}"))
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", 1, 60).await;
    let reports = drain(&deriver).await;
    let mut done = summarized(&reports);
    done.sort_by_key(|(k, s)| (*k == SummaryKind::Long, *s));
    assert_eq!(
        done,
        [
            (SummaryKind::Short, 20),
            (SummaryKind::Short, 40),
            (SummaryKind::Short, 60),
            (SummaryKind::Long, 60)
        ]
    );
    let requests = summary_requests(&fake);
    let shorts: Vec<&String> = requests
        .iter()
        .filter(|(k, _)| k == "short")
        .map(|(_, u)| u)
        .collect();
    // Each step reads the previous summary and only the messages after it.
    assert!(shorts[1].contains("Earlier summary:\nshort summary up to 20\n"));
    assert!(!shorts[1].contains("[seq 20]") && shorts[1].contains("[seq 21]"));
    assert!(shorts[2].contains("short summary up to 40") && shorts[2].contains("[seq 60]"));
    let long: Vec<&String> = requests
        .iter()
        .filter(|(k, _)| k == "long")
        .map(|(_, u)| u)
        .collect();
    assert_eq!(long.len(), 1);
    assert!(long[0].contains("[seq 1]") && long[0].contains("[seq 60]"));
    let both = graphql_summaries(&app, "s").await;
    assert_eq!(both["short"]["content"], "short summary up to 60");
    assert_eq!(both["long"]["content"], "long summary up to 60");
    assert_eq!(both["long"]["kind"], "LONG");
    // The long one is asked to use its whole limit, the short one at most its own.
    let max_tokens: Vec<u64> = fake
        .requests()
        .iter()
        .filter(|b| prompts(b).0.starts_with("You write a "))
        .filter_map(|b| {
            b["max_tokens"]
                .as_u64()
                .or(b["max_completion_tokens"].as_u64())
        })
        .collect();
    assert!(
        max_tokens.contains(&4000) && max_tokens.contains(&1000),
        "{max_tokens:?}"
    );
}

/// An MCP tool call's structured content.
async fn mcp_call(server: &AppServer, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = server
        .client
        .post(format!("{}/mcp", server.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(value["result"]["isError"], false, "{value:#}");
    value["result"]["structuredContent"].clone()
}

#[tokio::test]
async fn rest_graphql_the_session_context_and_mcp_serve_the_same_summary() {
    let fake = fake(|_, _| Reply::Content("Alice and Bob counted to twenty.".into())).await;
    let (app, deriver) = app_with(&fake).await;
    let ids = say(&app, "s", 1, 20).await;
    drain(&deriver).await;
    let later = say(&app, "s", 21, 22).await;
    let gql = graphql_summaries(&app, "s").await["short"].clone();
    let context = app
        .ok(
            "{ workspace(id: \"w\") { session(id: \"s\") { \
             with: context(tokens: 1000) { summary { content messageId seqInSession } \
               messages { id seqInSession } } \
             without: context(tokens: 1000, summary: false) { summary { content } \
               messages { seqInSession } } } } }",
            json!({}),
        )
        .await["workspace"]["session"]
        .clone();
    let server = AppServer::start(app).await;
    let rest = |path: &str| {
        let url = format!("{}/v3/workspaces/w/sessions/s/{path}", server.base);
        let client = server.client.clone();
        async move {
            let resp = client.get(url).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Value>().await.unwrap()
        }
    };
    let summaries = rest("summaries").await;
    assert_eq!(summaries["id"], "s");
    assert_eq!(summaries["long_summary"], Value::Null);
    let short = &summaries["short_summary"];
    assert_eq!(short["content"], gql["content"]);
    assert_eq!(short["message_id"], ids[19].as_str());
    assert_eq!(short["message_id"], gql["messageId"]);
    assert_eq!(short["summary_type"], "honcho_chat_summary_short");
    assert_eq!(short["token_count"], gql["tokenCount"]);

    // The context opens with the summary and goes on after its last message.
    let with = &context["with"];
    assert_eq!(with["summary"]["content"], gql["content"]);
    let seqs: Vec<i64> = with["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [21, 22]);
    assert_eq!(with["messages"][1]["id"], later[1].as_str());
    assert_eq!(context["without"]["summary"], Value::Null);
    assert_eq!(context["without"]["messages"].as_array().unwrap().len(), 22);

    let rest_context = rest("context?tokens=1000").await;
    assert_eq!(rest_context["summary"]["content"], gql["content"]);
    assert_eq!(rest_context["summary"]["message_id"], ids[19].as_str());
    let rest_ids: Vec<&str> = rest_context["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(rest_ids, [later[0].as_str(), later[1].as_str()]);
    let plain = rest("context?tokens=1000&summary=false").await;
    assert_eq!(plain["summary"], Value::Null);
    assert_eq!(plain["messages"].as_array().unwrap().len(), 22);
    // A budget the summary does not fit two fifths of: messages only.
    let tight = rest("context?tokens=10").await;
    assert_eq!(tight["summary"], Value::Null);

    let mcp = mcp_call(
        &server,
        "get_session_context",
        json!({"workspace_id": "w", "session_id": "s", "tokens": 1000}),
    )
    .await;
    assert_eq!(mcp["summary"]["content"], gql["content"]);
    assert_eq!(mcp["summary"]["message_id"], ids[19].as_str());
    assert_eq!(mcp["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_failing_model_stops_the_summary_shows_the_error_and_a_retry_writes_it() {
    let healthy = Arc::new(AtomicBool::new(false));
    let h = healthy.clone();
    let fake = fake(move |_, _| match h.load(Ordering::SeqCst) {
        true => Reply::Content("Recovered summary.".into()),
        false => Reply::Status(500, "the model is down"),
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    say(&app, "s", 1, 20).await;
    let reports = drain(&deriver).await;
    let failed: Vec<&String> = reports
        .iter()
        .filter_map(|r| match r {
            BatchReport::Failed { error, .. } => Some(error),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{reports:?}");
    assert!(
        failed[0].starts_with("summary_short pass:"),
        "{}",
        failed[0]
    );
    // Retried by the LLM client (two retries), then stopped: nothing stands in for it.
    assert_eq!(summary_requests(&fake).len(), 3);
    assert_eq!(
        graphql_summaries(&app, "s").await,
        json!({"short": null, "long": null})
    );
    let st = status(&app).await;
    assert_eq!(st["failed"], 1, "{st}");
    assert_eq!(st["lastError"]["sessionId"], "s");
    let message = st["lastError"]["message"].as_str().unwrap();
    assert!(
        message.contains("summary_short pass") && message.contains("500"),
        "{message}"
    );
    // A stopped unit is not claimed again by itself.
    assert!(drain(&deriver).await.is_empty());

    healthy.store(true, Ordering::SeqCst);
    let resumed = app
        .ok(
            "mutation { retryFailedDerivations(workspaceId: \"w\") }",
            json!({}),
        )
        .await;
    assert_eq!(resumed["retryFailedDerivations"], 1);
    let reports = drain(&deriver).await;
    assert_eq!(summarized(&reports), [(SummaryKind::Short, 20)]);
    assert_eq!(
        graphql_summaries(&app, "s").await["short"]["content"],
        "Recovered summary."
    );
    let st = status(&app).await;
    assert_eq!((&st["failed"], &st["lastError"]), (&json!(0), &Value::Null));
}

#[tokio::test]
async fn deleting_a_message_takes_the_summaries_that_covered_it_and_they_are_rewritten() {
    let fake = fake(|_, user| {
        let first = user.contains("message number 5 from alice");
        Reply::Content(format!("summary; has message five: {first}"))
    })
    .await;
    let (app, deriver) = app_with(&fake).await;
    let ids = say(&app, "s", 1, 20).await;
    drain(&deriver).await;
    assert_eq!(
        graphql_summaries(&app, "s").await["short"]["content"],
        "summary; has message five: true"
    );
    app.ok(
        "mutation($id: ID!) { deleteMessage(workspaceId: \"w\", id: $id) { __typename } }",
        json!({"id": ids[4]}),
    )
    .await;
    assert_eq!(graphql_summaries(&app, "s").await["short"], Value::Null);
    let reports = drain(&deriver).await;
    assert_eq!(summarized(&reports), [(SummaryKind::Short, 20)]);
    assert_eq!(
        graphql_summaries(&app, "s").await["short"]["content"],
        "summary; has message five: false"
    );
}

#[tokio::test]
async fn summaries_follow_the_workspace_then_session_configuration() {
    let fake = fake(|kind, _| Reply::Content(format!("{kind} summary"))).await;
    let (app, deriver) = app_with(&fake).await;
    app.ok(
        "mutation { getOrCreateWorkspace(id: \"w\", \
         configuration: {summary: {enabled: false}}) { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { on: getOrCreateSession(workspaceId: \"w\", id: \"on\", \
           configuration: {summary: {enabled: true}}) { id } \
         ten: getOrCreateSession(workspaceId: \"w\", id: \"ten\", \
           configuration: {summary: {enabled: true, messages_per_short_summary: 10, \
             messages_per_long_summary: 20}}) { id } }",
        json!({}),
    )
    .await;
    say(&app, "off", 1, 20).await;
    say(&app, "on", 1, 20).await;
    say(&app, "ten", 1, 10).await;
    let mut done: Vec<(String, SummaryKind, i64)> = drain(&deriver)
        .await
        .into_iter()
        .filter_map(|r| match r {
            BatchReport::Summarized {
                session,
                kind,
                to_seq,
                ..
            } => Some((session, kind, to_seq)),
            _ => None,
        })
        .collect();
    done.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        done,
        [
            ("on".to_owned(), SummaryKind::Short, 20),
            ("ten".to_owned(), SummaryKind::Short, 10)
        ]
    );
    assert_eq!(
        graphql_summaries(&app, "off").await,
        json!({"short": null, "long": null})
    );
    // Turned off for a session of a workspace where they are on.
    app.ok(
        "mutation { updateWorkspace(id: \"w\", configuration: {summary: {enabled: true}}) { id } \
         updateSession(workspaceId: \"w\", id: \"ten\", configuration: {summary: {enabled: false}}) { id } }",
        json!({}),
    )
    .await;
    say(&app, "ten", 11, 20).await;
    say(&app, "off", 21, 40).await;
    let again = summarized(&drain(&deriver).await);
    // Only `off`, now on: from its first message, one period at a time.
    assert_eq!(again, [(SummaryKind::Short, 20), (SummaryKind::Short, 40)]);

    for (config, field) in [
        (
            json!({"summary": {"messages_per_short_summary": 5}}),
            "messages_per_short_summary",
        ),
        (
            json!({"summary": {"messages_per_short_summary": 30, "messages_per_long_summary": 20}}),
            "less than",
        ),
        (json!({"summary": {"enabled": "yes"}}), "summary.enabled"),
    ] {
        let (code, message) = app
            .err(
                "mutation($c: JSON!) { updateSession(workspaceId: \"w\", id: \"on\", \
                 configuration: $c) { id } }",
                json!({"c": config}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{message}");
        assert!(message.contains(field), "{message}");
    }
}
