//! Relay-style slicing of an ordered list. A cursor names an item's position in the ordered,
//! filtered list and, for cursors given out now, the item's ordering key (its seq, or its creation
//! time and id): the next page is then `WHERE key > cursor` on the index, not `OFFSET position`,
//! which reads and throws away every row before it (a deep page of a long session cost as much as
//! reading the session). Cursors holding only a position (`o:N`, given out before) still work, by
//! offset. Positions number the items for `hasPreviousPage`; a list that changes under a reader
//! may shift them by the rows inserted before its cursor, which we accept.

use chrono::{DateTime, NaiveDate, Utc};
use sea_orm::sea_query::{ColumnType, Expr, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, Iterable, ModelTrait,
    PaginatorTrait, PrimaryKeyToColumn, QueryFilter, QuerySelect, QueryTrait, Select,
};
use serde::{Deserialize, Serialize};

use super::Store;
use super::error::{StoreError, StoreResult};
use super::filter::{self, Resource};
use crate::entity::{conclusion, peer, session, workspace};

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

/// One value of an item's ordering key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KeyPart {
    Int(i64),
    Text(String),
    Time(DateTime<Utc>),
}

impl KeyPart {
    fn of(value: sea_orm::Value) -> Option<KeyPart> {
        match value {
            sea_orm::Value::BigInt(Some(n)) => Some(KeyPart::Int(n)),
            sea_orm::Value::Int(Some(n)) => Some(KeyPart::Int(n.into())),
            sea_orm::Value::String(Some(s)) => Some(KeyPart::Text(s.to_string())),
            sea_orm::Value::ChronoDateTimeUtc(Some(t)) => Some(KeyPart::Time(t)),
            _ => None,
        }
    }

    fn expr(&self) -> SimpleExpr {
        match self {
            KeyPart::Int(n) => Expr::val(*n),
            KeyPart::Text(s) => Expr::val(s.clone()),
            KeyPart::Time(t) => Expr::val(*t),
        }
    }

    /// Whether this part can stand for a value of a column of `kind`, as PostgreSQL will read
    /// it: of the column's type, a text without NUL (PostgreSQL's text cannot hold one), a time
    /// inside timestamptz's range. Anything else would fail in the database (`integer >
    /// timestamptz` is error 42883), so it is refused before any SQL runs.
    fn fits(&self, kind: KeyKind) -> bool {
        match (self, kind) {
            (KeyPart::Int(_), KeyKind::Int) => true,
            (KeyPart::Text(s), KeyKind::Text) => !s.contains('\0'),
            (KeyPart::Time(t), KeyKind::Time) => *t >= earliest_timestamptz(),
            _ => false,
        }
    }
}

/// What a column of an ordering key holds, as [`KeyPart`]s carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Int,
    Text,
    Time,
}

impl KeyKind {
    /// The kind of `column`'s values; None for a type no key is made of ([`KeyPart::of`] reads
    /// no key from it either, so its items get position cursors).
    pub fn of<C: ColumnTrait>(column: &C) -> Option<KeyKind> {
        match column.def().get_column_type() {
            ColumnType::TinyInteger
            | ColumnType::SmallInteger
            | ColumnType::Integer
            | ColumnType::BigInteger => Some(KeyKind::Int),
            ColumnType::Char(_) | ColumnType::String(_) | ColumnType::Text => Some(KeyKind::Text),
            ColumnType::TimestampWithTimeZone => Some(KeyKind::Time),
            _ => None,
        }
    }
}

/// The earliest timestamptz PostgreSQL stores: 4714-11-24 BC, midnight UTC (year -4713 in
/// chrono's count). chrono reaches further back; its latest time is before PostgreSQL's.
fn earliest_timestamptz() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(-4713, 11, 24)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(DateTime::<Utc>::MIN_UTC, |t| t.and_utc())
}

/// A decoded cursor: the item's position and, when the cursor carries it, its ordering key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cursor {
    pub position: u64,
    pub key: Option<Vec<KeyPart>>,
}

impl Cursor {
    pub fn at(position: u64) -> Cursor {
        Cursor {
            position,
            key: None,
        }
    }
}

/// What the client asked for, with cursors decoded.
#[derive(Clone, Debug, Default)]
pub struct Slice {
    pub first: Option<u64>,
    pub after: Option<Cursor>,
    pub last: Option<u64>,
    pub before: Option<Cursor>,
    /// Count the whole list even when the window does not need it (`totalCount` was selected).
    pub want_total: bool,
}

#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The ordering key of each item (empty where a value could not be read as a key).
    pub keys: Vec<Vec<KeyPart>>,
    /// Offset of `items[0]` in the whole list.
    pub start: u64,
    pub has_previous: bool,
    pub has_next: bool,
    pub total: Option<u64>,
}

