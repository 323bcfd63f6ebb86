//! The LLM client's flags, checked when the client is built ([`super::build`]).

use clap::Args;

/// Which LLM the deriver asks (`HONCHO_LLM`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LlmKind {
    /// No LLM: nothing is queued for derivation and no worker runs.
    #[default]
    None,
    /// Any OpenAI-compatible `POST {base}/chat/completions` (OpenAI, llama.cpp, vLLM, Ollama).
    Openai,
}

#[derive(Args, Clone)]
pub struct LlmArgs {
    /// `none` (default: no derivation) or `openai` (any OpenAI-compatible chat endpoint).
    #[arg(long = "llm", env = "HONCHO_LLM", value_enum, default_value_t = LlmKind::None)]
    pub kind: LlmKind,

    /// Base URL up to and including the version; `/chat/completions` is appended.
    #[arg(
        long = "llm-base-url",
        env = "HONCHO_LLM_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub base_url: String,

    /// Model name sent in requests.
    #[arg(long = "llm-model", env = "HONCHO_LLM_MODEL", default_value = "gpt-4o-mini")]
    pub model: String,

    /// Bearer token (optional: local servers need none).
    #[arg(long = "llm-api-key", env = "HONCHO_LLM_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Timeout of one attempt, in seconds. Local models on a CPU are slow: be generous.
    #[arg(long = "llm-timeout-secs", env = "HONCHO_LLM_TIMEOUT_SECS", default_value_t = 120.0)]
    pub timeout_secs: f64,

    /// Retries after the first attempt on 408, 429, 5xx, timeouts and connection errors.
    #[arg(long = "llm-max-retries", env = "HONCHO_LLM_MAX_RETRIES", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(0..=10))]
    pub max_retries: u32,

    /// Most requests in flight at once from this process.
    #[arg(long = "llm-concurrency", env = "HONCHO_LLM_CONCURRENCY", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
}

impl std::fmt::Debug for LlmArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmArgs")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("timeout_secs", &self.timeout_secs)
            .field("max_retries", &self.max_retries)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}
