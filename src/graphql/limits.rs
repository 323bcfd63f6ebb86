//! Limits that keep one request from monopolising (or crashing) the server.
//!
//! Depth and complexity are async-graphql's own checks, run after parsing. They come too late for
//! two shapes of document: async-graphql's parser recurses once per nested list or object literal,
//! and its validation (overlapping fields) is quadratic in fragments and recurses along chains of
//! spreads, so a few kilobytes of `[[[[…` or a chain of fragments overflow a worker's stack before
//! any limit runs. [`scan`] therefore reads the raw document first, in one linear pass over its
//! bytes, and refuses nesting, token and fragment counts above the configured limits.

use async_graphql::{ErrorExtensions, ServerError};

use super::cost::Tally;
use super::error::Code;

/// The per-request limits, set from the environment (docs/configuration.md).
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
    pub introspection: bool,
    /// Deepest nesting of `{`, `[` and `(` in the document, selection sets and literals alike.
    pub max_nesting: usize,
    /// Most tokens (names, numbers, strings, punctuators) in the document.
    pub max_tokens: usize,
    /// Most fragment definitions in the document.
    pub max_fragments: usize,
    /// Most fields written under an alias ([`super::cost`]).
    pub max_aliases: usize,
    /// Most fields at the top of the operation.
    pub max_root_fields: usize,
    /// Most texts one request may embed (searches, written messages and conclusions).
    pub max_embeddings: usize,
    /// Most operations open at once on one WebSocket.
    pub max_subscriptions_per_connection: usize,
    /// Most operations open at once over all WebSockets authenticated with one key (auth on).
    pub max_subscriptions_per_key: usize,
    /// How long a WebSocket may stay open without sending `connection_init`.
    pub connection_init_timeout: std::time::Duration,
}

/// The nesting the parser is known to survive with room to spare on a 2 MiB worker stack (a debug
/// build overflows somewhere between 300 and 400 levels); configuration cannot go above it.
pub const CEILING_NESTING: usize = 128;
/// Validation of overlapping fields is quadratic in fragments and recursive along spread chains;
/// above this many it no longer fits a request's time or stack, whatever the configuration says.
pub const CEILING_FRAGMENTS: usize = 500;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 16,
            max_complexity: 50_000,
            introspection: true,
            max_nesting: 64,
            max_tokens: 20_000,
            max_fragments: 100,
            max_aliases: 100,
            max_root_fields: 20,
            max_embeddings: 200,
            max_subscriptions_per_connection: 100,
            max_subscriptions_per_key: 1000,
            connection_init_timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// A document refused before parsing: which limit it went over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    Nesting { max: usize },
    Tokens { max: usize },
    Fragments { max: usize },
    Complexity { max: usize, got: u64 },
    Aliases { max: usize, got: u64 },
    RootFields { max: usize, got: u64 },
    Embeddings { max: usize, got: u64 },
    SubscriptionsPerConnection { max: usize },
    SubscriptionsPerKey { max: usize },
}

