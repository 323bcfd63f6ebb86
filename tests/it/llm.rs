//! The OpenAI-compatible LLM client against the fake server: each structured-output step and the
//! fallback between them, reasoning-field replies, repair, refusal, retries and timeouts; and
//! streamed text answers, piece by piece.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use honcho_graphql::llm::{
    JsonRequest, Llm, LlmError, MAX_ANSWER_BYTES, OpenAiChat, OutputMode, TextRequest, TextStream,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::fake_llm::{Chunk, FakeLlm, Reply, format_of};
use crate::harness::TestApp;

fn request() -> JsonRequest {
    JsonRequest {
        system: "List facts.".into(),
        user: "alice: I love tea".into(),
        schema_name: "facts".into(),
        schema: json!({"type": "object", "required": ["facts"],
                       "properties": {"facts": {"type": "array"}}}),
        max_tokens: 100,
    }
}

fn facts() -> Value {
    json!({"facts": ["Alice loves tea"]})
}

#[tokio::test]
async fn json_schema_step_is_used_when_the_server_honours_it() {
    let fake = FakeLlm::start(|_, _| Reply::json(facts())).await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.value, facts());
    assert_eq!(reply.mode, OutputMode::JsonSchema);
    assert!(!reply.repaired && !reply.from_reasoning);
    let body = &fake.requests()[0];
    assert_eq!(format_of(body), "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        request().schema
    );
    assert_eq!(body["model"], "fake-model");
}

