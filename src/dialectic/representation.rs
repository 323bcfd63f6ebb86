//! A peer's representation: what an observer holds about an observed peer, written out from the
//! stored conclusions the way Honcho v3.0.12 lays it out (one block per level, numbered, dated). The REST
//! memory routes return it, and the dialectic shows it to the model.

use sea_orm::{ActiveEnum, Iterable};
use serde_json::{Value, json};

use crate::store::conclusion::Level;
use crate::store::page::{MAX_PAGE, Order, Slice};
use crate::store::{Store, StoreError, StoreResult};

/// Most conclusions a representation shows by default (Honcho v3.0.12's).
pub const DEFAULT_MAX_CONCLUSIONS: u64 = 25;

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
    if !(1..=MAX_PAGE).contains(&max) {
        return Err(StoreError::invalid(format!(
            "max_conclusions must be between 1 and {MAX_PAGE}"
        )));
    }
    let filters = json!({"AND": [{"observed_id": observed}, scope]});
    let slice = Slice {
        first: Some(max),
        ..Slice::default()
    };
    let mut page = store
        .list_conclusions(workspace, Some(observer), &filters, Order::Desc, slice)
        .await?;
    if page.items.is_empty() {
        return Ok(String::new());
    }
    page.items.reverse();
    let mut out = Vec::new();
    for level in Level::iter() {
        out.push(format!("{}:\n", level.to_value().to_uppercase()));
        let of_level = page.items.iter().filter(|c| c.level == level);
        for (i, c) in of_level.enumerate() {
            let at = c.created_at.format("%Y-%m-%d %H:%M:%S");
            out.push(format!("{}. [{at}] {}", i + 1, c.content));
        }
        out.push(String::new());
    }
    Ok(out.join("\n"))
}
