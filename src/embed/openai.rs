//! Any OpenAI-compatible embeddings endpoint: `POST {base_url}/embeddings` with
//! `{"model": …, "input": [...]}`, answered by `{"data": [{"index": i, "embedding": [...]}, ...]}`.
//!
//! Vectors are asked for as `encoding_format: "base64"` (little-endian f32, about a quarter of the
//! bytes of JSON floats and no float parsing: 100 texts at 1536 dims are ~0.8 MB instead of ~3.3 MB).
//! Servers that answer with float arrays anyway are read as well; a server that refuses the field
//! (a 4xx other than auth, rate limit or timeout) is asked again without it, and from then on always.
//!
//! Inputs are sent in requests of at most [`OPENAI_MAX_INPUTS_PER_REQUEST`] texts, one request at a time.
//! Each attempt has the configured timeout; 408, 429, 5xx, timeouts and connection errors are retried up to
//! `max_retries` times with exponential backoff and jitter (a `Retry-After` in seconds is honoured up to
//! 10 s), so one request takes at most about `(max_retries + 1) × timeout + Σ backoff` (with the defaults,
//! 4 × 30 s + < 4 s). Other statuses fail at once. Vectors of another length than the configured dims are an
//! error; vectors are L2-normalised before they are returned (OpenAI's already are; cosine is unaffected).
//! An answer longer than [`max_answer_bytes`] for its inputs (room for every vector as JSON floats) is an
//! error, found before it is read whole.

use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use serde::Deserialize;

use super::{EmbedConfig, EmbedError, Embedder, l2_normalize};
use crate::retry::{Failure, PostError, Target, TargetSettings, post_json};

/// Most texts sent in one HTTP request.
pub const OPENAI_MAX_INPUTS_PER_REQUEST: usize = 96;

/// The longest answer read for `inputs` vectors of `dims` dimensions: each as JSON floats of up
/// to 32 characters (base64 takes under 6 per float), with 1 KiB per vector and 64 KiB per answer
/// for the rest of the JSON.
pub fn max_answer_bytes(inputs: usize, dims: usize) -> usize {
    64 * 1024 + inputs * (1024 + 32 * dims)
}

/// Embedder for an OpenAI-compatible HTTP API; see the module docs.
pub struct OpenAiEmbedder {
    target: Target,
    dims: usize,
    /// Set once the endpoint has refused `encoding_format: "base64"`.
    floats_only: AtomicBool,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("url", &self.target.url)
            .field("model", &self.target.model)
            .field("dims", &self.dims)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Encoded,
    index: Option<usize>,
}

/// An embedding as the server sent it: base64 of little-endian f32s, or a JSON array.
/// Base64 is tried first: it is what we ask for, and an untagged enum that tries `Floats` first on
/// a string formats the whole string into the discarded error.
#[derive(Deserialize)]
#[serde(untagged)]
enum Encoded {
    Base64(String),
    Floats(Vec<f32>),
}

impl Encoded {
    fn decode(self) -> Result<Vec<f32>, EmbedError> {
        match self {
            Encoded::Floats(v) => Ok(v),
            Encoded::Base64(text) => {
                let bytes = STANDARD
                    .decode(text.as_bytes())
                    .map_err(|e| EmbedError::BadResponse(format!("bad base64 embedding: {e}")))?;
                if bytes.len() % 4 != 0 {
                    return Err(EmbedError::BadResponse(format!(
                        "a base64 embedding of {} bytes is not a list of f32",
                        bytes.len()
                    )));
                }
                Ok(bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect())
            }
        }
    }
}

/// A client error that may mean the server does not know `encoding_format` (not auth, not a
/// missing route, not rate limiting): worth one more try asking for floats.
fn may_refuse_base64(e: &PostError) -> bool {
    match &e.failure {
        Failure::Status { status, .. } => {
            status.is_client_error()
                && ![
                    StatusCode::UNAUTHORIZED,
                    StatusCode::FORBIDDEN,
                    StatusCode::NOT_FOUND,
                    StatusCode::REQUEST_TIMEOUT,
                    StatusCode::TOO_MANY_REQUESTS,
                ]
                .contains(status)
        }
        _ => false,
    }
}

