//! The playground at `/`: a built `playground/dist`, embedded in release binaries (rust-embed
//! reads the source tree's copy at run time in debug builds), or a directory given by
//! `HONCHO_PLAYGROUND_DIR` for development. Any GET path that is not a file is the single-page
//! app's `index.html` (its routes live in the URL's fragment and path).

use std::path::PathBuf;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use rust_embed::Embed;
use tower_http::services::{ServeDir, ServeFile};

/// `playground/dist` when the binary was built; empty when it had not been built (a fresh clone
/// running `cargo build` first), and then `/` says how to build it.
#[derive(Embed)]
#[folder = "$CARGO_MANIFEST_DIR/playground/dist"]
#[allow_missing = true]
struct Embedded;

/// Where the playground comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Playground {
    /// The copy built into the binary.
    Embedded,
    /// A directory with an index.html (HONCHO_PLAYGROUND_DIR).
    Dir(PathBuf),
    /// Nothing to serve: `/` says how to build it.
    Missing,
}

impl Playground {
    /// The directory when one is given (it must hold an index.html, else `Missing`), otherwise the
    /// embedded copy when the binary has one.
    pub fn resolve(dir: Option<PathBuf>) -> Playground {
        match dir {
            Some(dir) if dir.join("index.html").is_file() => {
                Playground::Dir(std::path::absolute(&dir).unwrap_or(dir))
            }
            Some(_) => Playground::Missing,
            None if Embedded::get("index.html").is_some() => Playground::Embedded,
            None => Playground::Missing,
        }
    }

    pub(super) fn route<S: Clone + Send + Sync + 'static>(&self, api: Router<S>) -> Router<S> {
        match self {
            Playground::Dir(dir) => api.fallback_service(
                ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html"))),
            ),
            Playground::Embedded => api.fallback(get(embedded)),
            Playground::Missing => api.route("/", get(not_built)),
        }
    }
}

async fn embedded(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let (name, file) = match Embedded::get(path) {
        Some(file) if !path.is_empty() => (path, file),
        _ => match Embedded::get("index.html") {
            Some(file) => ("index.html", file),
            None => return StatusCode::NOT_FOUND.into_response(),
        },
    };
    let mime = file.metadata.mimetype().to_owned();
    let mut resp = Body::from(file.data).into_response();
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&mime) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    // Vite puts a content hash in every asset's name; index.html names the current ones.
    let cache = match name.starts_with("assets/") {
        true => "public, max-age=31536000, immutable",
        false => "no-cache",
    };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

async fn not_built() -> Html<&'static str> {
    Html(
        "<!doctype html><title>honcho-graphql</title>\
         <p>honcho-graphql is running. POST GraphQL requests to <code>/graphql</code>.</p>\
         <p>The playground (GraphiQL, reasoning trees, search) is not built: run \
         <code>make playground</code> and reload, or set <code>HONCHO_PLAYGROUND_DIR</code>.</p>",
    )
}
