//! A fake OpenAI-compatible chat server, in-process, with scripted replies: the tests' LLM.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use honcho_graphql::llm::{LlmArgs, LlmKind};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// What the server answers to one request.
pub enum Reply {
    /// A completion whose message content is this text.
    Content(String),
    /// [`Reply::Content`] sent in pieces, with no `Content-Length`.
    Unsized(String),
    /// A completion with empty content and this text in `reasoning_content`.
    Reasoning(String),
    /// An error status with an OpenAI-style error body.
    Status(u16, &'static str),
    /// Waits this long, then answers `{}` (for timeouts).
    Sleep(Duration),
    /// Waits this long, then answers the reply.
    After(Duration, Box<Reply>),
    /// Server-sent events, as a request with `stream: true` asks for: each chunk in turn, then
    /// `data: [DONE]` unless a chunk broke the connection first.
    Stream(Vec<Chunk>),
}

/// One step of a streamed reply.
pub enum Chunk {
    /// A chunk whose `delta.content` is this text.
    Content(&'static str),
    /// A chunk whose delta has only `reasoning_content`.
    Reasoning(&'static str),
    /// A `data:` line as it is.
    Raw(&'static str),
    /// This many chunks, each with this `delta.content`.
    Repeat(String, usize),
    /// Nothing more is sent until the test opens the gate.
    Wait(Arc<Notify>),
    /// Nothing more is sent for this long.
    Sleep(Duration),
    /// The connection is cut, the response unfinished.
    Break,
}

impl Reply {
    pub fn json(v: Value) -> Reply {
        Reply::Content(v.to_string())
    }
}

type Script = dyn Fn(u32, &Value) -> Reply + Send + Sync;

pub struct FakeLlm {
    hits: AtomicU32,
    in_flight: AtomicU32,
    peak: AtomicU32,
    abandoned: Arc<AtomicU32>,
    script: Box<Script>,
    requests: Mutex<Vec<Value>>,
    pub url: String,
}

impl FakeLlm {
    /// Starts a server answering request number `n` (1-based) with `script(n, body)`.
    pub async fn start(script: impl Fn(u32, &Value) -> Reply + Send + Sync + 'static) -> Arc<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = Arc::new(FakeLlm {
            hits: AtomicU32::new(0),
            in_flight: AtomicU32::new(0),
            peak: AtomicU32::new(0),
            abandoned: Arc::new(AtomicU32::new(0)),
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
            url: format!("http://{addr}/v1"),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    pub fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }

    /// Most requests that were in flight at once.
    pub fn peak(&self) -> u32 {
        self.peak.load(Ordering::SeqCst)
    }

    /// Streamed replies whose client went away before the reply was finished.
    pub fn abandoned(&self) -> u32 {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// A client configuration pointing here (fast retries, short timeout).
    pub fn config(&self) -> LlmArgs {
        LlmArgs {
            kind: LlmKind::Openai,
            base_url: self.url.clone(),
            model: "fake-model".into(),
            api_key: Some("sk-fake".into()),
            timeout_secs: 5.0,
            max_retries: 2,
            concurrency: 4,
        }
    }
}

async fn handle(State(fake): State<Arc<FakeLlm>>, Json(body): Json<Value>) -> Response {
    let n = fake.hits.fetch_add(1, Ordering::SeqCst) + 1;
    fake.requests.lock().unwrap().push(body.clone());
    let now = fake.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    fake.peak.fetch_max(now, Ordering::SeqCst);
    let reply = (fake.script)(n, &body);
    let response = answer(n, &body, reply, &fake.abandoned).await;
    fake.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn answer(n: u32, body: &Value, reply: Reply, abandoned: &Arc<AtomicU32>) -> Response {
    let completion = |message: Value| {
        Json(json!({
            "id": format!("chatcmpl-{n}"),
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }))
        .into_response()
    };
    match reply {
        Reply::Content(text) => completion(json!({"role": "assistant", "content": text})),
        Reply::Unsized(text) => {
            let body = completion(json!({"role": "assistant", "content": text}));
            let bytes = axum::body::to_bytes(body.into_body(), usize::MAX)
                .await
                .unwrap();
            let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                bytes.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(futures::stream::iter(pieces)))
                .unwrap()
        }
        Reply::Reasoning(text) => {
            completion(json!({"role": "assistant", "content": "", "reasoning_content": text}))
        }
        Reply::Status(code, message) => (
            StatusCode::from_u16(code).unwrap(),
            [("retry-after", "0")],
            Json(json!({"error": {"message": message}})),
        )
            .into_response(),
        Reply::Sleep(d) => {
            tokio::time::sleep(d).await;
            Json(json!({})).into_response()
        }
        Reply::After(d, reply) => {
            tokio::time::sleep(d).await;
            Box::pin(answer(n, body, *reply, abandoned)).await
        }
        Reply::Stream(chunks) => stream(n, chunks, abandoned.clone()),
    }
}

/// Counts a streamed reply as abandoned when it is dropped before its end.
struct Unfinished(Option<Arc<AtomicU32>>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(count) = self.0.take() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn stream(n: u32, chunks: Vec<Chunk>, abandoned: Arc<AtomicU32>) -> Response {
    let delta = move |delta: Value| -> Result<String, std::io::Error> {
        let chunk = json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        Ok(format!("data: {chunk}\n\n"))
    };
    let events = async_stream::stream! {
        let mut unfinished = Unfinished(Some(abandoned));
        for chunk in chunks {
            match chunk {
                Chunk::Content(text) => yield delta(json!({"content": text})),
                Chunk::Reasoning(text) => yield delta(json!({"reasoning_content": text})),
                Chunk::Raw(data) => yield Ok(format!("data: {data}\n\n")),
                Chunk::Repeat(text, n) => {
                    for _ in 0..n {
                        yield delta(json!({"content": &text}));
                    }
                }
                Chunk::Wait(gate) => gate.notified().await,
                Chunk::Sleep(d) => tokio::time::sleep(d).await,
                Chunk::Break => {
                    unfinished.0 = None;
                    yield Err(std::io::Error::other("the fake model broke off"));
                    return;
                }
            }
        }
        unfinished.0 = None;
        yield Ok("data: [DONE]\n\n".to_owned());
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(events))
        .unwrap()
}

/// The `response_format.type` of a request (`text` when there is none).
pub fn format_of(body: &Value) -> &str {
    body["response_format"]["type"].as_str().unwrap_or("text")
}

/// The system and user messages of a request.
pub fn prompts(body: &Value) -> (String, String) {
    let text = |i: usize| {
        body["messages"][i]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    (text(0), text(1))
}

/// A deriver's settings that take a batch as soon as it is queued.
pub fn at_once() -> honcho_graphql::deriver::DeriverArgs {
    honcho_graphql::deriver::DeriverArgs {
        batch_secs: 0.0,
        ..Default::default()
    }
}

/// `app` with its store queueing messages for the deriver, and a deriver with `cfg` asking
/// `fake`.
pub fn deriving_on(
    app: crate::harness::TestApp,
    fake: &FakeLlm,
    cfg: honcho_graphql::deriver::DeriverArgs,
) -> (
    crate::harness::TestApp,
    Arc<honcho_graphql::deriver::Deriver>,
) {
    let app = app.deriving();
    let llm = honcho_graphql::llm::build(&fake.config()).unwrap().unwrap();
    let deriver = honcho_graphql::deriver::Deriver::new(app.store.clone(), llm, cfg);
    (app, Arc::new(deriver))
}

/// `app` with auth on and chats answered by the model `llm` names.
pub fn with_dialectic(mut app: crate::harness::TestApp, llm: &LlmArgs) -> crate::harness::TestApp {
    let llm = honcho_graphql::llm::build(llm).unwrap().unwrap();
    app.schema = honcho_graphql::graphql::build_schema_with(
        app.store.clone(),
        &honcho_graphql::graphql::Limits::default(),
        crate::harness::auth(),
        None,
        Some(honcho_graphql::dialectic::Dialectic::new(llm)),
    );
    app
}
