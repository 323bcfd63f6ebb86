//! Persisted documents: Apollo's automatic persisted queries (APQ) protocol, and a strict mode
//! that runs trusted documents only.
//!
//! A client sends `extensions.persistedQuery = {"version": 1, "sha256Hash": <hex>}`, first
//! without `query`. A known hash runs its document; an unknown one answers
//! `PERSISTED_QUERY_NOT_FOUND`, and the client sends the document with its hash once, which
//! registers it (the hash is checked). Apollo Client and urql speak this out of the box; a GET
//! carrying only a hash is short enough to be cached by HTTP caches.
//!
//! With `HONCHO_TRUSTED_DOCUMENTS` (a manifest of hash → document), only the manifest's documents
//! run, by hash or in full; registration is off and anything else is refused with
//! `DOCUMENT_NOT_TRUSTED`. Admin keys may be exempted (`HONCHO_TRUSTED_DOCUMENTS_ADMIN`), to keep
//! ad-hoc queries for operators. The check is done here, before parsing, on the request's
//! document: this costs one hash per request, where an async-graphql extension would put every
//! field on its slower path.
//!
//! Registration fills a cache that every caller shares, so it is guarded: a document above
//! [`APQ_MAX_DOCUMENT_BYTES`] sent with a hash is refused before it is hashed or kept, and with
//! auth on only a caller with a valid key registers. A caller without one still runs the document
//! it sent (its hash checked), as if it had sent no hash, and runs registered documents by hash;
//! so public operations keep working from a persisted-queries client without a key, which just
//! sends the document each time. Unguarded, two anonymous bodies of the cache's size emptied it,
//! and every client's next request by hash answered `PERSISTED_QUERY_NOT_FOUND`.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::{Caller, Principal};
use crate::graphql::error::Code;

/// Registered (APQ) documents kept per process; the oldest are forgotten first.
const APQ_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Largest document that may be registered: a 64th of the cache, so one registration forgets at
/// most a 64th of what others registered. A document the token limit lets run (20,000 tokens by
/// default, `HONCHO_MAX_TOKENS`) written as clients print them is well below it; a larger one
/// still runs when sent without `extensions.persistedQuery`.
pub const APQ_MAX_DOCUMENT_BYTES: usize = APQ_MAX_BYTES / 64;

/// Who sends a request, as far as persisted documents care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// No valid key while auth is on: runs documents, by hash too, but registers none.
    Anonymous,
    /// A valid key (any request while auth is off, which makes every caller an admin).
    Key,
    /// An admin key, which strict mode may exempt.
    Admin,
}

impl Sender {
    /// The sender of a request made by `caller` (None: no caller is known, as anonymous).
    pub fn of(caller: Option<&Caller>) -> Sender {
        match caller.map(Caller::principal) {
            Some(Ok(Principal::Admin)) => Sender::Admin,
            Some(Ok(_)) => Sender::Key,
            Some(Err(_)) | None => Sender::Anonymous,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PersistedError {
    /// Apollo's clients recognise this exact message, and then send the document.
    #[error("PersistedQueryNotFound")]
    NotFound,
    #[error("the document's sha256 is not `extensions.persistedQuery.sha256Hash`")]
    HashMismatch,
    #[error(
        "`extensions.persistedQuery` must be {{\"version\": 1, \"sha256Hash\": <64 hex digits>}}"
    )]
    Malformed,
    #[error(
        "the document is {got} bytes, more than the {max} a persisted document may have: send it without `extensions.persistedQuery`"
    )]
    TooLarge { got: usize, max: usize },
    #[error(
        "this server runs trusted documents only (HONCHO_TRUSTED_DOCUMENTS): send the hash of a document of its manifest"
    )]
    NotTrusted,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}: expected a JSON object of sha256 → document, or an Apollo persisted query manifest ({detail})"
    )]
    Format { path: String, detail: String },
    #[error("{path}: the entry {hash} is not the sha256 of its document")]
    WrongHash { path: String, hash: String },
}

