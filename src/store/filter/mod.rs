//! Honcho's filter DSL, whose reference is docs/filters.md:
//! JSON → typed tree → sea_query condition.
//!
//! ```text
//! serde_json::Value ──parse──▶ Filter(Node) ──condition(table)──▶ sea_query::Condition
//!                     (parse.rs, coerce.rs;                (lower.rs)
//!                      errors name the key path)
//! ```
//! [`parse`] validates everything (keys per resource, operators, operand types) and never
//! touches SQL; [`Filter::condition`] folds the tree into one `Condition` whose operands are all
//! bound values. The grammar, and the decisions taken where Honcho v3.0.12 behaves in ways that look
//! unintended, are in docs/filters.md.

mod coerce;
mod error;
mod fields;
mod lower;
mod parse;
mod tree;

#[cfg(test)]
mod tests;

use sea_orm::sea_query::Condition;

pub use error::{FilterError, FilterErrorKind};
pub use fields::{Field, Kind, Resource};
pub(crate) use lower::like_pattern;
pub use parse::{MAX_DEPTH, MAX_VALUES};
pub use tree::{CmpOp, KeyTest, Node, Scalar};

/// A parsed, validated filter for one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    resource: Resource,
    tree: Node,
}

/// Parse a filter for `resource`. `null` and `{}` give a filter that matches everything.
pub fn parse(resource: Resource, json: &serde_json::Value) -> Result<Filter, FilterError> {
    parse_at(resource, json, parse::ROOT)
}

/// [`parse`], with error paths starting at `root` (the argument the filter came in: the typed
/// `where` arrives here as its JSON twin).
pub fn parse_at(
    resource: Resource,
    json: &serde_json::Value,
    root: &str,
) -> Result<Filter, FilterError> {
    Ok(Filter {
        resource,
        tree: parse::parse_root(resource, json, root)?,
    })
}

impl Filter {
    /// The filter that matches every row.
    pub fn all(resource: Resource) -> Filter {
        Filter {
            resource,
            tree: Node::True,
        }
    }

    /// Condition over columns qualified by `table` (the table name or alias used in the query,
    /// e.g. `"messages"` or `"m"`). Usable in `Entity::find().filter(cond)` and in hand-built
    /// `SelectStatement`s (`.cond_where(cond)`). An empty filter gives `Cond::all()` (no terms;
    /// rendered alone it reads `WHERE TRUE`); check [`Filter::is_empty`] to skip it.
    pub fn condition(&self, table: &str) -> Condition {
        lower::condition(&self.tree, table)
    }

    /// True when the filter matches everything (no condition to add).
    pub fn is_empty(&self) -> bool {
        self.tree == Node::True
    }

    /// True when the filter can match no row (e.g. `{"peerId": {"in": []}}`); a caller may skip
    /// the query.
    pub fn matches_nothing(&self) -> bool {
        self.tree == Node::False
    }

    /// The resource this filter was parsed for.
    pub fn resource(&self) -> Resource {
        self.resource
    }

    /// The typed tree (for inspection and tests).
    pub fn tree(&self) -> &Node {
        &self.tree
    }
}
