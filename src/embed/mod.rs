//! Text embeddings: which model turns text into the vectors search and conclusions use.
//!
//! One trait, [`Embedder`], with two providers:
//! - [`MiniLm`]: all-MiniLM-L6-v2 run in-process with candle on the CPU (the default). 384 dimensions,
//!   attention-mask-weighted mean pooling, L2-normalised, like sentence-transformers. Texts longer than
//!   256 word pieces (the model's `max_seq_length`) are truncated: only their beginning is embedded.
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `POST {base_url}/embeddings` endpoint, with per-request
//!   timeouts, bounded retries (exponential backoff with jitter) and a check of the returned dimension.
//!
//! `HONCHO_EMBEDDER=none` means no embedder at all: [`build`] returns `None` and search is full-text only.
//!
//! Both providers return unit-length vectors, one per input, in input order.
//!
//! **Blank texts.** Embedding an empty or whitespace-only text gives no useful vector. Callers that store
//! embeddings should skip such texts (store no embedding); [`embed_non_blank`] does exactly that. If a blank
//! text is passed to [`Embedder::embed`] anyway, MiniLM returns the model's embedding of the empty sequence
//! (`[CLS] [SEP]`, a fixed unit vector, the same as sentence-transformers returns) and never a zero vector
//! (which has no cosine); an HTTP provider forwards the text and may reject it (OpenAI answers 400).
//!
//! Its flags are [`EmbedArgs`] (every variable in `--help`), checked by [`EmbedConfig::from_args`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod args;
mod minilm;
mod openai;

pub use args::EmbedArgs;
pub use minilm::{
    MINILM_BATCH_SIZE, MINILM_MAX_SEQ_LEN, MINILM_MODEL_ID, MiniLm, MiniLmModel,
    settle_thread_count,
};
pub use openai::{OPENAI_MAX_INPUTS_PER_REQUEST, OpenAiEmbedder};

/// Turns texts into vectors. Implementations are cheap to share (`Arc<dyn Embedder>`).
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// Length of every vector [`Embedder::embed`] returns.
    fn dims(&self) -> usize;
    /// Stable identifier of the model, recorded next to stored vectors (e.g. `all-MiniLM-L6-v2`,
    /// `openai:text-embedding-3-small`). Vectors from different model ids are not comparable.
    fn model_id(&self) -> &str;
    /// Embeds `texts` (any number, batched internally); the result has one unit vector per text, in order.
    /// An empty slice gives an empty result without any work.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Everything that can go wrong while configuring, loading or running an embedder.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// A model file (or the model directory) is missing.
    #[error(
        "embedding model file missing: {} does not exist; run `make setup` (or scripts/fetch-model.sh) \
         to download all-MiniLM-L6-v2, point HONCHO_MODEL_DIR at a directory holding config.json, \
         tokenizer.json and model.safetensors, or set HONCHO_EMBEDDER=none for full-text search only",
        path.display()
    )]
    ModelFiles { path: PathBuf },
    /// The model files exist but could not be read or understood.
    #[error("cannot load the embedding model from {}: {message}", path.display())]
    ModelLoad { path: PathBuf, message: String },
    /// Invalid configuration (environment variables).
    #[error("embedding configuration: {0}")]
    Config(String),
    /// Tokenisation or the forward pass failed.
    #[error("embedding inference failed: {0}")]
    Inference(String),
    /// The inference worker thread is gone (it only stops when the embedder is dropped).
    #[error("the embedding worker has stopped")]
    WorkerStopped,
    /// The in-process model's queue stayed full for as long as a caller may wait: more is being
    /// embedded than the model keeps up with. Worth retrying.
    #[error("the embedder is busy ({queued} batches queued, waited {waited_ms} ms); retry shortly")]
    Busy { queued: usize, waited_ms: u64 },
    /// The HTTP provider failed: a non-retryable status, or retries exhausted on 429/5xx/connection errors.
    /// `status` is `None` for transport errors. The message never contains the API key.
    #[error("embedding request failed after {attempts} attempt(s){}: {message}",
        status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Http {
        status: Option<u16>,
        attempts: u32,
        message: String,
    },
    /// Every attempt of the HTTP provider timed out.
    #[error("embedding request timed out after {attempts} attempt(s) of {timeout:?} each")]
    Timeout { attempts: u32, timeout: Duration },
    /// The provider answered with something that is not a valid embeddings response.
    #[error("embedding provider sent an invalid response: {0}")]
    BadResponse(String),
    /// The provider's vectors do not have the configured dimension.
    #[error(
        "embedding provider returned vectors of {got} dimensions, configured for {expected} \
         (set HONCHO_OPENAI_DIMS to the model's dimension)"
    )]
    Dimension { expected: usize, got: usize },
}

