//! JSON POSTs to OpenAI-compatible HTTP APIs (the embedder and the LLM client), with a timeout
//! per attempt and bounded retries.
//!
//! 408, 429, 5xx, timeouts and connection errors are retried up to `max_retries` times with
//! exponential backoff and jitter (a `Retry-After` in seconds is honoured up to 10 s). Other
//! statuses fail at once. A streamed answer is retried only until its head arrives.
//!
//! Nothing is read without a bound: an answer longer than its endpoint's `max_answer_bytes` fails
//! (by its `Content-Length` before a byte of it is read, else as soon as it passes the bound)
//! and is not retried, and only the first [`ERROR_BODY_BYTES`] of an error status's body are read
//! for its message.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use reqwest::StatusCode;
use serde::Deserialize;

const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
const RETRY_AFTER_MAX: Duration = Duration::from_secs(10);
/// What is read of a failed response's body: enough for any provider's error message.
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;

/// An OpenAI-compatible endpoint, its settings checked alike for the embedder and the LLM client:
/// the URL, the model, the key, the timeout of one attempt, and the client that sends them.
pub(crate) struct Target {
    pub client: reqwest::Client,
    pub url: String,
    /// The model name sent in requests.
    pub model: String,
    /// `openai:<model>`, for logs and next to what the model made.
    pub model_id: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub max_retries: u32,
}

/// What a [`Target`] is made of, as configured; each `*_var` names the variable that sets the
/// value, for the message that refuses it.
pub(crate) struct TargetSettings<'a> {
    /// Up to and including the version (`https://api.openai.com/v1`); `path` is appended.
    pub base_url: &'a str,
    pub base_url_var: &'static str,
    /// `/embeddings`, `/chat/completions`.
    pub path: &'static str,
    pub model: &'a str,
    pub model_var: &'static str,
    /// Sent as `Authorization: Bearer …` unless blank.
    pub api_key: Option<&'a str>,
    pub timeout_secs: f64,
    pub timeout_var: &'static str,
    /// Connecting may take this long at most (else the whole attempt's timeout).
    pub connect_timeout: Option<Duration>,
    pub max_retries: u32,
}

/// `secs` as a duration, when it is a positive number of seconds.
pub(crate) fn positive_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

impl Target {
    /// Checks the settings and prepares the HTTP client; no request is made. The refusal names
    /// the variable at fault.
    pub fn new(s: &TargetSettings<'_>) -> Result<Target, String> {
        let url = format!("{}{}", s.base_url.trim().trim_end_matches('/'), s.path);
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => {
                return Err(format!(
                    "{}={:?} is not an http(s) URL",
                    s.base_url_var, s.base_url
                ));
            }
        }
        let model = s.model.trim();
        if model.is_empty() {
            return Err(format!("{} is empty", s.model_var));
        }
        let timeout = positive_secs(s.timeout_secs).ok_or_else(|| {
            format!(
                "{}={} is not a positive number of seconds",
                s.timeout_var, s.timeout_secs
            )
        })?;
        let client = crate::outbound::client_builder()
            .connect_timeout(s.connect_timeout.map_or(timeout, |c| c.min(timeout)))
            .user_agent(concat!("honcho-graphql/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Target {
            client,
            url,
            model: model.to_owned(),
            model_id: format!("openai:{model}"),
            api_key: s
                .api_key
                .filter(|k| !k.trim().is_empty())
                .map(str::to_owned),
            timeout,
            max_retries: s.max_retries,
        })
    }

    /// Where to POST, reading answers of up to `max_answer_bytes`.
    pub fn endpoint(&self, max_answer_bytes: usize) -> Endpoint<'_> {
        Endpoint {
            client: &self.client,
            url: &self.url,
            api_key: self.api_key.as_deref(),
            timeout: self.timeout,
            max_retries: self.max_retries,
            max_answer_bytes,
        }
    }
}

