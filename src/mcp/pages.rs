//! Pages of a list as the tools take and answer them: Honcho's `page`/`size` turned into the
//! store's slice, and the page with its total and page count (with a line of ids for the
//! workspaces, peers and sessions listed).

use serde_json::{Value, json};

use super::args::{Filters, Paging};
use super::error::{ToolError, ToolResult};
use super::reply::Reply;
use crate::store::page::{Cursor, MAX_PAGE, Page, Slice};

impl Paging {
    /// The store's slice for this page, with the total counted.
    pub fn slice(&self) -> ToolResult<Slice> {
        let page = self.page.unwrap_or(1);
        let size = self.size.unwrap_or(50);
        if page < 1 {
            return Err(ToolError::invalid("page must be at least 1"));
        }
        if !(1..=MAX_PAGE).contains(&size) {
            return Err(ToolError::invalid(format!(
                "size must be between 1 and {MAX_PAGE}"
            )));
        }
        let skip = (page - 1)
            .checked_mul(size)
            .ok_or_else(|| ToolError::invalid("page is too large"))?;
        Ok(Slice {
            first: Some(size),
            after: skip.checked_sub(1).map(Cursor::at),
            want_total: true,
            ..Slice::default()
        })
    }

    /// `{items_key: items, total, page, size, pages}`, as Honcho v3.0.12's MCP server pages.
    pub fn page<T, U: serde::Serialize + From<T>>(&self, key: &str, page: Page<T>) -> Value {
        let size = self.size.unwrap_or(50);
        let total = page.total.unwrap_or(0);
        let items: Vec<U> = page.items.into_iter().map(U::from).collect();
        json!({
            key: items,
            "total": total,
            "page": self.page.unwrap_or(1),
            "size": size,
            "pages": total.div_ceil(size),
        })
    }
}

/// `filters` as the store reads them (`{}` for none).
pub fn filters(f: Option<Filters>) -> Value {
    Value::Object(f.unwrap_or_default())
}

/// A page of named things (workspaces, peers, sessions) as a tool answers it: [`Paging::page`]
/// under `key`, and the text `n of total key: ids`.
pub fn listed<T, U: serde::Serialize + From<T>>(
    paging: &Paging,
    key: &str,
    page: Page<T>,
    id: impl Fn(&T) -> &str,
) -> ToolResult<Reply> {
    let ids: Vec<String> = page.items.iter().map(|t| id(t).to_owned()).collect();
    let value = paging.page::<T, U>(key, page);
    let text = format!(
        "{} of {} {key}: {}",
        ids.len(),
        value["total"],
        ids.join(", ")
    );
    Reply::new(&value, text)
}