#[derive(Default)]
struct Registered {
    documents: HashMap<String, String>,
    order: VecDeque<String>,
    bytes: usize,
}

/// The persisted documents of one process.
pub struct Persisted {
    registered: Mutex<Registered>,
    /// Trusted documents by hash (strict mode when present).
    trusted: Option<HashMap<String, String>>,
    admin_exempt: bool,
}

impl std::fmt::Debug for Persisted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persisted")
            .field("trusted", &self.trusted.as_ref().map(HashMap::len))
            .field("admin_exempt", &self.admin_exempt)
            .finish_non_exhaustive()
    }
}

impl Default for Persisted {
    fn default() -> Self {
        Persisted::new(None, false)
    }
}

pub fn sha256_hex(document: &str) -> String {
    let digest = Sha256::digest(document.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Persisted {
    pub fn new(trusted: Option<HashMap<String, String>>, admin_exempt: bool) -> Self {
        Persisted {
            registered: Mutex::default(),
            trusted,
            admin_exempt,
        }
    }

    /// Strict mode from a manifest file: `{"<sha256>": "<document>", …}` (graphql-codegen's
    /// persisted documents), or Apollo's `{"format": "apollo-persisted-query-manifest",
    /// "operations": [{"id", "body"}, …]}`. Every hash is checked.
    pub fn load_manifest(path: &Path) -> Result<HashMap<String, String>, ManifestError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: shown.clone(),
            source,
        })?;
        let format = |detail: String| ManifestError::Format {
            path: shown.clone(),
            detail,
        };
        let value: Value = serde_json::from_str(&text).map_err(|e| format(e.to_string()))?;
        let pairs: Vec<(String, String)> = match &value {
            Value::Object(map) if map.contains_key("operations") => map["operations"]
                .as_array()
                .ok_or_else(|| format("`operations` is not a list".into()))?
                .iter()
                .map(|op| match (op.get("id"), op.get("body")) {
                    (Some(Value::String(id)), Some(Value::String(body))) => {
                        Ok((id.clone(), body.clone()))
                    }
                    _ => Err(format(
                        "an operation without a string `id` and `body`".into(),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Value::Object(map) => map
                .iter()
                .map(|(hash, doc)| match doc {
                    Value::String(doc) => Ok((hash.clone(), doc.clone())),
                    _ => Err(format(format!("the entry {hash} is not a string"))),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(format("not an object".into())),
        };
        let mut manifest = HashMap::new();
        for (hash, doc) in pairs {
            let hash = hash.to_ascii_lowercase();
            let hash = hash.strip_prefix("sha256:").unwrap_or(&hash).to_owned();
            if sha256_hex(&doc) != hash {
                return Err(ManifestError::WrongHash { path: shown, hash });
            }
            manifest.insert(hash, doc);
        }
        Ok(manifest)
    }

    pub fn strict(&self) -> bool {
        self.trusted.is_some()
    }

    /// The document a request runs: its `query`, or the persisted document its
    /// `extensions.persistedQuery` names. `None` when it has neither (the caller says `query` is
    /// missing). A document sent with its hash is registered when `sender` may register.
    pub fn resolve(
        &self,
        query: Option<String>,
        extensions: Option<&Map<String, Value>>,
        sender: Sender,
    ) -> Result<Option<String>, PersistedError> {
        let admin = sender == Sender::Admin;
        let hash = match extensions.and_then(|e| e.get("persistedQuery")) {
            None | Some(Value::Null) => None,
            Some(Value::Object(pq)) => {
                let version_ok = pq.get("version").and_then(Value::as_i64) == Some(1);
                match pq.get("sha256Hash").and_then(Value::as_str) {
                    Some(h) if version_ok && is_sha256_hex(h) => Some(h.to_ascii_lowercase()),
                    _ => return Err(PersistedError::Malformed),
                }
            }
            Some(_) => return Err(PersistedError::Malformed),
        };
        match &self.trusted {
            Some(trusted) if !(admin && self.admin_exempt) => {
                let key = match (&query, &hash) {
                    (Some(q), _) => sha256_hex(q),
                    (None, Some(h)) => h.clone(),
                    (None, None) => return Ok(None),
                };
                if hash.as_ref().is_some_and(|h| *h != key) {
                    return Err(PersistedError::HashMismatch);
                }
                trusted
                    .get(&key)
                    .cloned()
                    .map(Some)
                    .ok_or(PersistedError::NotTrusted)
            }
            _ => match (query, hash) {
                (query, None) => Ok(query),
                (Some(query), Some(hash)) => {
                    if query.len() > APQ_MAX_DOCUMENT_BYTES {
                        return Err(PersistedError::TooLarge {
                            got: query.len(),
                            max: APQ_MAX_DOCUMENT_BYTES,
                        });
                    }
                    if sha256_hex(&query) != hash {
                        return Err(PersistedError::HashMismatch);
                    }
                    if sender != Sender::Anonymous {
                        self.register(hash, &query);
                    }
                    Ok(Some(query))
                }
                (None, Some(hash)) => self.lookup(&hash).map(Some).ok_or(PersistedError::NotFound),
            },
        }
    }

    fn lookup(&self, hash: &str) -> Option<String> {
        if let Some(doc) = self.trusted.as_ref().and_then(|t| t.get(hash)) {
            return Some(doc.clone());
        }
        let registered = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        registered.documents.get(hash).cloned()
    }

    fn register(&self, hash: String, document: &str) {
        if document.len() > APQ_MAX_DOCUMENT_BYTES {
            return;
        }
        let mut r = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        if r.documents.contains_key(&hash) {
            return;
        }
        while r.bytes + document.len() > APQ_MAX_BYTES {
            let Some(oldest) = r.order.pop_front() else {
                break;
            };
            if let Some(doc) = r.documents.remove(&oldest) {
                r.bytes -= doc.len();
            }
        }
        r.bytes += document.len();
        r.order.push_back(hash.clone());
        r.documents.insert(hash, document.to_owned());
    }
}

impl PersistedError {
    pub fn code(&self) -> Code {
        match self {
            PersistedError::NotFound => Code::PersistedQueryNotFound,
            PersistedError::HashMismatch
            | PersistedError::Malformed
            | PersistedError::TooLarge { .. } => Code::BadRequest,
            PersistedError::NotTrusted => Code::DocumentNotTrusted,
        }
    }

    /// The refusal as a GraphQL response: one coded request error.
    pub fn into_response(self) -> async_graphql::Response {
        let error = async_graphql::ServerError::new(self.to_string(), None);
        let mut response = async_graphql::Response::from_errors(vec![error]);
        crate::graphql::error::code_errors(&mut response.errors, self.code());
        response
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ext(hash: &str) -> Map<String, Value> {
        json!({"persistedQuery": {"version": 1, "sha256Hash": hash}})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn apq_registers_a_document_once_its_hash_is_checked() {
        let p = Persisted::default();
        let doc = "{ __typename }";
        let hash = sha256_hex(doc);
        assert_eq!(
            hash,
            "7f56e67dd21ab3f30d1ff8b7bed08893f0a0db86449836189b361dd1e56ddb4b"
        );
        assert_eq!(
            p.resolve(None, Some(&ext(&hash)), Sender::Key),
            Err(PersistedError::NotFound)
        );
        assert_eq!(
            p.resolve(Some("{ other }".into()), Some(&ext(&hash)), Sender::Key),
            Err(PersistedError::HashMismatch)
        );
        assert_eq!(
            p.resolve(Some(doc.into()), Some(&ext(&hash)), Sender::Key),
            Ok(Some(doc.into()))
        );
        assert_eq!(
            p.resolve(None, Some(&ext(&hash.to_uppercase())), Sender::Key),
            Ok(Some(doc.into()))
        );
        assert_eq!(
            p.resolve(None, Some(&ext("abc")), Sender::Key),
            Err(PersistedError::Malformed)
        );
        assert_eq!(
            p.resolve(Some("{ a }".into()), None, Sender::Key),
            Ok(Some("{ a }".into()))
        );
    }

    #[test]
    fn strict_mode_runs_manifest_documents_only() {
        let doc = "query Q { __typename }";
        let hash = sha256_hex(doc);
        let manifest = HashMap::from([(hash.clone(), doc.to_owned())]);
        let strict = Persisted::new(Some(manifest.clone()), false);
        assert_eq!(
            strict.resolve(None, Some(&ext(&hash)), Sender::Key),
            Ok(Some(doc.into()))
        );
        assert_eq!(
            strict.resolve(Some(doc.into()), None, Sender::Key),
            Ok(Some(doc.into()))
        );
        assert_eq!(
            strict.resolve(Some("{ __typename }".into()), None, Sender::Key),
            Err(PersistedError::NotTrusted)
        );
        let other = "{ other }";
        assert_eq!(
            strict.resolve(
                Some(other.into()),
                Some(&ext(&sha256_hex(other))),
                Sender::Admin
            ),
            Err(PersistedError::NotTrusted),
            "registration is off, admins are not exempt unless configured"
        );
        let exempt = Persisted::new(Some(manifest), true);
        assert_eq!(
            exempt.resolve(Some(other.into()), None, Sender::Admin),
            Ok(Some(other.into()))
        );
        assert_eq!(
            exempt.resolve(Some(other.into()), None, Sender::Key),
            Err(PersistedError::NotTrusted)
        );
    }

    /// A document of `APQ_MAX_DOCUMENT_BYTES` bytes, distinct for each `i`.
    fn largest(i: usize) -> String {
        let head = format!("# {i}\n{{ a }}");
        format!("{head}{}", " ".repeat(APQ_MAX_DOCUMENT_BYTES - head.len()))
    }

    fn register(p: &Persisted, doc: &str, sender: Sender) -> Result<(), PersistedError> {
        p.resolve(Some(doc.into()), Some(&ext(&sha256_hex(doc))), sender)
            .map(drop)
    }

    #[test]
    fn registered_documents_are_bounded_oldest_first() {
        let p = Persisted::default();
        for i in 0..=APQ_MAX_BYTES / APQ_MAX_DOCUMENT_BYTES {
            register(&p, &largest(i), Sender::Key).unwrap();
        }
        assert!(p.lookup(&sha256_hex(&largest(0))).is_none());
        assert!(p.lookup(&sha256_hex(&largest(1))).is_some());
    }

    #[test]
    fn a_document_above_the_bound_is_refused_before_it_is_kept() {
        let p = Persisted::default();
        let kept = "{ kept }";
        register(&p, kept, Sender::Key).unwrap();
        let big = format!("{}{{ a }}", " ".repeat(APQ_MAX_BYTES));
        assert_eq!(
            register(&p, &big, Sender::Admin),
            Err(PersistedError::TooLarge {
                got: big.len(),
                max: APQ_MAX_DOCUMENT_BYTES
            })
        );
        assert!(p.lookup(&sha256_hex(&big)).is_none());
        assert_eq!(p.lookup(&sha256_hex(kept)).as_deref(), Some(kept));
    }

    #[test]
    fn an_anonymous_caller_registers_nothing_and_evicts_nothing() {
        let p = Persisted::default();
        let kept = "{ kept }";
        register(&p, kept, Sender::Key).unwrap();
        for i in 0..=APQ_MAX_BYTES / APQ_MAX_DOCUMENT_BYTES {
            register(&p, &largest(i), Sender::Anonymous).unwrap();
            assert!(p.lookup(&sha256_hex(&largest(i))).is_none());
        }
        // Running a registered document by its hash needs no key.
        assert_eq!(
            p.resolve(None, Some(&ext(&sha256_hex(kept))), Sender::Anonymous),
            Ok(Some(kept.into()))
        );
        // Nor does a document sent without a hash.
        assert_eq!(
            p.resolve(Some("{ a }".into()), None, Sender::Anonymous),
            Ok(Some("{ a }".into()))
        );
    }
}