/// Which embedder to run: `HONCHO_EMBEDDER = minilm (default) | openai | none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbedderKind {
    #[default]
    MiniLm,
    OpenAi,
    None,
}

impl std::str::FromStr for EmbedderKind {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "minilm" | "" => Ok(Self::MiniLm),
            "openai" => Ok(Self::OpenAi),
            "none" | "off" => Ok(Self::None),
            other => Err(EmbedError::Config(format!(
                "HONCHO_EMBEDDER={other:?} is not one of minilm, openai, none"
            ))),
        }
    }
}

/// Directory name of the default model under `.data/models/`.
pub const DEFAULT_MODEL_SUBDIR: &str = ".data/models/all-MiniLM-L6-v2";
/// Default `HONCHO_OPENAI_BASE_URL`.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Default `HONCHO_OPENAI_MODEL`.
pub const DEFAULT_OPENAI_MODEL: &str = "text-embedding-3-small";

/// Embedder settings. Build one with [`EmbedConfig::from_env`] (or literally, e.g. in tests, starting from
/// `EmbedConfig::default()`, which is MiniLM from the default model directory).
#[derive(Clone)]
pub struct EmbedConfig {
    pub kind: EmbedderKind,
    /// Directory with config.json, tokenizer.json and model.safetensors (MiniLM only).
    pub model_dir: PathBuf,
    /// Base URL up to and including the version, e.g. `https://api.openai.com/v1`; `/embeddings` is appended.
    pub openai_base_url: String,
    pub openai_model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub openai_api_key: Option<String>,
    /// Expected vector length; responses with another length are an error.
    pub openai_dims: usize,
    /// Timeout of one HTTP attempt (connect + response).
    pub timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors.
    pub max_retries: u32,
}

impl std::fmt::Debug for EmbedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedConfig")
            .field("kind", &self.kind)
            .field("model_dir", &self.model_dir)
            .field("openai_base_url", &self.openai_base_url)
            .field("openai_model", &self.openai_model)
            .field(
                "openai_api_key",
                &self.openai_api_key.as_ref().map(|_| "<redacted>"),
            )
            .field("openai_dims", &self.openai_dims)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

impl Default for EmbedConfig {
    fn default() -> Self {
        Self {
            kind: EmbedderKind::MiniLm,
            model_dir: default_model_dir(),
            openai_base_url: DEFAULT_OPENAI_BASE_URL.to_owned(),
            openai_model: DEFAULT_OPENAI_MODEL.to_owned(),
            openai_api_key: None,
            openai_dims: 1536,
            timeout: Duration::from_secs(30),
            max_retries: 3,
        }
    }
}

/// `.data/models/all-MiniLM-L6-v2` relative to the working directory; when that does not exist but the
/// same directory exists in the source tree this binary was built from, that one (so `cargo test` and
/// `cargo run` find the model from any working directory).
pub fn default_model_dir() -> PathBuf {
    let relative = PathBuf::from(DEFAULT_MODEL_SUBDIR);
    if relative.is_dir() {
        return relative;
    }
    let in_source = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_MODEL_SUBDIR);
    if in_source.is_dir() {
        in_source
    } else {
        relative
    }
}

/// Native dimension of well-known OpenAI embedding models.
fn known_openai_dims(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        _ => None,
    }
}

impl EmbedConfig {
    /// The settings of the environment's variables (`HONCHO_EMBEDDER` and the others of
    /// [`EmbedArgs`], listed by `honcho-graphql serve --help`), checked.
    pub fn from_env() -> Result<Self, EmbedError> {
        let args =
            crate::flags::from_env::<EmbedArgs>().map_err(|e| EmbedError::Config(e.to_string()))?;
        Self::from_args(&args)
    }

