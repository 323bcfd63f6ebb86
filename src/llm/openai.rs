//! Any OpenAI-compatible chat-completions endpoint.
//!
//! A request tries the endpoint's current [`OutputMode`] and moves down a step when the server
//! refuses the mode (400, 404, 415, 422, 501, or 5xx after the retries: llama.cpp answers 500 to
//! `json_object`) or answers with something that is not a JSON object of the schema's shape (a
//! server that ignores `json_schema` answers prose). The step that worked becomes the endpoint's
//! mode for every later request. Rate limits, timeouts and connection errors are not the mode's
//! fault: they fail the request after the retries and leave the mode alone. A concurrency cap
//! bounds the requests in flight, streamed ones until their stream is dropped.
//!
//! A streamed text answer asks with `stream: true` and reads the server-sent events of the reply
//! (`data: {chunk}` lines, then `data: [DONE]`), passing on each chunk's `delta.content` as it
//! comes. A server that ignores `stream` and answers one completion gives one piece. Either way
//! the body is read up to [`MAX_ANSWER_BYTES`] (a stream's events counted together).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    JsonReply, JsonRequest, Llm, LlmArgs, LlmError, MAX_ANSWER_BYTES, OutputMode, TextRequest,
    TextStream, conforms, json_object_in,
};
use crate::retry::{
    Endpoint, Failure, PostError, Target, TargetSettings, post_for_stream, post_json, read_capped,
};

/// Client for one OpenAI-compatible chat endpoint; see the module docs.
pub struct OpenAiChat {
    target: Target,
    permits: Arc<Semaphore>,
    /// The [`OutputMode`] that last worked here (its index); only ever moves down.
    mode: AtomicU8,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("url", &self.target.url)
            .field("model", &self.target.model)
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

/// Why one step did not give the object.
enum StepError {
    /// The mode is the likely cause: try the next step.
    Mode(LlmError),
    /// Try no further step.
    Final(LlmError),
}

impl OpenAiChat {
    /// Checks the settings and prepares the HTTP client; no request is made.
    pub fn new(cfg: &LlmArgs) -> Result<Self, LlmError> {
        let target = Target::new(&TargetSettings {
            base_url: &cfg.base_url,
            base_url_var: "HONCHO_LLM_BASE_URL",
            path: "/chat/completions",
            model: &cfg.model,
            model_var: "HONCHO_LLM_MODEL",
            api_key: cfg.api_key.as_deref(),
            timeout_secs: cfg.timeout_secs,
            timeout_var: "HONCHO_LLM_TIMEOUT_SECS",
            connect_timeout: Some(Duration::from_secs(10)),
            max_retries: cfg.max_retries,
        })
        .map_err(LlmError::Config)?;
        Ok(OpenAiChat {
            target,
            permits: Arc::new(Semaphore::new(cfg.concurrency.max(1) as usize)),
            mode: AtomicU8::new(OutputMode::JsonSchema.index()),
        })
    }

    /// The step requests start at now.
    pub fn mode(&self) -> OutputMode {
        OutputMode::from_index(self.mode.load(Ordering::Relaxed))
    }

