//! A peer's representation: what an observer holds about an observed peer, written out from the
//! stored conclusions the way Honcho v3.0.12 lays it out (one block per level, numbered, dated). The REST
//! memory routes and MCP return it, and the dialectic shows it to the model.
//!
//! What it holds is a [`Recall`]: up to `max` conclusions, shared as Honcho v3.0.12 shares them
//! between three sources: the conclusions that best answer a `search_query` (the conclusions'
//! hybrid search, `search_top_k` of them, a third by default, none farther than
//! `search_max_distance`), the most derived ones when `include_most_frequent` (a third with a
//! search, half without), and the newest for the rest. Each conclusion shows once. Unlike Honcho,
//! which sorts every block by time, a block here lists its search hits first, best first, then
//! the others oldest first: the reader meets what was asked about before the background.

use std::collections::HashSet;

use sea_orm::{ActiveEnum, Iterable};
use serde_json::{Value, json};

use crate::store::conclusion::{Conclusion, Level};
use crate::store::page::{MAX_PAGE, Order, Slice};
use crate::store::{Store, StoreError, StoreResult};

/// Most conclusions a representation shows by default (Honcho v3.0.12's).
pub const DEFAULT_MAX_CONCLUSIONS: u64 = 25;
/// Largest `search_top_k` (Honcho v3.0.12's).
pub const MAX_SEARCH_TOP_K: u64 = 100;
/// Largest `search_max_distance`: Honcho v3.0.12 bounds it to 0..=1 of cosine distance.
pub const MAX_SEARCH_DISTANCE: f64 = 1.0;

/// Which conclusions a representation holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Recall {
    /// 1 to 100.
    pub max: u64,
    /// Curates the representation around the conclusions that answer it (blank: no search).
    pub search_query: Option<String>,
    /// How many of the `max` the search gives, 1 to 100 (a third of `max`).
    pub search_top_k: Option<u64>,
    /// Cosine distance, 0 to 1, beyond which a conclusion is no search hit.
    pub search_max_distance: Option<f64>,
    /// Gives a share of `max` to the most derived conclusions (highest `times_derived`).
    pub include_most_frequent: bool,
}

impl Recall {
    /// The newest `max` conclusions.
    pub fn newest(max: u64) -> Recall {
        Recall {
            max,
            search_query: None,
            search_top_k: None,
            search_max_distance: None,
            include_most_frequent: false,
        }
    }

    /// Refuses out-of-range values (BAD_USER_INPUT), whether or not a search is asked for, as
    /// Honcho v3.0.12 validates its request.
    pub fn check(&self) -> StoreResult<()> {
        if !(1..=MAX_PAGE).contains(&self.max) {
            return Err(StoreError::invalid(format!(
                "max_conclusions must be between 1 and {MAX_PAGE} (got {})",
                self.max
            )));
        }
        if let Some(k) = self.search_top_k
            && !(1..=MAX_SEARCH_TOP_K).contains(&k)
        {
            return Err(StoreError::invalid(format!(
                "search_top_k must be between 1 and {MAX_SEARCH_TOP_K} (got {k})"
            )));
        }
        if let Some(d) = self.search_max_distance
            && !(d.is_finite() && (0.0..=MAX_SEARCH_DISTANCE).contains(&d))
        {
            return Err(StoreError::invalid(format!(
                "search_max_distance must be between 0 and {MAX_SEARCH_DISTANCE} (got {d})"
            )));
        }
        Ok(())
    }

    /// The query, when there is one to search for.
    fn query(&self) -> Option<&str> {
        self.search_query
            .as_deref()
            .filter(|q| !q.trim().is_empty())
    }

    /// How many conclusions come from the search, the most derived and the newest (Honcho
    /// v3.0.12's split; the newest take what the others leave).
    pub fn shares(&self) -> (u64, u64, u64) {
        let total = self.max;
        let searched = match self.query() {
            Some(_) => self.search_top_k.unwrap_or(total / 3).max(1).min(total),
            None => 0,
        };
        let frequent = match (self.query().is_some(), self.include_most_frequent) {
            (true, true) => (total / 3).min(total - searched),
            (false, true) => (total / 2).min(total - searched),
            _ => 0,
        };
        (searched, frequent, total - searched - frequent)
    }
}

