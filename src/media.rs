//! The media type of request bodies, checked alike by GraphQL over HTTP (`http`) and by Honcho's
//! REST API (`rest`): a body is read only when it is `application/json` (UTF-8), the one type a
//! cross-site form cannot send without a CORS preflight. A module of its own so that the REST API,
//! which `http` mounts, need not import `http`.

use axum::http::{HeaderMap, header};

pub const JSON: &str = "application/json";

/// A body that is not `application/json`; the content type it came with, if any.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body must be `application/json`{}",
    .0.as_deref().map(|t| format!(", not `{t}`")).unwrap_or_default()
)]
pub struct NotJson(pub Option<String>);

/// A POST body is read only when it is `application/json` (UTF-8).
pub fn require_json(headers: &HeaderMap) -> Result<(), NotJson> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    match content_type.as_deref().is_some_and(is_json_utf8) {
        true => Ok(()),
        false => Err(NotJson(content_type)),
    }
}

/// `application/json`, with no charset or `charset=utf-8` (JSON is UTF-8).
fn is_json_utf8(content_type: &str) -> bool {
    let mut parts = content_type.split(';');
    if !parts
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(JSON))
    {
        return false;
    }
    parts.all(|p| match p.trim().split_once('=') {
        Some((k, v)) if k.trim().eq_ignore_ascii_case("charset") => {
            v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        }
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn only_json_bodies_are_read() {
        let with = |ct: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
            require_json(&h)
        };
        assert!(with("application/json").is_ok());
        assert!(with("Application/JSON; charset=UTF-8").is_ok());
        for refused in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1",
            "application/jsonx",
        ] {
            assert!(matches!(with(refused), Err(NotJson(Some(_)))), "{refused}");
        }
        assert!(matches!(
            require_json(&HeaderMap::new()),
            Err(NotJson(None))
        ));
        assert_eq!(
            with("text/plain").unwrap_err().to_string(),
            "the request body must be `application/json`, not `text/plain`"
        );
    }
}