impl OpenAiEmbedder {
    /// Checks the settings and prepares the HTTP client; no request is made.
    pub fn new(cfg: &EmbedConfig) -> Result<Self, EmbedError> {
        let target = Target::new(&TargetSettings {
            base_url: &cfg.openai_base_url,
            base_url_var: "HONCHO_OPENAI_BASE_URL",
            path: "/embeddings",
            model: &cfg.openai_model,
            model_var: "HONCHO_OPENAI_MODEL",
            api_key: cfg.openai_api_key.as_deref(),
            timeout_secs: cfg.timeout.as_secs_f64(),
            timeout_var: "HONCHO_OPENAI_TIMEOUT_SECS",
            connect_timeout: None,
            max_retries: cfg.max_retries,
        })
        .map_err(EmbedError::Config)?;
        if cfg.openai_dims == 0 {
            return Err(EmbedError::Config(
                "HONCHO_OPENAI_DIMS must be positive".into(),
            ));
        }
        migration::check_embedding_dims(u32::try_from(cfg.openai_dims).unwrap_or(u32::MAX))
            .map_err(EmbedError::Config)?;
        Ok(Self {
            target,
            dims: cfg.openai_dims,
            floats_only: AtomicBool::new(false),
        })
    }

    /// One request for `texts` (at most [`OPENAI_MAX_INPUTS_PER_REQUEST`]), with retries.
    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let endpoint = self
            .target
            .endpoint(max_answer_bytes(texts.len(), self.dims));
        let mut base64 = !self.floats_only.load(Ordering::Relaxed);
        loop {
            let body = if base64 {
                serde_json::json!({ "model": self.target.model, "input": texts, "encoding_format": "base64" })
            } else {
                serde_json::json!({ "model": self.target.model, "input": texts })
            };
            match post_json(&endpoint, &body).await {
                Ok(bytes) => {
                    let vectors = self.parse(&bytes, texts.len())?;
                    if !base64 && !self.floats_only.swap(true, Ordering::Relaxed) {
                        tracing::info!("the embeddings endpoint refuses base64; asking for floats");
                    }
                    return Ok(vectors);
                }
                // Remembered only once floats succeed: a 400 for another reason (input too long)
                // must not switch the encoding for good.
                Err(e) if base64 && may_refuse_base64(&e) => base64 = false,
                Err(e) => return Err(self.error(e)),
            }
        }
    }

    fn error(&self, e: PostError) -> EmbedError {
        let attempts = e.attempts;
        match e.failure {
            Failure::Timeout => EmbedError::Timeout {
                attempts,
                timeout: self.target.timeout,
            },
            Failure::Transport(message) => EmbedError::Http {
                status: None,
                attempts,
                message,
            },
            Failure::Status { status, message } => EmbedError::Http {
                status: Some(status.as_u16()),
                attempts,
                message,
            },
            Failure::TooLarge(limit) => EmbedError::BadResponse(format!(
                "the answer is longer than {limit} bytes, the most read for its inputs"
            )),
        }
    }

    fn parse(&self, body: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let response: EmbeddingsResponse = serde_json::from_slice(body)
            .map_err(|e| EmbedError::BadResponse(format!("not an embeddings response: {e}")))?;
        if response.data.len() != expected {
            return Err(EmbedError::BadResponse(format!(
                "{} embeddings for {expected} inputs",
                response.data.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
        for (position, item) in response.data.into_iter().enumerate() {
            let index = item.index.unwrap_or(position);
            let embedding = item.embedding.decode()?;
            if embedding.len() != self.dims {
                return Err(EmbedError::Dimension {
                    expected: self.dims,
                    got: embedding.len(),
                });
            }
            match slots.get_mut(index) {
                Some(slot @ None) => *slot = Some(embedding),
                _ => {
                    return Err(EmbedError::BadResponse(format!(
                        "embedding index {index} is out of range or repeated"
                    )));
                }
            }
        }
        // Every slot is filled: `expected` distinct indices below `expected`.
        let mut vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
        for v in &mut vectors {
            if v.iter().any(|x| !x.is_finite()) {
                return Err(EmbedError::BadResponse(
                    "non-finite number in an embedding".into(),
                ));
            }
            l2_normalize(v);
        }
        Ok(vectors)
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    fn model_id(&self) -> &str {
        &self.target.model_id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(OPENAI_MAX_INPUTS_PER_REQUEST) {
            out.extend(self.request(chunk).await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EmbedderKind;
    use axum::Json;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode as AxumStatus};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use serde_json::{Value, json};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What the stub answers to request number `n` (1-based).
    type Script = dyn Fn(u32, &Value) -> Reply + Send + Sync;

    enum Reply {
        /// A proper embeddings response with vectors of this many dimensions.
        Embeddings(usize),
        Status(u16, Value),
        Sleep(Duration),
        Raw(Value),
    }

    struct Stub {
        hits: AtomicU32,
        script: Box<Script>,
        requests: Mutex<Vec<(Option<String>, Value)>>,
    }

    /// Deterministic, not normalised, distinct per text length: [len + 1, 1, 0, …].
    fn fake_vector(text: &str, dims: usize) -> Vec<f32> {
        let mut v = vec![0.0; dims];
        v[0] = text.len() as f32 + 1.0;
        v[1] = 1.0;
        v
    }

    async fn handle(
        State(stub): State<Arc<Stub>>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Response {
        let n = stub.hits.fetch_add(1, Ordering::SeqCst) + 1;
        let auth = headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned());
        stub.requests.lock().unwrap().push((auth, body.clone()));
        match (stub.script)(n, &body) {
            Reply::Embeddings(dims) => {
                let inputs = body["input"].as_array().unwrap();
                // Reversed on purpose: clients must order by `index`.
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, t)| {
                        let v = fake_vector(t.as_str().unwrap(), dims);
                        let embedding = if body["encoding_format"] == "base64" {
                            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                            json!(STANDARD.encode(bytes))
                        } else {
                            json!(v)
                        };
                        json!({"object": "embedding", "index": i, "embedding": embedding})
                    })
                    .collect();
                Json(json!({"object": "list", "data": data, "model": body["model"]}))
                    .into_response()
            }
            Reply::Status(code, value) => {
                let mut r = (AxumStatus::from_u16(code).unwrap(), Json(value)).into_response();
                if code == 429 {
                    r.headers_mut().insert("retry-after", "0".parse().unwrap());
                }
                r
            }
            Reply::Sleep(d) => {
                tokio::time::sleep(d).await;
                Json(json!({"data": []})).into_response()
            }
            Reply::Raw(value) => Json(value).into_response(),
        }
    }

    /// Starts the stub on 127.0.0.1:0 and returns it with its base URL.
    async fn stub(
        script: impl Fn(u32, &Value) -> Reply + Send + Sync + 'static,
    ) -> (Arc<Stub>, String) {
        let state = Arc::new(Stub {
            hits: AtomicU32::new(0),
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .route("/v1/embeddings", post(handle))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (state, format!("http://{addr}/v1"))
    }

    fn config(base_url: &str, dims: usize) -> EmbedConfig {
        EmbedConfig {
            kind: EmbedderKind::OpenAi,
            openai_base_url: base_url.to_owned(),
            openai_model: "stub-model".into(),
            openai_api_key: Some("sk-test".into()),
            openai_dims: dims,
            timeout: Duration::from_secs(5),
            max_retries: 2,
            ..EmbedConfig::default()
        }
    }

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    #[tokio::test]
    async fn happy_path_orders_by_index_and_normalises() {
        let (stub, url) = stub(|_, _| Reply::Embeddings(8)).await;
        let e = crate::embed::build(&config(&url, 8)).unwrap().unwrap();
        assert_eq!(e.dims(), 8);
        assert_eq!(e.model_id(), "openai:stub-model");
        let texts = strings(&["a", "three", "sixteen letters!"]);
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 3);
        for (t, x) in texts.iter().zip(&v) {
            let mut want = fake_vector(t, 8);
            l2_normalize(&mut want);
            assert_eq!(x, &want, "vector for {t:?}");
        }
        assert_eq!(stub.hits.load(Ordering::SeqCst), 1);
        let requests = stub.requests.lock().unwrap();
        let (auth, body) = &requests[0];
        assert_eq!(auth.as_deref(), Some("Bearer sk-test"));
        assert_eq!(
            body,
            &json!({"model": "stub-model", "input": texts, "encoding_format": "base64"})
        );
    }

    #[tokio::test]
    async fn large_inputs_are_split_into_requests_and_keep_order() {
        let (stub, url) = stub(|_, _| Reply::Embeddings(4)).await;
        let mut cfg = config(&url, 4);
        cfg.openai_api_key = None;
        let e = OpenAiEmbedder::new(&cfg).unwrap();
        let texts: Vec<String> = (0..200).map(|i| "x".repeat(i)).collect();
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 200);
        for (t, x) in texts.iter().zip(&v) {
            let mut want = fake_vector(t, 4);
            l2_normalize(&mut want);
            assert_eq!(x, &want);
        }
        assert_eq!(stub.hits.load(Ordering::SeqCst), 3); // 96 + 96 + 8
        assert!(
            stub.requests
                .lock()
                .unwrap()
                .iter()
                .all(|(a, _)| a.is_none())
        );
        assert!(e.embed(&[]).await.unwrap().is_empty());
        assert_eq!(stub.hits.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn server_error_then_success_is_retried() {
        let (stub, url) = stub(|n, _| match n {
            1 => Reply::Status(500, json!({"error": {"message": "boom"}})),
            2 => Reply::Status(429, json!({"error": {"message": "slow down"}})),
            _ => Reply::Embeddings(8),
        })
        .await;
        let e = OpenAiEmbedder::new(&config(&url, 8)).unwrap();
        let v = e.embed(&strings(&["hello"])).await.unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(stub.hits.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn retries_are_bounded() {
        let (stub, url) =
            stub(|_, _| Reply::Status(503, json!({"error": {"message": "down"}}))).await;
        let e = OpenAiEmbedder::new(&config(&url, 8)).unwrap();
        let err = e.embed(&strings(&["hello"])).await.unwrap_err();
        match &err {
            EmbedError::Http {
                status: Some(503),
                attempts: 3,
                message,
            } => assert_eq!(message, "down"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(stub.hits.load(Ordering::SeqCst), 3);
        assert!(!err.to_string().contains("sk-test"));
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        let (stub, url) =
            stub(|_, _| Reply::Status(400, json!({"error": {"message": "input is too long"}})))
                .await;
        let e = OpenAiEmbedder::new(&config(&url, 8)).unwrap();
        let err = e.embed(&strings(&["hello"])).await.unwrap_err();
        assert!(
            matches!(&err, EmbedError::Http { status: Some(400), attempts: 1, message }
                if message == "input is too long"),
            "{err:?}"
        );
        // Once as base64, once as floats (the 400 could have meant "no base64"), no retries.
        assert_eq!(stub.hits.load(Ordering::SeqCst), 2);
        assert!(
            !e.floats_only.load(Ordering::SeqCst),
            "a refusal for another reason does not switch the encoding"
        );
    }

    #[tokio::test]
    async fn wrong_dimension_is_an_error() {
        let (stub, url) = stub(|_, _| Reply::Embeddings(7)).await;
        let e = OpenAiEmbedder::new(&config(&url, 8)).unwrap();
        let err = e.embed(&strings(&["hello", "world"])).await.unwrap_err();
        assert!(
            matches!(
                err,
                EmbedError::Dimension {
                    expected: 8,
                    got: 7
                }
            ),
            "{err:?}"
        );
        assert_eq!(stub.hits.load(Ordering::SeqCst), 1, "not retried");
    }

    #[tokio::test]
    async fn malformed_responses_are_errors() {
        let (_, url) = stub(|n, _| match n {
            1 => Reply::Raw(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
            2 => Reply::Raw(json!({"data": [
                {"index": 0, "embedding": [1.0, 0.0]},
                {"index": 0, "embedding": [0.0, 1.0]}]})),
            _ => Reply::Raw(json!({"nothing": true})),
        })
        .await;
        let e = OpenAiEmbedder::new(&config(&url, 2)).unwrap();
        for _ in 0..3 {
            let err = e.embed(&strings(&["a", "b"])).await.unwrap_err();
            assert!(matches!(err, EmbedError::BadResponse(_)), "{err:?}");
        }
    }

    #[tokio::test]
    async fn timeouts_are_bounded_and_retried() {
        let (stub, url) = stub(|_, _| Reply::Sleep(Duration::from_secs(30))).await;
        let mut cfg = config(&url, 8);
        cfg.timeout = Duration::from_millis(200);
        cfg.max_retries = 1;
        let e = OpenAiEmbedder::new(&cfg).unwrap();
        // Generous outer bound: the call must end by itself (2 × 200 ms + one backoff), not hang.
        let err = tokio::time::timeout(Duration::from_secs(20), e.embed(&strings(&["hello"])))
            .await
            .expect("the embedder's own timeout must fire")
            .unwrap_err();
        assert!(
            matches!(err, EmbedError::Timeout { attempts: 2, .. }),
            "{err:?}"
        );
        assert_eq!(stub.hits.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn connection_refused_is_retried_then_reported() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener); // nothing listens there now
        let mut cfg = config(&format!("http://{addr}/v1"), 8);
        cfg.max_retries = 1;
        let e = OpenAiEmbedder::new(&cfg).unwrap();
        let err = e.embed(&strings(&["hello"])).await.unwrap_err();
        assert!(
            matches!(
                err,
                EmbedError::Http {
                    status: None,
                    attempts: 2,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_endpoint_that_refuses_base64_is_asked_for_floats_from_then_on() {
        let (stub, url) = stub(|_, body| {
            if body.get("encoding_format").is_some() {
                Reply::Status(
                    422,
                    json!({"error": {"message": "unknown field encoding_format"}}),
                )
            } else {
                Reply::Embeddings(8)
            }
        })
        .await;
        let e = OpenAiEmbedder::new(&config(&url, 8)).unwrap();
        for text in ["hello", "again"] {
            let v = e.embed(&strings(&[text])).await.unwrap();
            let mut want = fake_vector(text, 8);
            l2_normalize(&mut want);
            assert_eq!(v, vec![want]);
        }
        let requests = stub.requests.lock().unwrap();
        let formats: Vec<bool> = requests
            .iter()
            .map(|(_, b)| b.get("encoding_format").is_some())
            .collect();
        assert_eq!(
            formats,
            [true, false, false],
            "refused once, then floats only"
        );
    }

    #[tokio::test]
    async fn an_answer_longer_than_its_inputs_need_is_refused_unread_and_not_retried() {
        let bloat = "x".repeat(max_answer_bytes(1, 8));
        let (stub, url) = stub(move |_, _| {
            Reply::Raw(json!({"data": [{"index": 0, "embedding": vec![0.5f32; 8]}], "pad": bloat}))
        })
        .await;
        let e = crate::embed::build(&config(&url, 8)).unwrap().unwrap();
        let err = e.embed(&strings(&["hi"])).await.unwrap_err();
        assert!(
            matches!(&err, EmbedError::BadResponse(m) if m.contains("longer than")),
            "{err:?}"
        );
        assert_eq!(stub.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn base64_that_is_not_a_list_of_f32_is_a_bad_response() {
        let (_, url) = stub(|n, _| match n {
            1 => Reply::Raw(json!({"data": [{"index": 0, "embedding": "AAAA!"}]})),
            _ => Reply::Raw(json!({"data": [{"index": 0, "embedding": "AAAAAAA="}]})),
        })
        .await;
        let e = OpenAiEmbedder::new(&config(&url, 2)).unwrap();
        for _ in 0..2 {
            let err = e.embed(&strings(&["a"])).await.unwrap_err();
            assert!(matches!(err, EmbedError::BadResponse(_)), "{err:?}");
        }
    }

    #[test]
    fn rejects_bad_settings() {
        let mut cfg = config("ftp://example.com", 8);
        assert!(matches!(
            OpenAiEmbedder::new(&cfg),
            Err(EmbedError::Config(_))
        ));
        cfg.openai_base_url = "http://localhost:1/v1".into();
        cfg.openai_dims = 0;
        assert!(matches!(
            OpenAiEmbedder::new(&cfg),
            Err(EmbedError::Config(_))
        ));
    }
}
