//! Limits that keep one request from monopolising (or crashing) the server.
//!
//! Depth and complexity are async-graphql's own checks, run after parsing. They come too late for
//! two shapes of document: async-graphql's parser recurses once per nested list or object literal,
//! and its validation (overlapping fields) is quadratic in fragments and recurses along chains of
//! spreads, so a few kilobytes of `[[[[…` or a chain of fragments overflow a worker's stack before
//! any limit runs. [`scan`] therefore reads the raw document first, in one linear pass over its
//! bytes, and refuses nesting, token and fragment counts above the configured limits.
//!
//! It counts the fields written in the document too. A field is the costliest thing to parse and
//! validate (about 6 µs each in a release build, against 1-2 µs for a number in a list), and that
//! work is done whatever the field returns: 19,000 repeats of `id` (57 kB, within the token limit,
//! refused nowhere since repeats merge into one answer) took 120 ms of parsing each, and 16 such
//! requests at a time held `/health` for half a second. Parsing cannot yield, so the count must
//! come before it.

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
    /// Most fields written in the document, repeats included (a fragment's once, as written).
    pub max_fields: usize,
    /// Most fields written under an alias ([`super::cost`]).
    pub max_aliases: usize,
    /// Most fields at the top of the operation.
    pub max_root_fields: usize,
    /// Most texts one request may embed (searches, written messages and conclusions).
    pub max_embeddings: usize,
    /// Most operations open at once on one WebSocket.
    pub max_subscriptions_per_connection: usize,
    /// Most operations open at once over all WebSockets authenticated with one key (auth on),
    /// counted by each server (router) apart.
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
            max_fields: 1_000,
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
    Fields { max: usize },
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
            Exceeded::Fields { .. } => "HONCHO_MAX_FIELDS",
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
            | Exceeded::Fields { max }
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
            Exceeded::Fields { max } => {
                format!(
                    "the document writes more than {max} fields (repeated ones count each time)"
                )
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

/// Checks a raw GraphQL document against the nesting, token, fragment and field limits without
/// parsing it. Strings, block strings and comments are skipped, so brackets inside them do not
/// count. A malformed document that passes is left to the parser to reject.
///
/// A field is a name inside a selection set (braces outside any parentheses: arguments and
/// variable definitions hold only values), unless it is an alias (a colon follows), a directive's
/// (after `@`), or a fragment spread's or type condition's (after `...`). The fields are checked
/// once the document is within the token limit, so an oversized document is refused as such.
pub fn scan(query: &str, limits: &Limits) -> Result<(), Exceeded> {
    let bytes = query.as_bytes();
    let (mut i, mut depth, mut tokens, mut fragments) = (0usize, 0usize, 0usize, 0usize);
    // Parentheses open, selection sets open (outside parentheses), fields written.
    let (mut parens, mut sets, mut fields) = (0usize, 0usize, 0usize);
    // The punctuator before the current name (`.`, `@`), and whether the name after the next is
    // a type condition (`... on T`).
    let (mut after, mut condition) = (0u8, false);
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
                match bytes[i] {
                    b'(' => parens += 1,
                    b'{' if parens == 0 => sets += 1,
                    _ => {}
                }
                (after, condition) = (0, false);
                i += 1;
            }
            b'}' | b']' | b')' => {
                count(&mut tokens)?;
                depth = depth.saturating_sub(1);
                match bytes[i] {
                    b')' => parens = parens.saturating_sub(1),
                    b'}' if parens == 0 => sets = sets.saturating_sub(1),
                    _ => {}
                }
                (after, condition) = (0, false);
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
                if sets > 0 && parens == 0 {
                    let spread = after == b'.';
                    let named = !spread && after != b'@' && !condition;
                    if named && next_significant(bytes, i) != Some(b':') {
                        fields += 1;
                    }
                    condition = spread && &bytes[start..i] == b"on";
                }
                after = 0;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            b => {
                // Punctuators (`...` counts as three) and anything the parser will reject.
                count(&mut tokens)?;
                (after, condition) = (b, false);
                i += 1;
            }
        }
    }
    if fields > limits.max_fields {
        return Err(Exceeded::Fields {
            max: limits.max_fields,
        });
    }
    Ok(())
}

/// The first byte from `i` on that is not white space, a comma or in a comment.
fn next_significant(bytes: &[u8], mut i: usize) -> Option<u8> {
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b',' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
            }
            b => return Some(b),
        }
    }
    None
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
    fn fields_are_counted_repeats_included_but_not_aliases_directives_spreads_or_values() {
        let limits = |max_fields| Limits {
            max_fields,
            ..Limits::default()
        };
        // a, c (under alias b), d, e, f, g, h, i: 8. Not: the alias, `skip`, the spread `F`,
        // `on T`, the argument `x`, the object literal's key `k`, the variable `v`, `Int`.
        let q = "query Q($v: Int = 1) { a b : c ...F ... on T { d } e @skip(if: $v) \
                 f(x: {k: 1}) { g } # h: not a field\n } fragment F on T { h i }";
        assert_eq!(scan(q, &limits(8)), Ok(()));
        assert_eq!(scan(q, &limits(7)), Err(Exceeded::Fields { max: 7 }));
        let repeats = format!("{{ w {{ {} }} }}", "id ".repeat(1000));
        assert_eq!(
            scan(&repeats, &limits(1000)),
            Err(Exceeded::Fields { max: 1000 })
        );
        assert_eq!(scan(&repeats, &limits(1001)), Ok(()));
    }

    #[test]
    fn an_oversized_document_is_refused_for_its_tokens_before_its_fields() {
        let q = format!("{{{}}}", "a ".repeat(200));
        let limits = Limits {
            max_fields: 10,
            ..limits()
        };
        assert_eq!(scan(&q, &limits), Err(Exceeded::Tokens { max: 100 }));
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
