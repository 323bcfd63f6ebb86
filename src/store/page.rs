//! Relay-style slicing of an ordered list by position. Cursors are offsets into the ordered,
//! filtered list: cheap, and stable for lists that only grow at the end (messages by seq); a list
//! that changes under a reader may shift by the rows inserted before its cursor, which we accept.

use sea_orm::{ConnectionTrait, EntityTrait, FromQueryResult, PaginatorTrait, QuerySelect, Select};

use super::error::{StoreError, StoreResult};

pub const DEFAULT_PAGE: u64 = 50;
pub const MAX_PAGE: u64 = 100;
/// Largest position a cursor may name. PostgreSQL's OFFSET is a signed 64-bit integer; no list
/// comes near this, so a larger one is not a cursor this server gave out.
pub const MAX_OFFSET: u64 = 1 << 62;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    Asc,
    Desc,
}

/// What the client asked for, with cursors already decoded to offsets.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slice {
    pub first: Option<u64>,
    pub after: Option<u64>,
    pub last: Option<u64>,
    pub before: Option<u64>,
    /// Count the whole list even when the window does not need it (`totalCount` was selected).
    pub want_total: bool,
}

#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Offset of `items[0]` in the whole list.
    pub start: u64,
    pub has_previous: bool,
    pub has_next: bool,
    pub total: Option<u64>,
}

impl Slice {
    pub fn validate(&self) -> StoreResult<()> {
        for (name, v) in [("first", self.first), ("last", self.last)] {
            if let Some(n) = v
                && !(1..=MAX_PAGE).contains(&n)
            {
                return Err(StoreError::invalid(format!(
                    "{name} must be between 1 and {MAX_PAGE} (got {n})"
                )));
            }
        }
        for (name, v) in [("after", self.after), ("before", self.before)] {
            if v.is_some_and(|o| o > MAX_OFFSET) {
                return Err(StoreError::invalid(format!(
                    "{name} is not a cursor from this list"
                )));
            }
        }
        Ok(())
    }
}

/// Runs `select` for the requested slice: at most one COUNT (only when `last` has no `before` to
/// anchor it, or the total was asked for) and one SELECT of `limit + 1` rows, the extra row telling
/// whether a next page exists.
pub async fn fetch<E, C>(db: &C, select: Select<E>, slice: Slice) -> StoreResult<Page<E::Model>>
where
    E: EntityTrait,
    E::Model: FromQueryResult + Send + Sync,
    C: ConnectionTrait,
{
    slice.validate()?;
    let needs_total = slice.want_total || (slice.last.is_some() && slice.before.is_none());
    let total = if needs_total {
        Some(select.clone().count(db).await?)
    } else {
        None
    };
    let mut start = slice.after.map_or(0, |a| a.saturating_add(1));
    let mut end = slice.before.or(total);
    if let (Some(e), Some(t)) = (end, total) {
        end = Some(e.min(t));
    }
    let first = match (slice.first, slice.last) {
        (None, None) => Some(DEFAULT_PAGE),
        (f, _) => f,
    };
    if let Some(f) = first {
        let capped = start.saturating_add(f);
        end = Some(end.map_or(capped, |e| e.min(capped)));
    }
    if let (Some(l), Some(e)) = (slice.last, end) {
        start = start.max(e.saturating_sub(l));
    }
    let end = end.unwrap_or(start);
    if end <= start {
        return Ok(Page {
            items: Vec::new(),
            start,
            has_previous: start > 0,
            has_next: total.is_some_and(|t| start < t),
            total,
        });
    }
    let limit = end - start;
    let mut items = select.offset(start).limit(limit + 1).all(db).await?;
    let has_next = items.len() as u64 > limit;
    items.truncate(limit as usize);
    Ok(Page {
        items,
        start,
        has_previous: start > 0,
        has_next,
        total,
    })
}

/// Orders `select` by `keys`, all in one direction (the last key breaks ties).
pub fn ordered<E: EntityTrait>(select: Select<E>, order: Order, keys: &[E::Column]) -> Select<E> {
    let dir = match order {
        Order::Asc => sea_orm::Order::Asc,
        Order::Desc => sea_orm::Order::Desc,
    };
    keys.iter().fold(select, |s, key| {
        sea_orm::QueryOrder::order_by(s, *key, dir.clone())
    })
}