    /// Checks the configured settings. Blank values count as unset; files are not checked here,
    /// [`build`] does that.
    pub fn from_args(settings: &EmbedArgs) -> Result<Self, EmbedError> {
        let given = |v: &str| Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        let optional = |v: &Option<String>| v.as_deref().and_then(given);
        let mut cfg = Self {
            kind: settings.kind.parse()?,
            ..Self::default()
        };
        if let Some(dir) = optional(&settings.model_dir) {
            cfg.model_dir = PathBuf::from(dir);
        }
        if let Some(url) = given(&settings.openai_base_url) {
            cfg.openai_base_url = url.trim_end_matches('/').to_owned();
        }
        if let Some(model) = given(&settings.openai_model) {
            cfg.openai_model = model;
        }
        cfg.openai_api_key = optional(&settings.openai_api_key);
        match optional(&settings.openai_dims) {
            Some(dims) => {
                cfg.openai_dims = dims.parse().ok().filter(|d| *d > 0).ok_or_else(|| {
                    EmbedError::Config(format!(
                        "HONCHO_OPENAI_DIMS={dims:?} is not a positive integer"
                    ))
                })?;
            }
            None => match known_openai_dims(&cfg.openai_model) {
                Some(d) => cfg.openai_dims = d,
                None if cfg.kind == EmbedderKind::OpenAi => {
                    return Err(EmbedError::Config(format!(
                        "HONCHO_OPENAI_DIMS is required for model {:?} (its vector length)",
                        cfg.openai_model
                    )));
                }
                None => {}
            },
        }
        if let Some(secs) = given(&settings.openai_timeout_secs) {
            cfg.timeout = secs
                .parse::<f64>()
                .ok()
                .and_then(crate::retry::positive_secs)
                .ok_or_else(|| {
                    EmbedError::Config(format!(
                        "HONCHO_OPENAI_TIMEOUT_SECS={secs:?} is not a positive number of seconds"
                    ))
                })?;
        }
        if let Some(retries) = given(&settings.openai_max_retries) {
            cfg.max_retries = retries.parse().ok().filter(|r| *r <= 10).ok_or_else(|| {
                EmbedError::Config(format!(
                    "HONCHO_OPENAI_MAX_RETRIES={retries:?} is not an integer in 0..=10"
                ))
            })?;
        }
        Ok(cfg)
    }
}

/// Builds the configured embedder; `Ok(None)` for [`EmbedderKind::None`].
///
/// For MiniLM this loads the model synchronously (about 0.1 s of file reading and weight conversion) and
/// starts its inference thread; call it at start-up (before or outside request handling), not per request.
/// The returned embedder needs no particular runtime: `embed` may be awaited from any tokio runtime.
pub fn build(cfg: &EmbedConfig) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
    Ok(match cfg.kind {
        EmbedderKind::None => None,
        EmbedderKind::MiniLm => Some(Arc::new(MiniLm::load(&cfg.model_dir)?)),
        EmbedderKind::OpenAi => Some(Arc::new(OpenAiEmbedder::new(cfg)?)),
    })
}

