//! Relay connections over store pages: `first/after`, `last/before`, `edges { cursor node }`,
//! `nodes`, `pageInfo`, `totalCount`.

use async_graphql::connection::{Connection, CursorType, Edge};
use async_graphql::{Context, Enum, OutputType, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::{ApiResult, bad_input};
use crate::store::page::{MAX_OFFSET, MAX_PAGE, Order, Page, Slice};

/// Opaque cursor: the position of an item in the ordered, filtered list.
pub struct OffsetCursor(pub u64);

impl CursorType for OffsetCursor {
    type Error = &'static str;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| "invalid cursor")?;
        let text = std::str::from_utf8(&bytes).map_err(|_| "invalid cursor")?;
        text.strip_prefix("o:")
            .and_then(|n| n.parse().ok())
            .filter(|n| *n <= MAX_OFFSET)
            .map(OffsetCursor)
            .ok_or("invalid cursor")
    }

    fn encode_cursor(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("o:{}", self.0))
    }
}

#[derive(SimpleObject)]
pub struct Total {
    /// Number of items in the whole filtered list.
    total_count: u64,
}

pub type Conn<N> = Connection<OffsetCursor, N, Total>;

#[derive(Enum, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    #[default]
    Asc,
    Desc,
}

impl From<SortOrder> for Order {
    fn from(o: SortOrder) -> Self {
        match o {
            SortOrder::Asc => Order::Asc,
            SortOrder::Desc => Order::Desc,
        }
    }
}

/// Turns Relay arguments into a store slice; counts the list only if `totalCount` is selected.
pub fn slice(
    ctx: &Context<'_>,
    first: Option<i32>,
    after: Option<String>,
    last: Option<i32>,
    before: Option<String>,
) -> ApiResult<Slice> {
    let size = |name: &str, v: Option<i32>| -> ApiResult<Option<u64>> {
        match v {
            None => Ok(None),
            Some(n) if (1..=MAX_PAGE as i32).contains(&n) => Ok(Some(n as u64)),
            Some(n) => Err(bad_input(format!(
                "{name} must be between 1 and {MAX_PAGE} (got {n})"
            ))),
        }
    };
    let cursor = |name: &str, v: Option<String>| -> ApiResult<Option<u64>> {
        v.map(|c| {
            OffsetCursor::decode_cursor(&c)
                .map(|o| o.0)
                .map_err(|_| bad_input(format!("{name} is not a cursor from this list")))
        })
        .transpose()
    };
    Ok(Slice {
        first: size("first", first)?,
        after: cursor("after", after)?,
        last: size("last", last)?,
        before: cursor("before", before)?,
        want_total: ctx.look_ahead().field("totalCount").exists(),
    })
}

pub fn connection<T, N: OutputType>(page: Page<T>, node: impl Fn(T) -> N) -> Conn<N> {
    let mut conn = Connection::with_additional_fields(
        page.has_previous,
        page.has_next,
        Total {
            total_count: page.total.unwrap_or_default(),
        },
    );
    conn.edges.extend(
        page.items
            .into_iter()
            .enumerate()
            .map(|(i, item)| Edge::new(OffsetCursor(page.start + i as u64), node(item))),
    );
    conn
}
