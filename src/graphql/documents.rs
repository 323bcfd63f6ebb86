//! Parsed documents, kept by their text.
//!
//! A client sends the same few documents over and over with different variables, and parsing is
//! a tenth of the CPU of a small query (`message(id)`): async-graphql's parser builds the tree
//! anew each time. [`Documents`] keeps the trees of recent documents and hands out a copy, which
//! costs a fraction of a parse. Only documents that passed [`super::limits::scan`] and parsed are
//! kept, so a hit skips both; what depends on the variables or the operation name (the cost
//! tally, the operation chosen) is still computed per request.
//!
//! Memory is bounded twice: at most [`CAPACITY`] documents, each at most [`MAX_TEXT`] bytes of
//! text (a larger one is parsed every time, as before).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use async_graphql::parser::types::ExecutableDocument;

/// Most documents kept, least recently used out first.
pub const CAPACITY: usize = 512;
/// Longest document text kept, in bytes.
pub const MAX_TEXT: usize = 8 * 1024;

pub struct Documents {
    parsed: Mutex<lru::LruCache<Box<str>, Arc<ExecutableDocument>>>,
}

impl Default for Documents {
    fn default() -> Self {
        Documents {
            parsed: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(CAPACITY).expect("CAPACITY is not zero"),
            )),
        }
    }
}

impl Documents {
    /// The parsed tree of `text`, if it is kept.
    pub fn get(&self, text: &str) -> Option<ExecutableDocument> {
        if text.len() > MAX_TEXT {
            return None;
        }
        let doc = self.lock().get(text).cloned()?;
        // Copied outside the lock: concurrent requests for the same document do not queue on it.
        Some(ExecutableDocument::clone(&doc))
    }

    /// Keeps the parsed tree of `text` (a document too long to keep is ignored).
    pub fn put(&self, text: &str, doc: &ExecutableDocument) {
        if text.len() > MAX_TEXT {
            return;
        }
        let doc = Arc::new(doc.clone());
        self.lock().put(text.into(), doc);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, lru::LruCache<Box<str>, Arc<ExecutableDocument>>> {
        // A panic while holding the lock leaves the cache consistent (each call is one get or
        // put), so a poisoned lock is still usable.
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(text).unwrap()
    }

    #[test]
    fn a_kept_document_comes_back_as_parsed() {
        let docs = Documents::default();
        let text = "query Q($id: ID!) { message(id: $id) { id content } }";
        assert!(docs.get(text).is_none());
        docs.put(text, &parse(text));
        let got = docs.get(text).expect("kept");
        assert_eq!(format!("{got:?}"), format!("{:?}", parse(text)));
        assert!(docs.get("{ other }").is_none());
    }

    #[test]
    fn the_least_recently_used_document_leaves_first_and_long_ones_are_not_kept() {
        let docs = Documents::default();
        let texts: Vec<String> = (0..=CAPACITY).map(|i| format!("{{ f{i} }}")).collect();
        for t in &texts[..CAPACITY] {
            docs.put(t, &parse(t));
        }
        // The first is used again, so the second is the oldest when one more comes.
        assert!(docs.get(&texts[0]).is_some());
        docs.put(&texts[CAPACITY], &parse(&texts[CAPACITY]));
        assert_eq!(docs.len(), CAPACITY);
        assert!(docs.get(&texts[0]).is_some());
        assert!(docs.get(&texts[1]).is_none());

        let long = format!("{{ a {} }}", " ".repeat(MAX_TEXT));
        docs.put(&long, &parse(&long));
        assert!(docs.get(&long).is_none());
    }
}