impl Exceeded {
    /// The environment variable that raises the limit.
    pub fn variable(self) -> &'static str {
        match self {
            Exceeded::Nesting { .. } => "HONCHO_MAX_NESTING",
            Exceeded::Tokens { .. } => "HONCHO_MAX_TOKENS",
            Exceeded::Fragments { .. } => "HONCHO_MAX_FRAGMENTS",
            Exceeded::Complexity { .. } => "HONCHO_MAX_COMPLEXITY",
            Exceeded::Aliases { .. } => "HONCHO_MAX_ALIASES",
            Exceeded::RootFields { .. } => "HONCHO_MAX_ROOT_FIELDS",
            Exceeded::Embeddings { .. } => "HONCHO_MAX_EMBEDDINGS",
            Exceeded::SubscriptionsPerConnection { .. } => {
                "HONCHO_MAX_SUBSCRIPTIONS_PER_CONNECTION"
            }
            Exceeded::SubscriptionsPerKey { .. } => "HONCHO_MAX_SUBSCRIPTIONS_PER_KEY",
        }
    }

    pub fn limit(self) -> usize {
        match self {
            Exceeded::Nesting { max }
            | Exceeded::Tokens { max }
            | Exceeded::Fragments { max }
            | Exceeded::SubscriptionsPerConnection { max }
            | Exceeded::SubscriptionsPerKey { max } => max,
            Exceeded::Complexity { max, .. }
            | Exceeded::Aliases { max, .. }
            | Exceeded::RootFields { max, .. }
            | Exceeded::Embeddings { max, .. } => max,
        }
    }

    /// The request error a client sees: BAD_USER_INPUT, with the limit's name and value.
    pub fn into_error(self) -> ServerError {
        let message = match self {
            Exceeded::Nesting { max } => {
                format!("the document nests brackets deeper than {max} levels")
            }
            Exceeded::Tokens { max } => format!("the document has more than {max} tokens"),
            Exceeded::Fragments { max } => {
                format!("the document defines more than {max} fragments")
            }
            Exceeded::Complexity { max, got } => {
                format!("the query costs {got}, more than {max} (lists count their page size)")
            }
            Exceeded::Aliases { max, got } => {
                format!("the query has {got} aliased fields, more than {max}")
            }
            Exceeded::RootFields { max, got } => {
                format!("the operation has {got} top-level fields, more than {max}")
            }
            Exceeded::Embeddings { max, got } => {
                format!("the request would embed {got} texts, more than {max}")
            }
            Exceeded::SubscriptionsPerConnection { max } => {
                format!("this connection already has {max} operations open")
            }
            Exceeded::SubscriptionsPerKey { max } => {
                format!("this key already has {max} operations open")
            }
        };
        let (variable, max) = (self.variable(), self.limit());
        let error = async_graphql::Error::new(message).extend_with(|_, e| {
            e.set("code", Code::BadUserInput.as_str());
            e.set("limit", variable);
            e.set("max", max as u64);
        });
        // No location: a limit is over the whole document or connection, not at one place in
        // it, and the spec lets a request error go without. (`into_server_error` takes one, and
        // a default one read as `line 0, column 0`, which is no place in any document.)
        ServerError {
            locations: Vec::new(),
            ..error.into_server_error(Default::default())
        }
    }
}

/// Checks a parsed operation's [`Tally`] against the cost, alias, root-field and embedding
/// limits.
pub fn check(tally: &Tally, limits: &Limits) -> Result<(), Exceeded> {
    let over = |got: u64, max: usize| got > max as u64;
    if over(tally.cost, limits.max_complexity) {
        return Err(Exceeded::Complexity {
            max: limits.max_complexity,
            got: tally.cost,
        });
    }
    if over(tally.aliases, limits.max_aliases) {
        return Err(Exceeded::Aliases {
            max: limits.max_aliases,
            got: tally.aliases,
        });
    }
    if over(tally.root_fields, limits.max_root_fields) {
        return Err(Exceeded::RootFields {
            max: limits.max_root_fields,
            got: tally.root_fields,
        });
    }
    if over(tally.embeddings, limits.max_embeddings) {
        return Err(Exceeded::Embeddings {
            max: limits.max_embeddings,
            got: tally.embeddings,
        });
    }
    Ok(())
}