impl Slice {
    /// Checks the page sizes, and each cursor against the list it is used on: a position
    /// PostgreSQL's OFFSET takes and, when the cursor carries a key, one part per column of the
    /// list's ordering key (`kinds`), each of that column's kind. A cursor of another list, or
    /// one crafted, is refused here instead of failing in the database.
    pub fn validate(&self, kinds: &[Option<KeyKind>]) -> StoreResult<()> {
        for (name, v) in [("first", self.first), ("last", self.last)] {
            if let Some(n) = v
                && !(1..=MAX_PAGE).contains(&n)
            {
                return Err(StoreError::invalid(format!(
                    "{name} must be between 1 and {MAX_PAGE} (got {n})"
                )));
            }
        }
        let fits = |c: &Cursor| {
            c.position <= MAX_OFFSET
                && c.key.as_ref().is_none_or(|key| {
                    key.len() == kinds.len()
                        && key
                            .iter()
                            .zip(kinds)
                            .all(|(part, kind)| kind.is_some_and(|k| part.fits(k)))
                })
        };
        for (name, v) in [("after", &self.after), ("before", &self.before)] {
            if v.as_ref().is_some_and(|c| !fits(c)) {
                return Err(StoreError::invalid(format!(
                    "{name} is not a cursor from this list"
                )));
            }
        }
        Ok(())
    }
}

/// How a page by offset reads its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// In one SELECT of the rows.
    Whole,
    /// As a deferred join: first the page's primary keys, then its rows by key. Where an index
    /// holds the ordering key, the filtered columns and the primary key, the first step is an
    /// index-only scan, and the rows a filter skips are never read from the table: the messages
    /// of a session created after a given time, in `seq` order, skip every older message that way
    /// (bench/history/2026-12.md, "Reads: pages by time").
    Deferred,
}

/// A table the API lists by creation time, ties broken by id: workspaces, peers, sessions,
/// conclusions. Its lists take the filter language of [`Listed::RESOURCE`].
pub(crate) trait Listed: EntityTrait<Model: Send + Sync> {
    const RESOURCE: Resource;
    /// `created_at` and `id`, the list's ordering key.
    const KEY: [Self::Column; 2];
}

macro_rules! listed {
    ($($entity:ident: $resource:ident),*) => {$(
        impl Listed for $entity::Entity {
            const RESOURCE: Resource = Resource::$resource;
            const KEY: [$entity::Column; 2] = [$entity::Column::CreatedAt, $entity::Column::Id];
        }
    )*};
}

listed!(workspace: Workspace, peer: Peer, session: Session, conclusion: Conclusion);

impl Store {
    /// The page of `select`'s rows that match `filters` (JSON of `E`'s filter language), in
    /// `E`'s list order.
    pub(crate) async fn list<E: Listed>(
        &self,
        select: Select<E>,
        filters: &serde_json::Value,
        order: Order,
        slice: Slice,
    ) -> StoreResult<Page<E::Model>> {
        let filter = filter::parse(E::RESOURCE, filters)?;
        let select = select.filter(filter.condition(E::default().table_name()));
        fetch(self.reader(), select, order, &E::KEY, slice, Rows::Whole).await
    }
}

/// Runs `select`, ordered by `keys` (all in one direction, the last breaking ties), for the
/// requested slice. Forward from a keyed `after` (or back from a keyed `before` with `last`), it
/// seeks by key; otherwise by offset, with at most one COUNT (only when `last` has no `before` to
/// anchor it, or the total was asked for). One SELECT of `limit + 1` rows, the extra row telling
/// whether a further page exists. `rows` says how a page by offset reads its rows.
///
/// A page read forward does not need the total to know its rows, so when the total is only
/// reported, the COUNT runs beside the page's SELECT (on a second connection where `db` is a
/// pool) instead of before it: the request takes the longer of the two, not their sum. Either
/// way the two statements see the list at two moments, as they did one after the other.
pub async fn fetch<E, C>(
    db: &C,
    select: Select<E>,
    order: Order,
    keys: &[E::Column],
    slice: Slice,
    rows: Rows,
) -> StoreResult<Page<E::Model>>
where
    E: EntityTrait,
    E::Model: FromQueryResult + Send + Sync,
    C: ConnectionTrait,
{
    let kinds: Vec<Option<KeyKind>> = keys.iter().map(KeyKind::of).collect();
    slice.validate(&kinds)?;
    let forward = slice.last.is_none() && slice.before.is_none();
    if slice.want_total && forward {
        let counted = select.clone();
        let count = async move { Ok::<_, StoreError>(counted.count(db).await?) };
        let (total, mut page) =
            tokio::try_join!(count, window(db, select, order, keys, slice, rows, None))?;
        page.total = Some(total);
        return Ok(page);
    }
    let total = if slice.want_total || (slice.last.is_some() && slice.before.is_none()) {
        Some(select.clone().count(db).await?)
    } else {
        None
    };
    window(db, select, order, keys, slice, rows, total).await
}