/// `observer`'s representation of `observed`: its newest `max` live conclusions (among those
/// matching `scope`, a conclusion filter such as `{"session_id": ...}`), per level, oldest
/// first; "" when there are none.
pub async fn represent(
    store: &Store,
    workspace: &str,
    observer: &str,
    observed: &str,
    scope: &Value,
    max: u64,
) -> StoreResult<String> {
    represent_with(
        store,
        workspace,
        observer,
        observed,
        scope,
        &Recall::newest(max),
    )
    .await
}

/// `observer`'s representation of `observed` as `recall` selects it (module docs), among the
/// live conclusions matching `scope`; "" when there are none. Without an embedder, or with one
/// too busy, the search's share goes unfilled rather than failing the read (as Honcho v3.0.12
/// degrades when it cannot embed the query).
pub async fn represent_with(
    store: &Store,
    workspace: &str,
    observer: &str,
    observed: &str,
    scope: &Value,
    recall: &Recall,
) -> StoreResult<String> {
    recall.check()?;
    let filters = json!({"AND": [{"observer_id": observer, "observed_id": observed}, scope]});
    let (searched, frequent, newest) = recall.shares();
    let mut hits: Vec<Conclusion> = Vec::new();
    if let Some(query) = recall.query()
        && searched > 0
        && store.embedder().is_some()
    {
        match store
            .query_conclusions(
                workspace,
                query,
                searched,
                recall.search_max_distance,
                &filters,
            )
            .await
        {
            Ok(found) => hits = found,
            Err(StoreError::Busy(e)) => {
                tracing::warn!(error = %e, "representation: search skipped, embedder busy");
            }
            Err(e) => return Err(e),
        }
    }
    let mut others: Vec<Conclusion> = Vec::new();
    if frequent > 0 {
        others.extend(
            store
                .most_derived_conclusions(workspace, &filters, frequent)
                .await?,
        );
    }
    if newest > 0 {
        let slice = Slice {
            first: Some(newest),
            ..Slice::default()
        };
        let page = store
            .list_conclusions(workspace, Some(observer), &filters, Order::Desc, slice)
            .await?;
        others.extend(page.items);
    }
    Ok(layout(hits, others))
}

/// One block per level: the search hits in their order, then the others oldest first; each
/// conclusion once.
fn layout(hits: Vec<Conclusion>, mut others: Vec<Conclusion>) -> String {
    let mut seen: HashSet<String> = hits.iter().map(|c| c.id.clone()).collect();
    others.retain(|c| seen.insert(c.id.clone()));
    if hits.is_empty() && others.is_empty() {
        return String::new();
    }
    others.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    let mut out = Vec::new();
    for level in Level::iter() {
        out.push(format!("{}:\n", level.to_value().to_uppercase()));
        let of_level = hits
            .iter()
            .chain(others.iter())
            .filter(|c| c.level == level);
        for (i, c) in of_level.enumerate() {
            let at = c.created_at.format("%Y-%m-%d %H:%M:%S");
            out.push(format!("{}. [{at}] {}", i + 1, c.content));
        }
        out.push(String::new());
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recall(max: u64, query: Option<&str>, top_k: Option<u64>, frequent: bool) -> Recall {
        Recall {
            max,
            search_query: query.map(str::to_owned),
            search_top_k: top_k,
            search_max_distance: None,
            include_most_frequent: frequent,
        }
    }

    #[test]
    fn the_shares_follow_honchos_split() {
        assert_eq!(recall(25, None, None, false).shares(), (0, 0, 25));
        assert_eq!(recall(25, None, None, true).shares(), (0, 12, 13));
        assert_eq!(recall(25, Some("q"), None, false).shares(), (8, 0, 17));
        assert_eq!(recall(25, Some("q"), None, true).shares(), (8, 8, 9));
        assert_eq!(recall(25, Some("q"), Some(40), true).shares(), (25, 0, 0));
        assert_eq!(recall(2, Some("q"), None, false).shares(), (1, 0, 1));
        // A blank query is no search, as in Honcho v3.0.12.
        assert_eq!(recall(25, Some("  "), Some(5), false).shares(), (0, 0, 25));
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut r = recall(25, Some("q"), Some(0), false);
        assert!(r.check().is_err());
        r.search_top_k = Some(101);
        assert!(r.check().is_err());
        r.search_top_k = Some(100);
        assert!(r.check().is_ok());
        r.search_max_distance = Some(1.5);
        assert!(r.check().is_err());
        r.search_max_distance = Some(f64::NAN);
        assert!(r.check().is_err());
        r.search_max_distance = Some(0.0);
        assert!(r.check().is_ok());
        r.max = 0;
        assert!(r.check().is_err());
    }
}