/// Where and how to POST.
pub(crate) struct Endpoint<'a> {
    pub client: &'a reqwest::Client,
    pub url: &'a str,
    pub api_key: Option<&'a str>,
    pub timeout: Duration,
    pub max_retries: u32,
    /// The longest answer body read; a longer one is [`Failure::TooLarge`].
    pub max_answer_bytes: usize,
}

/// Why the last attempt failed.
#[derive(Debug)]
pub(crate) enum Failure {
    Timeout,
    Transport(String),
    Status {
        status: StatusCode,
        message: String,
    },
    /// The answer's body is longer than the endpoint's `max_answer_bytes` (the bound).
    TooLarge(usize),
}

/// A POST that did not succeed, after `attempts` attempts.
#[derive(Debug)]
pub(crate) struct PostError {
    pub failure: Failure,
    pub attempts: u32,
}

impl PostError {
    pub fn status(&self) -> Option<u16> {
        match &self.failure {
            Failure::Status { status, .. } => Some(status.as_u16()),
            _ => None,
        }
    }
}

/// Whether a failure may go away by itself.
pub(crate) fn retryable(failure: &Failure) -> bool {
    match failure {
        Failure::Timeout | Failure::Transport(_) => true,
        // A server that answers too much once will do it again.
        Failure::TooLarge(_) => false,
        Failure::Status { status, .. } => {
            *status == StatusCode::TOO_MANY_REQUESTS
                || *status == StatusCode::REQUEST_TIMEOUT
                || status.is_server_error()
        }
    }
}

/// POSTs `body` until a 2xx answer (its body is returned) or a failure that is final.
pub(crate) async fn post_json(
    endpoint: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<Vec<u8>, PostError> {
    retrying(endpoint, || async {
        let response = send(endpoint, body).await?;
        read_capped(response, endpoint.max_answer_bytes).await
    })
    .await
}

/// POSTs `body` until a 2xx answer's head has arrived, or a failure that is final. The body is
/// left to the caller, still under the endpoint's timeout: only the request up to the first byte
/// is retried, since a body read halfway cannot be taken back.
pub(crate) async fn post_for_stream(
    endpoint: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<reqwest::Response, PostError> {
    retrying(endpoint, || send(endpoint, body)).await
}

/// Runs `attempt` until it succeeds or fails for good, waiting between attempts.
async fn retrying<T, F, Fut>(endpoint: &Endpoint<'_>, mut attempt: F) -> Result<T, PostError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, (Failure, Option<Duration>)>>,
{
    let mut waits = backoff(BACKOFF_BASE, BACKOFF_MAX)
        .with_max_times(endpoint.max_retries as usize)
        .build();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (failure, retry_after) = match attempt().await {
            Ok(done) => return Ok(done),
            Err(f) => f,
        };
        let wait = if retryable(&failure) {
            waits.next()
        } else {
            None
        };
        let Some(wait) = wait else {
            return Err(PostError { failure, attempts });
        };
        tokio::time::sleep(honour_retry_after(wait, retry_after)).await;
    }
}

/// A response's body, failing with [`Failure::TooLarge`] when it is longer than `limit` bytes:
/// at once when its `Content-Length` says so, else when the bytes read pass `limit`.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, (Failure, Option<Duration>)> {
    let too_large = || (Failure::TooLarge(limit), None);
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `limit` bytes of a response's body (the rest is not read).
async fn read_prefix(mut response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())])
            }
            // A message cut short by the connection is still the best one there is.
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// The failure of a request that got no complete answer.
pub(crate) fn transport(e: reqwest::Error) -> (Failure, Option<Duration>) {
    if e.is_timeout() {
        (Failure::Timeout, None)
    } else {
        // Without the URL: it is in the configuration already and keeps error texts short.
        (Failure::Transport(e.without_url().to_string()), None)
    }
}