    fn body(&self, req: &JsonRequest, mode: OutputMode) -> Value {
        let schema_text = serde_json::to_string(&req.schema).unwrap_or_default();
        let system = match mode {
            OutputMode::JsonSchema => req.system.clone(),
            OutputMode::JsonObject => format!(
                "{}\n\nAnswer with one JSON object that matches this JSON Schema:\n{schema_text}",
                req.system
            ),
            OutputMode::Text => format!(
                "{}\n\nAnswer with one JSON object that matches this JSON Schema, and nothing \
                 else (no prose, no Markdown):\n{schema_text}",
                req.system
            ),
        };
        let mut body = json!({
            "model": self.target.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": req.user},
            ],
            "temperature": 0,
            "max_tokens": req.max_tokens,
        });
        match mode {
            OutputMode::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": req.schema_name, "schema": req.schema},
                });
            }
            OutputMode::JsonObject => {
                body["response_format"] = json!({"type": "json_object"});
            }
            OutputMode::Text => {}
        }
        body
    }

    /// A place among the requests in flight (`HONCHO_LLM_CONCURRENCY`).
    async fn permit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, LlmError> {
        self.permits
            .acquire()
            .await
            .map_err(|_| LlmError::Config("the LLM client is shut down".into()))
    }

    /// A place among the requests in flight that a stream keeps until it is dropped.
    async fn owned_permit(&self) -> Result<OwnedSemaphorePermit, LlmError> {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| LlmError::Config("the LLM client is shut down".into()))
    }

    fn text_body(&self, req: &TextRequest) -> Value {
        json!({
            "model": self.target.model,
            "messages": [
                {"role": "system", "content": req.system},
                {"role": "user", "content": req.user},
            ],
            "max_tokens": req.max_tokens,
        })
    }

    fn endpoint(&self) -> Endpoint<'_> {
        self.target.endpoint(MAX_ANSWER_BYTES)
    }

    async fn step(&self, req: &JsonRequest, mode: OutputMode) -> Result<JsonReply, StepError> {
        let bytes = match post_json(&self.endpoint(), &self.body(req, mode)).await {
            Ok(b) => b,
            Err(e) => return Err(self.post_error(e)),
        };
        let (text, from_reasoning) = answer_text(&bytes).map_err(StepError::Final)?;
        let Some((value, repaired)) = json_object_in(&text) else {
            return Err(StepError::Mode(unparseable("no JSON object", &text)));
        };
        if let Err(reason) = conforms(&value, &req.schema) {
            return Err(StepError::Mode(unparseable(&reason, &text)));
        }
        Ok(JsonReply {
            value,
            mode,
            from_reasoning,
            repaired,
        })
    }

    /// A failed request's error, whatever the step.
    fn request_error(&self, e: PostError) -> LlmError {
        match self.post_error(e) {
            StepError::Mode(e) | StepError::Final(e) => e,
        }
    }

    fn post_error(&self, e: PostError) -> StepError {
        let status = e.status();
        let attempts = e.attempts;
        let err = match e.failure {
            Failure::Timeout => {
                return StepError::Final(LlmError::Timeout {
                    attempts,
                    timeout: self.target.timeout,
                });
            }
            Failure::Transport(message) => {
                return StepError::Final(LlmError::Http {
                    status: None,
                    attempts,
                    message,
                });
            }
            // Another output mode would not make the model say less.
            Failure::TooLarge(limit) => return StepError::Final(LlmError::TooLarge(limit)),
            Failure::Status { message, .. } => LlmError::Http {
                status,
                attempts,
                message,
            },
        };
        match status {
            Some(400 | 404 | 415 | 422 | 501) => StepError::Mode(err),
            Some(s) if s >= 500 => StepError::Mode(err),
            _ => StepError::Final(err),
        }
    }
}

fn unparseable(reason: &str, text: &str) -> LlmError {
    LlmError::Unparseable {
        reason: reason.to_owned(),
        excerpt: text.chars().take(200).collect(),
    }
}

/// The answer of a chat completion: `content`, or the reasoning field when the content is empty
/// (reasoning models served by vLLM, llama.cpp or Ollama may put everything there).
fn answer_text(body: &[u8]) -> Result<(String, bool), LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::BadResponse(format!("not JSON: {e}")))?;
    let message = &v["choices"][0]["message"];
    if !message.is_object() {
        return Err(LlmError::BadResponse(
            "no choices[0].message in the response".into(),
        ));
    }
    let content = message["content"].as_str().unwrap_or_default();
    if !content.trim().is_empty() {
        return Ok((content.to_owned(), false));
    }
    for field in ["reasoning_content", "reasoning"] {
        if let Some(r) = message[field].as_str().filter(|r| !r.trim().is_empty()) {
            return Ok((r.to_owned(), true));
        }
    }
    Err(LlmError::Unparseable {
        reason: "the answer is empty".into(),
        excerpt: String::new(),
    })
}