/// Checks a raw GraphQL document against the nesting, token and fragment limits without parsing
/// it. Strings, block strings and comments are skipped, so brackets inside them do not count.
/// A malformed document that passes is left to the parser to reject.
pub fn scan(query: &str, limits: &Limits) -> Result<(), Exceeded> {
    let bytes = query.as_bytes();
    let (mut i, mut depth, mut tokens, mut fragments) = (0usize, 0usize, 0usize, 0usize);
    let count = |tokens: &mut usize| {
        *tokens += 1;
        if *tokens > limits.max_tokens {
            Err(Exceeded::Tokens {
                max: limits.max_tokens,
            })
        } else {
            Ok(())
        }
    };
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                count(&mut tokens)?;
                i += 3;
                while i < bytes.len() && !bytes[i..].starts_with(b"\"\"\"") {
                    i += if bytes[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 3;
            }
            b'"' => {
                count(&mut tokens)?;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'{' | b'[' | b'(' => {
                count(&mut tokens)?;
                depth += 1;
                if depth > limits.max_nesting {
                    return Err(Exceeded::Nesting {
                        max: limits.max_nesting,
                    });
                }
                i += 1;
            }
            b'}' | b']' | b')' => {
                count(&mut tokens)?;
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'-' | b'.'))
                {
                    i += 1;
                }
                count(&mut tokens)?;
                // Fragment definitions only occur at the top level of a document.
                if depth == 0 && &bytes[start..i] == b"fragment" {
                    fragments += 1;
                    if fragments > limits.max_fragments {
                        return Err(Exceeded::Fragments {
                            max: limits.max_fragments,
                        });
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            _ => {
                // Punctuators (`...` counts as three) and anything the parser will reject.
                count(&mut tokens)?;
                i += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_nesting: 8,
            max_tokens: 100,
            max_fragments: 2,
            ..Limits::default()
        }
    }

    #[test]
    fn nested_literals_beyond_the_limit_are_refused() {
        let deep = format!("{{a(f:{}1{})}}", "[".repeat(8), "]".repeat(8));
        assert_eq!(
            scan(&deep, &limits()),
            Err(Exceeded::Nesting { max: 8 }),
            "{deep}"
        );
        let ok = format!("{{a(f:{}1{})}}", "[".repeat(6), "]".repeat(6));
        assert_eq!(scan(&ok, &limits()), Ok(()));
    }

    #[test]
    fn brackets_inside_strings_and_comments_do_not_count() {
        let q = format!(
            "{{a(s:\"{}\\\"{}\", b:\"\"\"{}\\\"\"\"{}\"\"\") # {}\n}}",
            "[".repeat(50),
            "{".repeat(50),
            "(".repeat(50),
            "[".repeat(50),
            "{".repeat(50)
        );
        assert_eq!(scan(&q, &limits()), Ok(()));
    }

    #[test]
    fn tokens_beyond_the_limit_are_refused() {
        let q = format!("{{{}}}", "a ".repeat(99));
        assert_eq!(scan(&q, &limits()), Err(Exceeded::Tokens { max: 100 }));
        let q = format!("{{{}}}", "a ".repeat(98));
        assert_eq!(scan(&q, &limits()), Ok(()));
    }

    #[test]
    fn fragment_definitions_beyond_the_limit_are_refused() {
        let q = "{...A} fragment A on Q {...B} fragment B on Q {...C} fragment C on Q {a}";
        assert_eq!(scan(q, &limits()), Err(Exceeded::Fragments { max: 2 }));
        // A field or argument named `fragment` inside a selection is not a definition.
        let q = "{fragment(fragment:1){fragment} fragment}";
        assert_eq!(scan(q, &limits()), Ok(()));
    }

    #[test]
    fn an_unterminated_string_ends_the_scan_without_panicking() {
        for q in [
            "{a(s:\"abc",
            "{a(s:\"\"\"abc\\",
            "\"",
            "\"\"\"",
            "{a(s:\"\\",
        ] {
            assert_eq!(scan(q, &limits()), Ok(()), "{q}");
        }
    }

    #[test]
    fn the_error_names_the_variable_that_raises_the_limit() {
        let e = Exceeded::Fragments { max: 2 }.into_error();
        let ext = e.extensions.expect("extensions");
        assert_eq!(
            ext.get("code"),
            Some(&async_graphql::Value::from("BAD_USER_INPUT"))
        );
        assert_eq!(
            ext.get("limit"),
            Some(&async_graphql::Value::from("HONCHO_MAX_FRAGMENTS"))
        );
        assert_eq!(ext.get("max"), Some(&async_graphql::Value::from(2u64)));
    }

    #[test]
    fn a_refusal_names_no_location() {
        let e = Exceeded::SubscriptionsPerConnection { max: 1 }.into_error();
        assert_eq!(e.locations, Vec::new());
        let json = serde_json::to_value(&e).unwrap();
        assert!(json.get("locations").is_none(), "{json}");
    }
}