/// One POST, up to a 2xx answer's head; an error status is read whole for its message.
async fn send(
    endpoint: &Endpoint<'_>,
    body: &serde_json::Value,
) -> Result<reqwest::Response, (Failure, Option<Duration>)> {
    let mut request = endpoint
        .client
        .post(endpoint.url)
        .timeout(endpoint.timeout)
        .json(body);
    if let Some(key) = endpoint.api_key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let bytes = read_prefix(response, ERROR_BODY_BYTES).await;
    let message = error_message(&bytes);
    Err((Failure::Status { status, message }, retry_after))
}

/// Waits that start at `first` and double up to `longest`, each one drawn between half of its
/// step and the whole step, so that clients which failed together do not all come back at once.
/// Every retry loop of the crate takes its waits from here (backon's jitter adds up to one step
/// on top of the step, hence the halved bounds).
pub(crate) fn backoff(first: Duration, longest: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(first / 2)
        .with_max_delay(longest / 2)
        .with_jitter()
}

/// A server's `Retry-After` lengthens the wait, up to [`RETRY_AFTER_MAX`]; it never shortens it.
fn honour_retry_after(wait: Duration, retry_after: Option<Duration>) -> Duration {
    match retry_after {
        Some(asked) => wait.max(asked.min(RETRY_AFTER_MAX)),
        None => wait,
    }
}

/// The error text of a failed response: OpenAI's `error.message`, else the start of the body.
fn error_message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: ErrorDetail,
    }
    #[derive(Deserialize)]
    struct ErrorDetail {
        message: String,
    }
    if let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) {
        return parsed.error.message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None if text.is_empty() => "(empty body)".into(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_checked_once_and_names_the_variable_it_refuses() {
        let settings = |base_url, model, timeout_secs| TargetSettings {
            base_url,
            base_url_var: "HONCHO_X_BASE_URL",
            path: "/embeddings",
            model,
            model_var: "HONCHO_X_MODEL",
            api_key: Some("  "),
            timeout_secs,
            timeout_var: "HONCHO_X_TIMEOUT_SECS",
            connect_timeout: None,
            max_retries: 1,
        };
        let refused = |s| Target::new(&s).err().unwrap();
        assert_eq!(
            refused(settings("ftp://x", "m", 1.0)),
            "HONCHO_X_BASE_URL=\"ftp://x\" is not an http(s) URL"
        );
        assert_eq!(
            refused(settings("http://x", " ", 1.0)),
            "HONCHO_X_MODEL is empty"
        );
        for secs in [0.0, -1.0, f64::NAN] {
            assert_eq!(
                refused(settings("http://x", "m", secs)),
                format!("HONCHO_X_TIMEOUT_SECS={secs} is not a positive number of seconds")
            );
        }
        let target = Target::new(&settings(" http://x/v1/ ", " m ", 2.5)).unwrap();
        assert_eq!(target.url, "http://x/v1/embeddings");
        assert_eq!(
            (target.model.as_str(), target.model_id.as_str()),
            ("m", "openai:m")
        );
        assert_eq!(target.api_key, None, "a blank key is none");
        assert_eq!(target.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        let waits: Vec<Duration> = backoff(BACKOFF_BASE, BACKOFF_MAX)
            .with_max_times(20)
            .build()
            .collect();
        assert_eq!(waits.len(), 20);
        for (i, wait) in waits.iter().enumerate() {
            let step = BACKOFF_BASE.saturating_mul(1 << i.min(16)).min(BACKOFF_MAX);
            assert!(
                *wait >= step / 2 && *wait <= step,
                "retry {}: {wait:?}",
                i + 1
            );
        }
        let first = Duration::from_millis(150);
        assert_eq!(
            honour_retry_after(first, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            honour_retry_after(first, Some(Duration::from_secs(3600))),
            RETRY_AFTER_MAX
        );
        assert_eq!(honour_retry_after(first, Some(Duration::ZERO)), first);
    }
}
