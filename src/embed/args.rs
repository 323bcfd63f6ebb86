//! The embedder's flags. Values are checked when the embedder is configured
//! ([`super::EmbedConfig::from_args`]), with messages naming the variable; a variable set to blank
//! counts as unset.

use clap::Args;

/// Which embedder, and the OpenAI-compatible endpoint's settings.
#[derive(Args, Clone, Default)]
pub struct EmbedArgs {
    /// `minilm` (in-process all-MiniLM-L6-v2, 384 dimensions), `openai` (any OpenAI-compatible
    /// /v1/embeddings) or `none` (full-text search only).
    #[arg(
        id = "embedder",
        long = "embedder",
        value_name = "KIND",
        env = "HONCHO_EMBEDDER",
        default_value = "minilm"
    )]
    pub kind: String,

    /// MiniLM model directory (config.json, tokenizer.json, model.safetensors)
    /// [default: .data/models/all-MiniLM-L6-v2, in the working directory or else the source tree]
    #[arg(long = "model-dir", env = "HONCHO_MODEL_DIR")]
    pub model_dir: Option<String>,

    /// OpenAI-compatible base URL; `/embeddings` is appended.
    #[arg(
        long = "openai-base-url",
        env = "HONCHO_OPENAI_BASE_URL",
        default_value = super::DEFAULT_OPENAI_BASE_URL
    )]
    pub openai_base_url: String,

    /// Embedding model name sent in requests.
    #[arg(
        long = "openai-model",
        env = "HONCHO_OPENAI_MODEL",
        default_value = super::DEFAULT_OPENAI_MODEL
    )]
    pub openai_model: String,

    /// Bearer token of the embeddings endpoint (optional).
    #[arg(long = "openai-api-key", env = "HONCHO_OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Vector length [default: the model's, known for OpenAI's models (1536 for
    /// text-embedding-3-small), else required]
    #[arg(long = "openai-dims", env = "HONCHO_OPENAI_DIMS")]
    pub openai_dims: Option<String>,

    /// Timeout of one embeddings request, in seconds (may be fractional).
    #[arg(long = "openai-timeout-secs", env = "HONCHO_OPENAI_TIMEOUT_SECS", default_value = "30")]
    pub openai_timeout_secs: String,

    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors (0..=10).
    #[arg(long = "openai-max-retries", env = "HONCHO_OPENAI_MAX_RETRIES", default_value = "3")]
    pub openai_max_retries: String,
}

impl std::fmt::Debug for EmbedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret; what the embedder is, is enough to tell configurations apart.
        f.debug_struct("EmbedArgs")
            .field("kind", &self.kind)
            .field("openai_model", &self.openai_model)
            .finish_non_exhaustive()
    }
}