/// [`fetch`]'s rows, given the list's total where it was counted first.
async fn window<E, C>(
    db: &C,
    select: Select<E>,
    order: Order,
    keys: &[E::Column],
    slice: Slice,
    rows: Rows,
    total: Option<u64>,
) -> StoreResult<Page<E::Model>>
where
    E: EntityTrait,
    E::Model: FromQueryResult + Send + Sync,
    C: ConnectionTrait,
{
    // A key's parts were checked against `keys` by `fetch`.
    let keyed = |c: &Option<Cursor>| {
        c.as_ref()
            .and_then(|c| c.key.clone().map(|k| (c.position, k)))
    };
    // Forward from a keyed cursor: the rows after its key.
    if slice.last.is_none()
        && slice.before.is_none()
        && let Some((position, key)) = keyed(&slice.after)
    {
        let limit = slice.first.unwrap_or(DEFAULT_PAGE);
        let select = ordered(select, order, keys).filter(seek::<E>(keys, &key, order, true));
        let mut items = select.limit(limit + 1).all(db).await?;
        let has_next = items.len() as u64 > limit;
        items.truncate(limit as usize);
        return Ok(page(items, keys, position + 1, has_next, total));
    }
    // Back from a keyed cursor: the rows before its key, read in reverse.
    if slice.first.is_none()
        && slice.after.is_none()
        && let (Some(last), Some((position, key))) = (slice.last, keyed(&slice.before))
    {
        let select =
            ordered(select, order.reversed(), keys).filter(seek::<E>(keys, &key, order, false));
        let mut items = select.limit(last).all(db).await?;
        items.reverse();
        let start = position.saturating_sub(items.len() as u64);
        let mut page = page(items, keys, start, true, total);
        page.has_previous = start > 0;
        return Ok(page);
    }
    let select = ordered(select, order, keys);
    let mut start = slice
        .after
        .as_ref()
        .map_or(0, |a| a.position.saturating_add(1));
    let mut end = slice.before.as_ref().map(|b| b.position).or(total);
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
        let mut page = page(
            Vec::new(),
            keys,
            start,
            total.is_some_and(|t| start < t),
            total,
        );
        page.has_previous = start > 0;
        return Ok(page);
    }
    let limit = end - start;
    let window = select.offset(start).limit(limit + 1);
    let mut items = match rows {
        Rows::Whole => window.all(db).await?,
        Rows::Deferred => {
            // Scoped here: in the whole module it makes `min` ambiguous on the integers above.
            use sea_orm::ExprTrait as _;
            let Some(pk) = E::PrimaryKey::iter().next().map(|k| k.into_column()) else {
                return Err(StoreError::Internal(
                    "a deferred page needs a primary key".into(),
                ));
            };
            let ids = window.select_only().column(pk).into_query();
            ordered(E::find(), order, keys)
                .filter(Expr::col((E::default(), pk)).in_subquery(ids))
                .all(db)
                .await?
        }
    };
    let has_next = items.len() as u64 > limit;
    items.truncate(limit as usize);
    Ok(page(items, keys, start, has_next, total))
}

fn page<M: ModelTrait>(
    items: Vec<M>,
    keys: &[<M::Entity as EntityTrait>::Column],
    start: u64,
    has_next: bool,
    total: Option<u64>,
) -> Page<M> {
    let item_keys = items
        .iter()
        .map(|item| {
            let key: Option<Vec<KeyPart>> =
                keys.iter().map(|k| KeyPart::of(item.get(*k))).collect();
            key.unwrap_or_default()
        })
        .collect();
    Page {
        items,
        keys: item_keys,
        start,
        has_previous: start > 0,
        has_next,
        total,
    }
}

/// `(keys) > (key)` in the list's order (`<` for a descending list), or the opposite when
/// seeking backwards: a row comparison that the index on the keys answers.
fn seek<E: EntityTrait>(
    columns: &[E::Column],
    key: &[KeyPart],
    order: Order,
    forward: bool,
) -> SimpleExpr {
    // In scope here only: its `min`/`max` would shadow the integers' elsewhere.
    use sea_orm::sea_query::ExprTrait as _;
    let cols: Vec<SimpleExpr> = columns
        .iter()
        .map(|c| Expr::col((E::default(), *c)))
        .collect();
    let vals: Vec<SimpleExpr> = key.iter().map(KeyPart::expr).collect();
    let (lhs, rhs) = if cols.len() == 1 {
        (cols[0].clone(), vals[0].clone())
    } else {
        (Expr::tuple(cols), Expr::tuple(vals))
    };
    if (order == Order::Asc) == forward {
        lhs.gt(rhs)
    } else {
        lhs.lt(rhs)
    }
}

impl Order {
    fn reversed(self) -> Order {
        match self {
            Order::Asc => Order::Desc,
            Order::Desc => Order::Asc,
        }
    }
}

/// Orders `select` by `keys`, all in one direction (the last key breaks ties).
fn ordered<E: EntityTrait>(select: Select<E>, order: Order, keys: &[E::Column]) -> Select<E> {
    let dir = match order {
        Order::Asc => sea_orm::Order::Asc,
        Order::Desc => sea_orm::Order::Desc,
    };
    keys.iter().fold(select, |s, key| {
        sea_orm::QueryOrder::order_by(s, *key, dir.clone())
    })
}