#[tokio::test]
async fn refused_json_schema_falls_back_to_json_object_and_is_remembered() {
    let fake = FakeLlm::start(|_, body| match format_of(body) {
        "json_schema" => Reply::Status(400, "response_format json_schema is not supported"),
        _ => Reply::json(facts()),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.mode, OutputMode::JsonObject);
    assert_eq!(
        fake.hits(),
        2,
        "400 is not retried: the next step is tried at once"
    );
    let (system, _) = crate::fake_llm::prompts(&fake.requests()[1]);
    assert!(
        system.contains("\"required\":[\"facts\"]"),
        "schema in the prompt: {system}"
    );
    // Remembered: the next request starts at json_object.
    llm.complete_json(&request()).await.unwrap();
    assert_eq!(fake.hits(), 3);
    assert_eq!(format_of(&fake.requests()[2]), "json_object");
    assert_eq!(llm.mode(), OutputMode::JsonObject);
}

#[tokio::test]
async fn json_object_answered_500_like_llama_cpp_falls_back_to_text() {
    let fake = FakeLlm::start(|_, body| match format_of(body) {
        "json_schema" => Reply::Status(422, "unknown response_format"),
        "json_object" => Reply::Status(500, "Internal Server Error"),
        _ => Reply::Content(format!("Here you go:\n```json\n{}\n```", facts())),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.mode, OutputMode::Text);
    assert_eq!(reply.value, facts());
    assert!(reply.repaired, "the fence and prose were stripped");
    // 1 (schema) + 3 (json_object: first try and 2 retries of the 500) + 1 (text).
    assert_eq!(fake.hits(), 5);
    llm.complete_json(&request()).await.unwrap();
    assert_eq!(fake.hits(), 6, "text is remembered");
    assert!(fake.requests()[5].get("response_format").is_none());
}

#[tokio::test]
async fn a_server_that_ignores_json_schema_and_answers_prose_is_caught() {
    let fake = FakeLlm::start(|_, body| match format_of(body) {
        "json_schema" => Reply::Content("Alice loves tea.".into()),
        _ => Reply::json(facts()),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.mode, OutputMode::JsonObject);
    assert_eq!(reply.value, facts());
}

#[tokio::test]
async fn an_answer_in_the_reasoning_field_is_read() {
    let fake = FakeLlm::start(|_, _| Reply::Reasoning(facts().to_string())).await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.value, facts());
    assert!(reply.from_reasoning);
    assert_eq!(reply.mode, OutputMode::JsonSchema);
}

#[tokio::test]
async fn malformed_json_is_repaired() {
    let fake = FakeLlm::start(|_, _| {
        Reply::Content("<think>hmm</think>{\"facts\": [\"Alice loves tea\",]".into())
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(reply.value, facts());
    assert!(reply.repaired);
}

#[tokio::test]
async fn json_of_the_wrong_shape_or_prose_at_every_step_is_refused() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::json(json!({"fact": "Alice loves tea"})),
        2 => Reply::Content("I'd rather not.".into()),
        _ => Reply::Content("Sorry, no JSON today".into()),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let err = llm.complete_json(&request()).await.unwrap_err();
    assert!(matches!(err, LlmError::Unparseable { .. }), "{err:?}");
    assert!(err.to_string().contains("Sorry, no JSON today"), "{err}");
    assert_eq!(fake.hits(), 3, "one try per step");
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::Status(429, "slow down"),
        2 => Reply::Status(500, "boom"),
        _ => Reply::json(facts()),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let reply = llm.complete_json(&request()).await.unwrap();
    assert_eq!(
        reply.mode,
        OutputMode::JsonSchema,
        "retries do not degrade the mode"
    );
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn exhausted_rate_limits_fail_without_degrading() {
    let fake = FakeLlm::start(|_, _| Reply::Status(429, "quota exceeded")).await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let err = llm.complete_json(&request()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            LlmError::Http {
                status: Some(429),
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(llm.mode(), OutputMode::JsonSchema);
    assert!(!err.to_string().contains("sk-fake"));
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let fake = FakeLlm::start(|_, _| Reply::Sleep(Duration::from_secs(30))).await;
    let mut cfg = fake.config();
    cfg.timeout_secs = 0.3;
    cfg.max_retries = 1;
    let llm = OpenAiChat::new(&cfg).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(20), llm.complete_json(&request()))
        .await
        .expect("the client's own timeout fires")
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Timeout { attempts: 2, .. }),
        "{err:?}"
    );
    assert_eq!(fake.hits(), 2);
    assert_eq!(
        llm.mode(),
        OutputMode::JsonSchema,
        "a timeout is not the mode's fault"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_cap_holds() {
    let fake = FakeLlm::start(|_, _| {
        Reply::After(Duration::from_millis(50), Box::new(Reply::json(facts())))
    })
    .await;
    let mut cfg = fake.config();
    cfg.concurrency = 2;
    let llm = Arc::new(OpenAiChat::new(&cfg).unwrap());
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let llm = llm.clone();
            tokio::spawn(async move { llm.complete_json(&request()).await.unwrap() })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
    assert_eq!(fake.hits(), 8);
    assert_eq!(fake.peak(), 2, "two at a time, never more");
}

fn question() -> TextRequest {
    TextRequest {
        system: "Answer.".into(),
        user: "What does alice do?".into(),
        max_tokens: 64,
    }
}

/// The next piece of `pieces`, failing the test if none comes within 10 s.
async fn next_piece(pieces: &mut TextStream) -> Option<Result<String, LlmError>> {
    tokio::time::timeout(Duration::from_secs(10), pieces.next())
        .await
        .expect("no piece within 10 s")
}

#[tokio::test]
async fn streamed_text_comes_piece_by_piece_before_the_model_finishes() {
    let gate = Arc::new(Notify::new());
    let held = gate.clone();
    let fake = FakeLlm::start(move |_, _| {
        Reply::Stream(vec![
            Chunk::Raw(r#"{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}"#),
            Chunk::Content("Alice"),
            Chunk::Wait(held.clone()),
            Chunk::Content(" hikes."),
            Chunk::Raw(r#"{"choices": [], "usage": {"completion_tokens": 3}}"#),
        ])
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let mut pieces = llm.stream_text(&question()).await.unwrap();
    assert_eq!(
        next_piece(&mut pieces).await.unwrap().unwrap(),
        "Alice",
        "the first piece arrives while the model still holds the rest"
    );
    gate.notify_one();
    assert_eq!(next_piece(&mut pieces).await.unwrap().unwrap(), " hikes.");
    assert!(next_piece(&mut pieces).await.is_none(), "[DONE] ends it");
    let body = &fake.requests()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn streamed_text_broken_off_midway_ends_with_the_error() {
    let fake = FakeLlm::start(|_, _| {
        Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(Duration::from_millis(100)),
            Chunk::Break,
        ])
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let mut pieces = llm.stream_text(&question()).await.unwrap();
    assert_eq!(next_piece(&mut pieces).await.unwrap().unwrap(), "Alice");
    let err = next_piece(&mut pieces).await.unwrap().unwrap_err();
    assert!(
        matches!(&err, LlmError::Http { status: None, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("broke off"), "{err}");
    assert!(next_piece(&mut pieces).await.is_none());
    assert_eq!(fake.hits(), 1, "a stream that began is never asked again");
}

#[tokio::test]
async fn an_error_chunk_midway_ends_the_stream_with_its_message() {
    let fake = FakeLlm::start(|_, _| {
        Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Raw(r#"{"error": {"message": "the GPU fell over"}}"#),
            Chunk::Content("never read"),
        ])
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let pieces: Vec<_> = llm.stream_text(&question()).await.unwrap().collect().await;
    assert_eq!(pieces.len(), 2, "{pieces:?}");
    assert_eq!(pieces[0].as_deref().unwrap(), "Alice");
    let err = pieces[1].as_ref().unwrap_err();
    assert!(err.to_string().contains("the GPU fell over"), "{err}");
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_ends() {
    let fake = FakeLlm::start(|_, _| {
        Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(Duration::from_secs(60)),
            Chunk::Content("too late"),
        ])
    })
    .await;
    let mut cfg = fake.config();
    cfg.timeout_secs = 0.5;
    let llm = OpenAiChat::new(&cfg).unwrap();
    let mut pieces = llm.stream_text(&question()).await.unwrap();
    assert_eq!(next_piece(&mut pieces).await.unwrap().unwrap(), "Alice");
    let err = next_piece(&mut pieces).await.unwrap().unwrap_err();
    assert!(
        matches!(err, LlmError::Timeout { attempts: 1, .. }),
        "{err:?}"
    );
    assert!(next_piece(&mut pieces).await.is_none());
}

#[tokio::test]
async fn a_refused_stream_request_is_retried_then_the_outer_error() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::Status(503, "loading the model"),
        2 => Reply::Stream(vec![Chunk::Content("Alice hikes.")]),
        _ => Reply::Status(401, "bad key"),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let pieces: Vec<_> = llm.stream_text(&question()).await.unwrap().collect().await;
    assert_eq!(
        fake.hits(),
        2,
        "the 503 before the answer began was retried"
    );
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].as_deref().unwrap(), "Alice hikes.");
    let Err(err) = llm.stream_text(&question()).await else {
        panic!("a 401 is refused before any piece");
    };
    assert!(
        matches!(
            &err,
            LlmError::Http {
                status: Some(401),
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn reasoning_deltas_are_the_answer_only_when_no_content_comes() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::Stream(vec![
            Chunk::Reasoning("Alice likes "),
            Chunk::Reasoning("hills."),
            Chunk::Content("\n"),
        ]),
        2 => Reply::Stream(vec![
            Chunk::Reasoning("thinking..."),
            Chunk::Content("Alice hikes."),
        ]),
        _ => Reply::Content("Not streamed.".into()),
    })
    .await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let all = |pieces: Vec<Result<String, LlmError>>| {
        pieces.into_iter().map(Result::unwrap).collect::<String>()
    };
    let only_reasoning = llm.stream_text(&question()).await.unwrap().collect().await;
    assert_eq!(all(only_reasoning), "\nAlice likes hills.");
    let with_content = llm.stream_text(&question()).await.unwrap().collect().await;
    assert_eq!(all(with_content), "Alice hikes.");
    // A server that ignores `stream` answers one completion: it is the one piece.
    let whole = llm.stream_text(&question()).await.unwrap().collect().await;
    assert_eq!(all(whole), "Not streamed.");
}

#[tokio::test]
async fn dropping_a_stream_stops_the_request_and_frees_its_place() {
    let fake = FakeLlm::start(|n, _| match n {
        1 => Reply::Stream(vec![
            Chunk::Content("Alice"),
            Chunk::Sleep(Duration::from_secs(60)),
        ]),
        _ => Reply::Stream(vec![Chunk::Content("Bob")]),
    })
    .await;
    let mut cfg = fake.config();
    cfg.concurrency = 1;
    let llm = OpenAiChat::new(&cfg).unwrap();
    let mut pieces = llm.stream_text(&question()).await.unwrap();
    assert_eq!(next_piece(&mut pieces).await.unwrap().unwrap(), "Alice");
    drop(pieces);
    // The only place is free again: a second stream starts at once.
    let second = tokio::time::timeout(Duration::from_secs(5), llm.stream_text(&question()))
        .await
        .expect("the dropped stream gave its place back");
    let second: Vec<_> = second.unwrap().collect().await;
    assert_eq!(second[0].as_deref().unwrap(), "Bob");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fake.abandoned() == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.abandoned(), 1, "the model saw its client go away");
}

/// An answer one byte longer than the client reads.
fn oversized() -> String {
    "x".repeat(MAX_ANSWER_BYTES + 1)
}

fn too_large(err: &LlmError) -> bool {
    matches!(err, LlmError::TooLarge(MAX_ANSWER_BYTES))
}

#[tokio::test]
async fn an_oversized_answer_fails_at_once_whether_its_length_is_announced_or_not() {
    for announced in [true, false] {
        let fake = FakeLlm::start(move |_, _| match announced {
            true => Reply::Content(oversized()),
            false => Reply::Unsized(oversized()),
        })
        .await;
        let llm = OpenAiChat::new(&fake.config()).unwrap();
        let err = llm.complete_json(&request()).await.unwrap_err();
        assert!(too_large(&err), "{err:?}");
        assert!(err.to_string().contains("longer than"), "{err}");
        let err = llm.complete_text(&question()).await.unwrap_err();
        assert!(too_large(&err), "{err:?}");
        // A server that ignores `stream` and answers one completion.
        let err = llm.stream_text(&question()).await.err().unwrap();
        assert!(too_large(&err), "{err:?}");
        assert_eq!(
            fake.hits(),
            3,
            "neither retried nor asked in another output mode"
        );
        assert_eq!(llm.mode(), OutputMode::JsonSchema);
    }
}

#[tokio::test]
async fn a_streamed_answer_longer_than_the_cap_ends_with_the_error() {
    let piece = "x".repeat(64 * 1024);
    let pieces = MAX_ANSWER_BYTES / piece.len() + 1;
    let fake =
        FakeLlm::start(move |_, _| Reply::Stream(vec![Chunk::Repeat(piece.clone(), pieces)])).await;
    let llm = OpenAiChat::new(&fake.config()).unwrap();
    let got: Vec<_> = llm.stream_text(&question()).await.unwrap().collect().await;
    let (last, read) = got.split_last().unwrap();
    assert!(too_large(last.as_ref().unwrap_err()), "{last:?}");
    assert!(read.iter().all(Result::is_ok));
    assert!(read.len() < pieces, "{} pieces passed on", read.len());
}

#[tokio::test]
async fn an_oversized_chat_answer_fails_the_request_as_service_unavailable() {
    let fake = FakeLlm::start(|_, _| Reply::Content(oversized())).await;
    let app = TestApp::new().await.with_llm(&fake.config());
    app.ok(
        "mutation { createMessages(workspaceId: \"w\", sessionId: \"s\", \
         messages: [{peerId: \"alice\", content: \"I hike\"}]) { id } }",
        json!({}),
    )
    .await;
    let (code, message) = app
        .err(
            "{ workspace(id: \"w\") { peer(id: \"alice\") { chat(query: \"What does alice do?\") } } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "SERVICE_UNAVAILABLE");
    assert!(message.contains("longer than"), "{message}");
}