#[async_trait::async_trait]
impl Llm for OpenAiChat {
    fn model_id(&self) -> &str {
        &self.target.model_id
    }

    async fn complete_json(&self, req: &JsonRequest) -> Result<JsonReply, LlmError> {
        let _permit = self.permit().await?;
        let start = self.mode();
        let mut last = None;
        for mode in OutputMode::ALL.into_iter().filter(|m| *m >= start) {
            match self.step(req, mode).await {
                Ok(reply) => {
                    if mode > start
                        && self.mode.fetch_max(mode.index(), Ordering::Relaxed) < mode.index()
                    {
                        tracing::warn!(
                            url = %self.target.url,
                            from = start.as_str(),
                            to = mode.as_str(),
                            "the LLM endpoint did not honour structured output; using the \
                             looser step from now on"
                        );
                    }
                    return Ok(reply);
                }
                Err(StepError::Final(e)) => return Err(e),
                Err(StepError::Mode(e)) => {
                    tracing::info!(mode = mode.as_str(), error = %e, "LLM step failed; trying the next");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| LlmError::Config("no output mode left".into())))
    }

    async fn complete_text(&self, req: &TextRequest) -> Result<String, LlmError> {
        let _permit = self.permit().await?;
        let bytes = post_json(&self.endpoint(), &self.text_body(req))
            .await
            .map_err(|e| self.request_error(e))?;
        whole_text(&bytes)
    }

    async fn stream_text(&self, req: &TextRequest) -> Result<TextStream, LlmError> {
        let permit = self.owned_permit().await?;
        let mut body = self.text_body(req);
        body["stream"] = json!(true);
        let response = post_for_stream(&self.endpoint(), &body)
            .await
            .map_err(|e| self.request_error(e))?;
        let timeout = self.target.timeout;
        let events = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|t| t.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !events {
            let bytes = read_capped(response, MAX_ANSWER_BYTES)
                .await
                .map_err(|(failure, _)| {
                    self.request_error(PostError {
                        failure,
                        attempts: 1,
                    })
                })?;
            let text = whole_text(&bytes)?;
            return Ok(futures::stream::iter((!text.is_empty()).then_some(Ok(text))).boxed());
        }
        Ok(pieces(response, permit, timeout).boxed())
    }
}

/// The text of a whole completion; an empty answer is an answer (the caller says there is
/// nothing to say).
fn whole_text(body: &[u8]) -> Result<String, LlmError> {
    match answer_text(body) {
        Ok((text, _)) => Ok(text),
        Err(LlmError::Unparseable { .. }) => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// The content of a streamed completion, chunk by chunk. Reasoning deltas are kept back and
/// given only when no content came, as [`answer_text`] does for a whole completion. The request's
/// timeout covers the whole answer, so a server that stalls ends the stream with a timeout.
fn pieces(
    response: reqwest::Response,
    permit: OwnedSemaphorePermit,
    timeout: Duration,
) -> impl Stream<Item = Result<String, LlmError>> {
    async_stream::try_stream! {
        let _permit = permit;
        let mut read = 0;
        let mut events = response
            .bytes_stream()
            .map(move |chunk| {
                let chunk = chunk.map_err(Body::Broken)?;
                read += chunk.len();
                if read > MAX_ANSWER_BYTES {
                    return Err(Body::TooLarge);
                }
                Ok(chunk)
            })
            .eventsource();
        let mut reasoning = String::new();
        let mut answered = false;
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| match e {
                EventStreamError::Transport(Body::Broken(e)) => broke_off(&e, timeout),
                EventStreamError::Transport(Body::TooLarge) => LlmError::TooLarge(MAX_ANSWER_BYTES),
                e => LlmError::BadResponse(format!("the event stream is malformed: {e}")),
            })?;
            if event.data.trim() == "[DONE]" {
                break;
            }
            let (content, thought) = chunk_delta(&event.data)?;
            if let Some(text) = content.filter(|t| !t.is_empty()) {
                answered |= !text.trim().is_empty();
                yield text;
            } else if let Some(thought) = thought.filter(|_| !answered) {
                reasoning.push_str(&thought);
            }
        }
        if !answered && !reasoning.trim().is_empty() {
            yield reasoning;
        }
    }
}

/// Why a streamed answer's body stopped.
#[derive(Debug, thiserror::Error)]
enum Body {
    #[error(transparent)]
    Broken(reqwest::Error),
    /// It passed [`MAX_ANSWER_BYTES`].
    #[error("the answer is longer than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
}

/// A chunk's `delta.content` and reasoning delta; an error object sent mid-stream is an error.
fn chunk_delta(data: &str) -> Result<(Option<String>, Option<String>), LlmError> {
    let v: Value = serde_json::from_str(data)
        .map_err(|e| LlmError::BadResponse(format!("a streamed chunk is not JSON: {e}")))?;
    let error = &v["error"];
    if let Some(message) = error["message"].as_str().or(error.as_str()) {
        return Err(LlmError::Http {
            status: None,
            attempts: 1,
            message: message.to_owned(),
        });
    }
    let delta = &v["choices"][0]["delta"];
    let text = |field: &str| delta[field].as_str().map(str::to_owned);
    Ok((
        text("content"),
        text("reasoning_content").or_else(|| text("reasoning")),
    ))
}

/// The error of an answer whose body stopped coming: the timeout, or the broken connection with
/// its causes (reqwest's own text alone says only that the body could not be decoded).
fn broke_off(e: &reqwest::Error, timeout: Duration) -> LlmError {
    if e.is_timeout() {
        return LlmError::Timeout {
            attempts: 1,
            timeout,
        };
    }
    let mut message = format!("the answer broke off: {e}");
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        message.push_str(&format!(": {c}"));
        cause = c.source();
    }
    LlmError::Http {
        status: None,
        attempts: 1,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_gives_its_content_and_reasoning_or_its_error() {
        let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d}]}).to_string();
        assert_eq!(
            chunk_delta(&delta(json!({"content": "Hi"}))).unwrap(),
            (Some("Hi".to_owned()), None)
        );
        assert_eq!(
            chunk_delta(&delta(json!({"reasoning": "hm"}))).unwrap(),
            (None, Some("hm".to_owned()))
        );
        assert_eq!(
            chunk_delta(r#"{"choices": [], "usage": {}}"#).unwrap(),
            (None, None)
        );
        assert!(matches!(
            chunk_delta(r#"{"error": {"message": "overloaded"}}"#),
            Err(LlmError::Http { message, .. }) if message == "overloaded"
        ));
        assert!(matches!(
            chunk_delta("not json"),
            Err(LlmError::BadResponse(_))
        ));
    }

    #[test]
    fn content_first_then_reasoning() {
        let body = |m: Value| serde_json::to_vec(&json!({"choices": [{"message": m}]})).unwrap();
        assert_eq!(
            answer_text(&body(json!({"content": "{}", "reasoning_content": "x"}))).unwrap(),
            ("{}".to_owned(), false)
        );
        assert_eq!(
            answer_text(&body(
                json!({"content": "", "reasoning_content": "{\"a\":1}"})
            ))
            .unwrap(),
            ("{\"a\":1}".to_owned(), true)
        );
        assert_eq!(
            answer_text(&body(json!({"content": null, "reasoning": "{}"}))).unwrap(),
            ("{}".to_owned(), true)
        );
        assert!(matches!(
            answer_text(&body(json!({"content": " "}))),
            Err(LlmError::Unparseable { .. })
        ));
        assert!(matches!(
            answer_text(b"{\"choices\": []}"),
            Err(LlmError::BadResponse(_))
        ));
    }
}