/// True for texts that should not be embedded (empty or whitespace only).
pub fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Embeds the non-blank texts in one batched call; blank texts get `None` (store no embedding for them).
pub async fn embed_non_blank(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Option<Vec<f32>>>, EmbedError> {
    let wanted: Vec<String> = texts.iter().filter(|t| !is_blank(t)).cloned().collect();
    let mut vectors = embedder.embed(&wanted).await?.into_iter();
    Ok(texts
        .iter()
        .map(|t| if is_blank(t) { None } else { vectors.next() })
        .collect())
}

/// How many turns before a message its vector also represents.
pub const CONTEXT_TURNS: usize = 1;
/// Characters kept of each turn before the message (MiniLM reads 256 word pieces: the message
/// itself keeps most of them).
pub const CONTEXT_CHARS: usize = 200;

/// The text a message is embedded as: the message in its conversation, each turn prefixed by its
/// speaker, the turns before it (oldest first, each cut to [`CONTEXT_CHARS`]) and then the
/// message. "Yes, last week!" alone means little; after "Melanie: Did you go to the pottery
/// class?" it is about pottery, and the speaker's name is in the vector. A blank message stays
/// blank (it gets no vector).
pub fn message_text(before: &[(&str, &str)], peer: &str, content: &str) -> String {
    if is_blank(content) {
        return String::new();
    }
    let mut out = String::new();
    for (p, c) in before {
        if is_blank(c) {
            continue;
        }
        let cut = c
            .char_indices()
            .nth(CONTEXT_CHARS)
            .map_or(c.len(), |(i, _)| i);
        out.push_str(p);
        out.push_str(": ");
        out.push_str(c[..cut].trim());
        out.push('\n');
    }
    out.push_str(peer);
    out.push_str(": ");
    out.push_str(content);
    out
}

/// The text a conclusion is embedded as: whose view of whom, then the conclusion ("alice about
/// bob: works night shifts"; a peer's own: "bob: works night shifts"), so a question naming
/// either peer lands near it. A blank conclusion stays blank (it gets no vector).
pub fn conclusion_text(observer: &str, observed: &str, content: &str) -> String {
    if is_blank(content) {
        return String::new();
    }
    if observer == observed {
        format!("{observed}: {content}")
    } else {
        format!("{observer} about {observed}: {content}")
    }
}

/// Scales `v` to unit length in place (leaves an all-zero vector alone).
pub(crate) fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings as the command line would give them: `HONCHO_OPENAI_DIMS` is `--openai-dims`.
    fn cfg(vars: &[(&str, &str)]) -> Result<EmbedConfig, EmbedError> {
        let flags: Vec<String> = vars
            .iter()
            .map(|(var, value)| {
                let flag = var.trim_start_matches("HONCHO_").to_lowercase();
                format!("--{}={value}", flag.replace('_', "-"))
            })
            .collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        EmbedConfig::from_args(&crate::flags::given(&flags).unwrap())
    }

    #[test]
    fn config_defaults_to_minilm() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.kind, EmbedderKind::MiniLm);
        assert!(c.model_dir.ends_with(DEFAULT_MODEL_SUBDIR));
        assert_eq!(c.openai_api_key, None);
        assert_eq!(c.max_retries, 3);
    }

    #[test]
    fn config_reads_openai_settings() {
        let c = cfg(&[
            ("HONCHO_EMBEDDER", "OpenAI"),
            ("HONCHO_OPENAI_BASE_URL", "http://localhost:11434/v1/"),
            ("HONCHO_OPENAI_MODEL", "nomic-embed-text"),
            ("HONCHO_OPENAI_DIMS", "768"),
            ("HONCHO_OPENAI_API_KEY", "sk-secret"),
            ("HONCHO_OPENAI_TIMEOUT_SECS", "2.5"),
            ("HONCHO_OPENAI_MAX_RETRIES", "0"),
        ])
        .unwrap();
        assert_eq!(c.kind, EmbedderKind::OpenAi);
        assert_eq!(c.openai_base_url, "http://localhost:11434/v1");
        assert_eq!(c.openai_model, "nomic-embed-text");
        assert_eq!(c.openai_dims, 768);
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.max_retries, 0);
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn config_knows_openai_model_dims() {
        let c = cfg(&[
            ("HONCHO_EMBEDDER", "openai"),
            ("HONCHO_OPENAI_MODEL", "text-embedding-3-large"),
        ])
        .unwrap();
        assert_eq!(c.openai_dims, 3072);
    }

    #[test]
    fn config_rejects_bad_values() {
        for vars in [
            vec![("HONCHO_EMBEDDER", "bert")],
            vec![("HONCHO_EMBEDDER", "openai"), ("HONCHO_OPENAI_MODEL", "x")],
            vec![("HONCHO_OPENAI_DIMS", "0")],
            vec![("HONCHO_OPENAI_DIMS", "many")],
            vec![("HONCHO_OPENAI_TIMEOUT_SECS", "-1")],
            vec![("HONCHO_OPENAI_MAX_RETRIES", "100")],
        ] {
            assert!(
                matches!(cfg(&vars), Err(EmbedError::Config(_))),
                "{vars:?} accepted"
            );
        }
    }

    #[test]
    fn every_embedder_variable_is_a_flag_too_and_a_blank_value_is_unset() {
        let c = cfg(&[("HONCHO_EMBEDDER", "none"), ("HONCHO_OPENAI_DIMS", " ")]).unwrap();
        assert_eq!(c.kind, EmbedderKind::None);
        assert_eq!(c.openai_dims, 1536, "blank dims: the default model's");
    }

    #[test]
    fn none_builds_nothing() {
        let c = cfg(&[("HONCHO_EMBEDDER", "none")]).unwrap();
        assert!(build(&c).unwrap().is_none());
    }

    #[test]
    fn missing_model_dir_says_how_to_fix_it() {
        let c = EmbedConfig {
            model_dir: PathBuf::from("/nonexistent/models/all-MiniLM-L6-v2"),
            ..EmbedConfig::default()
        };
        let err = build(&c).err().expect("missing model must fail");
        assert!(matches!(err, EmbedError::ModelFiles { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("/nonexistent/models/all-MiniLM-L6-v2"),
            "{msg}"
        );
        assert!(msg.contains("make setup"), "{msg}");
        assert!(msg.contains("scripts/fetch-model.sh"), "{msg}");
    }

    #[test]
    fn a_message_is_embedded_after_the_turns_before_it_with_speakers() {
        let long = "x".repeat(CONTEXT_CHARS + 50);
        assert_eq!(
            message_text(&[("melanie", "Did you go?")], "caroline", "Yes, last week!"),
            "melanie: Did you go?\ncaroline: Yes, last week!"
        );
        let text = message_text(&[("a", &long), ("b", "  ")], "c", "hi");
        assert_eq!(text, format!("a: {}\nc: hi", "x".repeat(CONTEXT_CHARS)));
        assert_eq!(message_text(&[("a", "context")], "c", "  "), "");
        assert_eq!(message_text(&[], "c", "alone"), "c: alone");
        assert_eq!(conclusion_text("a", "b", "x"), "a about b: x");
        assert_eq!(conclusion_text("b", "b", "x"), "b: x");
        assert_eq!(conclusion_text("a", "b", " "), "");
    }

    #[test]
    fn normalizes() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0; 3];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0; 3]);
    }
}
