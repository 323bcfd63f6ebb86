//! Chat models, for the deriver and the dialectic.
//!
//! One trait, [`Llm`]: ask for a JSON object of a given JSON Schema and get it back, or for
//! plain text (the dialectic's answers), whole or streamed as the model writes it. One
//! implementation, [`OpenAiChat`], for any OpenAI-compatible `POST {base}/chat/completions`
//! (OpenAI, llama.cpp's server, vLLM, Ollama, LM Studio). Many local servers ignore or reject
//! OpenAI's structured-output options, so a request degrades in steps ([`OutputMode`]) until one
//! works, and the step that worked is remembered for the endpoint. An answer that is still not a
//! JSON object of the expected shape is an error the caller records, never an empty result.
//!
//! An answer is read up to [`MAX_ANSWER_BYTES`], whole or streamed: a longer one is
//! [`LlmError::TooLarge`], not read further and not asked again.
//!
//! `HONCHO_LLM=none` (the default) builds no LLM: [`build`] returns `None`.

mod args;
mod extract;
mod openai;

use std::sync::Arc;
use std::time::Duration;

pub use args::{LlmArgs, LlmKind};
pub use extract::{conforms, json_object_in};
pub use openai::OpenAiChat;

/// The most bytes of one answer's HTTP body that are read (the server-sent events of a streamed
/// one counted together). The longest answer asked for, 8,192 tokens, streamed one token per
/// event of a few hundred bytes, is under a quarter of it.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// How the answer's shape is asked for, from the strictest to the loosest. A request starts at
/// the endpoint's remembered step and moves down when a step fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OutputMode {
    /// `response_format: {type: json_schema}`: the server constrains decoding to the schema.
    JsonSchema,
    /// `response_format: {type: json_object}`, the schema in the prompt.
    JsonObject,
    /// No `response_format`; the schema in the prompt, the JSON extracted from the text and
    /// repaired when it is almost JSON.
    Text,
}

impl OutputMode {
    pub const ALL: [OutputMode; 3] = [
        OutputMode::JsonSchema,
        OutputMode::JsonObject,
        OutputMode::Text,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::JsonSchema => "json_schema",
            OutputMode::JsonObject => "json_object",
            OutputMode::Text => "text",
        }
    }

    fn index(self) -> u8 {
        self as u8
    }

    fn from_index(i: u8) -> OutputMode {
        Self::ALL[usize::from(i).min(2)]
    }
}

/// A request for one JSON object.
#[derive(Clone, Debug)]
pub struct JsonRequest {
    /// Instructions (the system message).
    pub system: String,
    /// The material (the user message).
    pub user: String,
    /// A short name for the schema (`[A-Za-z0-9_-]`, as OpenAI requires).
    pub schema_name: String,
    /// JSON Schema of the answer: an object; its `required` keys must be present.
    pub schema: serde_json::Value,
    /// Most tokens the answer may have.
    pub max_tokens: u32,
}

/// A request for a plain-text answer.
#[derive(Clone, Debug)]
pub struct TextRequest {
    /// Instructions (the system message).
    pub system: String,
    /// The material and the question (the user message).
    pub user: String,
    /// Most tokens the answer may have.
    pub max_tokens: u32,
}

/// The object the model answered with, and how it was obtained.
#[derive(Clone, Debug)]
pub struct JsonReply {
    pub value: serde_json::Value,
    pub mode: OutputMode,
    /// The answer was read from the reasoning field (its content was empty).
    pub from_reasoning: bool,
    /// The JSON had to be repaired (fences, prose around it, a missing brace, a trailing comma).
    pub repaired: bool,
}

/// Everything that can go wrong asking a model.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("LLM configuration: {0}")]
    Config(String),
    /// A non-retryable status, or retries exhausted on 429/5xx/connection errors. The message
    /// never contains the API key.
    #[error("LLM request failed after {attempts} attempt(s){}: {message}",
        status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Http {
        status: Option<u16>,
        attempts: u32,
        message: String,
    },
    #[error("LLM request timed out after {attempts} attempt(s) of {timeout:?} each")]
    Timeout { attempts: u32, timeout: Duration },
    /// The answer's body passed [`MAX_ANSWER_BYTES`]; what was read of it is dropped.
    #[error("the LLM's answer is longer than {0} bytes, the most that is read of one")]
    TooLarge(usize),
    /// The server's answer is not a chat completion.
    #[error("LLM server sent an invalid response: {0}")]
    BadResponse(String),
    /// The model's answer is not a JSON object of the expected shape, even in plain-text mode
    /// with repair.
    #[error("the model's answer is not the JSON asked for ({reason}); it began: {excerpt:?}")]
    Unparseable { reason: String, excerpt: String },
}

/// A streamed plain-text answer: its pieces in order, as the model writes them. An error is the
/// last item; dropping the stream stops the request.
pub type TextStream = futures::stream::BoxStream<'static, Result<String, LlmError>>;

/// Asks a chat model for JSON. Implementations are cheap to share (`Arc<dyn Llm>`).
#[async_trait::async_trait]
pub trait Llm: Send + Sync {
    /// `openai:<model>` and the like, for logs.
    fn model_id(&self) -> &str;
    /// One JSON object of `req.schema`'s shape.
    async fn complete_json(&self, req: &JsonRequest) -> Result<JsonReply, LlmError>;
    /// A plain-text answer (`content`, or the reasoning field when the content is empty).
    async fn complete_text(&self, req: &TextRequest) -> Result<String, LlmError>;
    /// The answer of [`Llm::complete_text`] in pieces as they are written. A request the server
    /// refuses is the outer error; a failure after its answer began is the stream's last item.
    async fn stream_text(&self, req: &TextRequest) -> Result<TextStream, LlmError>;
}

/// Builds the configured LLM client; `Ok(None)` for `HONCHO_LLM=none`. No request is made.
pub fn build(cfg: &LlmArgs) -> Result<Option<Arc<dyn Llm>>, LlmError> {
    Ok(match cfg.kind {
        LlmKind::None => None,
        LlmKind::Openai => Some(Arc::new(OpenAiChat::new(cfg)?)),
    })
}
