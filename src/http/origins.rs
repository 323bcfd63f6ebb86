//! Which browser origins may call the server: CORS for `/graphql` and `/v3`, and the same list
//! for what browsers send cross-site without a preflight: the WebSocket upgrade (a page on any
//! origin may open a WebSocket to any server) and "simple" POSTs (forms, `fetch` in `no-cors`
//! mode); only the server can look at their `Origin` and refuse ([`Origins::admits`]).
//!
//! Default: none, so only pages served by this server itself (the playground) reach it from a
//! browser. `HONCHO_CORS_ORIGINS` lists exact origins (`https://app.example.com`), or is `*` for
//! any origin, which is refused while auth is off: with auth off every caller is an admin, and `*`
//! would hand that to every web page the developer opens.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Origins {
    /// Same origin only.
    #[default]
    None,
    /// Any origin (`*`); only with auth on.
    Any,
    /// These exact origins (`scheme://host[:port]`, lower case, no path).
    List(Vec<String>),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OriginsError {
    #[error(
        "HONCHO_CORS_ORIGINS: `{0}` is not an origin (scheme://host[:port], no path), e.g. https://app.example.com"
    )]
    NotAnOrigin(String),
    #[error(
        "HONCHO_CORS_ORIGINS=* needs auth on (HONCHO_AUTH_SECRET): with auth off every caller is an admin, so any web page could read and delete everything; list exact origins instead"
    )]
    AnyWithoutAuth,
}

impl Origins {
    /// Parses a comma- or space-separated list; empty means none.
    pub fn parse(spec: &str, auth_enabled: bool) -> Result<Origins, OriginsError> {
        let Some(items) = list_or_any(spec, auth_enabled, OriginsError::AnyWithoutAuth)? else {
            return Ok(Origins::Any);
        };
        if items.is_empty() {
            return Ok(Origins::None);
        }
        items
            .into_iter()
            .map(|item| {
                normalise(item)
                    .filter(|o| o.len() == item.trim_end_matches('/').len())
                    .ok_or_else(|| OriginsError::NotAnOrigin(item.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(Origins::List)
    }

    fn allows(&self, origin: &str) -> bool {
        match self {
            Origins::None => false,
            Origins::Any => true,
            Origins::List(list) => normalise(origin).is_some_and(|o| list.contains(&o)),
        }
    }

    /// The CORS layer: preflight answered (the methods of `/graphql` and `/v3`, the headers
    /// Honcho's SDKs send), credentials allowed for listed origins (not for `*`, which browsers
    /// forbid with credentials), `x-request-id` readable by the page. `None` when no origin is
    /// allowed: then no CORS header is ever sent and browsers keep every other origin out.
    pub fn cors(&self) -> Option<CorsLayer> {
        let headers = [
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static(super::READ_AFTER_HEADER),
        ]
        .into_iter()
        .chain(SDK_HEADERS.iter().map(|h| HeaderName::from_static(h)));
        let base = CorsLayer::new()
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers(headers.collect::<Vec<_>>())
            .expose_headers([HeaderName::from_static("x-request-id")])
            .max_age(std::time::Duration::from_secs(600));
        match self {
            Origins::None => None,
            Origins::Any => Some(base.allow_origin(AllowOrigin::any())),
            Origins::List(list) => {
                let values: Vec<HeaderValue> = list
                    .iter()
                    .filter_map(|o| HeaderValue::from_str(o).ok())
                    .collect();
                Some(
                    base.allow_origin(AllowOrigin::list(values))
                        .allow_credentials(true),
                )
            }
        }
    }

    /// Whether a request that browsers send cross-site without a preflight (a WebSocket upgrade,
    /// a POST) may proceed: no `Origin` (not a browser), the server's own origin (`Origin`'s host
    /// is `Host`, which [`super::hosts`] has checked), or an allowed origin.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let same_origin = match (normalise(origin), host) {
            (Some(o), Some(host)) => o
                .split_once("://")
                .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host.trim())),
            _ => false,
        };
        same_origin || self.allows(origin)
    }
}

/// The items of a comma- or space-separated list, or None for `*`, which only auth on allows
/// (`any_without_auth` otherwise): with auth off every caller is an admin.
pub(super) fn list_or_any<E>(
    spec: &str,
    auth_enabled: bool,
    any_without_auth: E,
) -> Result<Option<Vec<&str>>, E> {
    let items: Vec<&str> = spec
        .split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    match (items == ["*"], auth_enabled) {
        (false, _) => Ok(Some(items)),
        (true, true) => Ok(None),
        (true, false) => Err(any_without_auth),
    }
}

/// The request headers of Honcho's SDKs besides the standard ones: the Stainless-generated
/// clients (`honcho-core`, `@honcho-ai/core`) describe themselves and their retries in these.
const SDK_HEADERS: &[&str] = &[
    "x-stainless-arch",
    "x-stainless-async",
    "x-stainless-custom-poll-interval",
    "x-stainless-helper-method",
    "x-stainless-lang",
    "x-stainless-os",
    "x-stainless-package-version",
    "x-stainless-poll-helper",
    "x-stainless-read-timeout",
    "x-stainless-retry-count",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-timeout",
    "idempotency-key",
];

/// `scheme://host[:port]` in lower case, without a trailing slash; None when it has a path, a
/// query, user info or no host (`null`, `file://`).
fn normalise(origin: &str) -> Option<String> {
    let origin = origin.trim().trim_end_matches('/');
    let (scheme, authority) = origin.split_once("://")?;
    let scheme_ok = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let authority_ok = !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@', ' '])
        && !authority.starts_with(':');
    (scheme_ok && authority_ok).then(|| origin.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_exact_lists_and_refuse_any_without_auth() {
        assert_eq!(Origins::parse("", false), Ok(Origins::None));
        assert_eq!(
            Origins::parse("https://App.example.com, http://localhost:5173/", false),
            Ok(Origins::List(vec![
                "https://app.example.com".into(),
                "http://localhost:5173".into()
            ]))
        );
        assert_eq!(Origins::parse("*", true), Ok(Origins::Any));
        assert_eq!(
            Origins::parse("*", false),
            Err(OriginsError::AnyWithoutAuth)
        );
        for bad in [
            "example.com",
            "https://a.com/path",
            "null",
            "https://",
            "*.a.com",
        ] {
            assert!(
                matches!(Origins::parse(bad, true), Err(OriginsError::NotAnOrigin(_))),
                "{bad}"
            );
        }
    }

    fn ws(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    }

    #[test]
    fn foreign_origins_are_refused_unless_listed() {
        let none = Origins::None;
        assert!(none.admits(&ws(None, "127.0.0.1:8000")));
        assert!(none.admits(&ws(Some("http://127.0.0.1:8000"), "127.0.0.1:8000")));
        assert!(!none.admits(&ws(Some("http://127.0.0.1:9000"), "127.0.0.1:8000")));
        assert!(!none.admits(&ws(Some("https://evil.example"), "127.0.0.1:8000")));
        assert!(!none.admits(&ws(Some("null"), "127.0.0.1:8000")));
        let listed = Origins::parse("https://app.example.com", false).unwrap();
        assert!(listed.admits(&ws(Some("https://app.example.com"), "api:8000")));
        assert!(!listed.admits(&ws(Some("https://evil.example"), "api:8000")));
        assert!(Origins::Any.admits(&ws(Some("https://evil.example"), "api:8000")));
    }
}
