//! Relay connections over store pages: `first/after`, `last/before`, `edges { cursor node }`,
//! `nodes`, `pageInfo`, `totalCount`.

use async_graphql::connection::{Connection, CursorType, Edge};
use async_graphql::{Context, Enum, OutputType, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::{ApiResult, bad_input};
use crate::store::page::{Cursor, KeyPart, MAX_OFFSET, MAX_PAGE, Order, Page, Slice};

/// Opaque cursor: an item's position in the ordered, filtered list and its ordering key
/// (`k:` and JSON, base64url), so the next page seeks by key; cursors of the form `o:<position>`,
/// given out before keys were, are still read (by position).
pub struct PageCursor(pub Cursor);

impl CursorType for PageCursor {
    type Error = &'static str;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| "invalid cursor")?;
        let text = std::str::from_utf8(&bytes).map_err(|_| "invalid cursor")?;
        let cursor = if let Some(n) = text.strip_prefix("o:") {
            n.parse().ok().map(Cursor::at)
        } else if let Some(json) = text.strip_prefix("k:") {
            serde_json::from_str::<(u64, Vec<KeyPart>)>(json)
                .ok()
                .map(|(position, key)| Cursor {
                    position,
                    key: Some(key),
                })
        } else {
            None
        };
        cursor
            .filter(|c| c.position <= MAX_OFFSET)
            .map(PageCursor)
            .ok_or("invalid cursor")
    }

    fn encode_cursor(&self) -> String {
        let text = match &self.0.key {
            Some(key) if !key.is_empty() => format!(
                "k:{}",
                serde_json::to_string(&(self.0.position, key)).unwrap_or_default()
            ),
            _ => format!("o:{}", self.0.position),
        };
        URL_SAFE_NO_PAD.encode(text)
    }
}

#[derive(SimpleObject)]
pub struct Total {
    /// Number of items in the whole filtered list.
    total_count: u64,
}

pub type Conn<N> = Connection<PageCursor, N, Total>;

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
    let cursor = |name: &str, v: Option<String>| -> ApiResult<Option<Cursor>> {
        v.map(|c| {
            PageCursor::decode_cursor(&c)
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
    let mut keys = page.keys.into_iter();
    conn.edges
        .extend(page.items.into_iter().enumerate().map(|(i, item)| {
            let cursor = Cursor {
                position: page.start + i as u64,
                key: keys.next(),
            };
            Edge::new(PageCursor(cursor), node(item))
        }));
    conn
}
