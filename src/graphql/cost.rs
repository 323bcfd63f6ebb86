//! What a parsed document will cost, computed before validation and execution.
//!
//! async-graphql's own complexity counts one per field, skips `__typename`, and expands every
//! fragment spread anew, so a chain of fragments that each spread the previous one twice costs
//! exponential time to measure. Here each fragment is measured once (memoised), every field
//! counts (`__typename` too), and a field that returns a list multiplies what is selected under
//! it by the most items it can return: its page size or limit, else its default.
//!
//! The multipliers go by field name, which is unambiguous in this schema:
//! - connections (`messages`, `peers`, `sessions`, `conclusions`, `workspaces`): `first` or
//!   `last`, else [`DEFAULT_PAGE`]; `totalCount` and `pageInfo` are not multiplied;
//! - `derived`: `first`, else [`DEFAULT_DERIVED`];
//! - `search`: `limit` (default 10); `queryConclusions`: `topK` (default 10);
//! - `context(before, after)`: `before + after + 1` (default 5; without arguments, inside a
//!   snippet, the widest window, 21);
//! - `reasoningTree`: `maxNodes` (default [`DEFAULT_TREE_NODES`]); `sources`: [`SOURCES`].
//!
//! Embeddings are counted the same way: one per `search` or `queryConclusions` (multiplied by the
//! lists around it), one per message of `createMessages` and per conclusion of
//! `createConclusions`.

use std::collections::HashMap;

use async_graphql::Variables;
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, OperationDefinition, Selection, SelectionSet,
    VariableDefinition,
};
use async_graphql::{Name, Positioned, Value};

/// Page size of a connection asked for without `first` or `last` (the store's default).
pub const DEFAULT_PAGE: u64 = crate::store::page::DEFAULT_PAGE;
/// Conclusions citing one conclusion, asked for without `first`.
pub const DEFAULT_DERIVED: u64 = crate::graphql::prefetch::DEFAULT_DERIVED;
/// Nodes of a `reasoningTree` asked for without `maxNodes`.
pub const DEFAULT_TREE_NODES: u64 = crate::store::conclusion::DEFAULT_TREE_NODES as u64;
/// Premises counted per `sources` (a derivation cites 1 to 100; most cite a few).
pub const SOURCES: u64 = 10;
/// The widest context window: 10 messages either side and the message itself.
const WIDEST_WINDOW: u64 = 21;

/// The totals of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Every field, `__typename` included, multiplied by the lists it sits in.
    pub cost: u64,
    /// Texts the request will embed (searches and written messages or conclusions).
    pub embeddings: u64,
    /// Fields written under an alias (after fragments are expanded, not multiplied by lists).
    pub aliases: u64,
    /// Fields at the top of the operation (fragments expanded).
    pub root_fields: u64,
}

/// What one selection set adds up to. `fields` counts the fields directly in the set (through
/// fragments), which is what `root_fields` needs at the top.
#[derive(Clone, Copy, Default)]
struct Sum {
    cost: u64,
    embeddings: u64,
    aliases: u64,
    fields: u64,
}

impl Sum {
    fn add(self, o: Sum) -> Sum {
        Sum {
            cost: self.cost.saturating_add(o.cost),
            embeddings: self.embeddings.saturating_add(o.embeddings),
            aliases: self.aliases.saturating_add(o.aliases),
            fields: self.fields.saturating_add(o.fields),
        }
    }

    fn times(self, m: u64) -> Sum {
        Sum {
            cost: self.cost.saturating_mul(m),
            embeddings: self.embeddings.saturating_mul(m),
            ..self
        }
    }
}

/// The totals of the operation that `operation_name` selects (every operation's maximum when it
/// selects none: execution will refuse such a document anyway).
pub fn tally(
    doc: &ExecutableDocument,
    operation_name: Option<&str>,
    variables: &Variables,
) -> Tally {
    let ops: Vec<&Positioned<OperationDefinition>> = match &doc.operations {
        DocumentOperations::Single(op) => vec![op],
        DocumentOperations::Multiple(ops) => match operation_name.and_then(|n| ops.get(n)) {
            Some(op) => vec![op],
            None => ops.values().collect(),
        },
    };
    let mut walker = Walker {
        doc,
        variables,
        definitions: &[],
        fragments: HashMap::new(),
    };
    let mut out = Tally::default();
    for op in ops {
        walker.definitions = &op.node.variable_definitions;
        // Fragment sums depend on the operation's variables (a spread's `first: $n`).
        walker.fragments.clear();
        let sum = walker.set(&op.node.selection_set);
        out.cost = out.cost.max(sum.cost);
        out.embeddings = out.embeddings.max(sum.embeddings);
        out.aliases = out.aliases.max(sum.aliases);
        out.root_fields = out.root_fields.max(sum.fields);
    }
    out
}

struct Walker<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    definitions: &'a [Positioned<VariableDefinition>],
    /// A fragment's sum once measured; None while it is being measured (a cycle, which
    /// validation refuses: it adds nothing here).
    fragments: HashMap<&'a str, Option<Sum>>,
}

impl<'a> Walker<'a> {
    fn set(&mut self, set: &'a Positioned<SelectionSet>) -> Sum {
        set.node.items.iter().fold(Sum::default(), |acc, item| {
            acc.add(self.selection(&item.node))
        })
    }

    fn selection(&mut self, selection: &'a Selection) -> Sum {
        match selection {
            Selection::Field(field) => self.field(&field.node),
            Selection::InlineFragment(inline) => self.set(&inline.node.selection_set),
            Selection::FragmentSpread(spread) => {
                let name = spread.node.fragment_name.node.as_str();
                match self.fragments.get(name) {
                    Some(Some(sum)) => *sum,
                    Some(None) => Sum::default(),
                    None => {
                        let Some(def) = self.doc.fragments.get(name) else {
                            return Sum::default();
                        };
                        self.fragments.insert(name, None);
                        let sum = self.set(&def.node.selection_set);
                        self.fragments.insert(name, Some(sum));
                        sum
                    }
                }
            }
        }
    }

    fn field(&mut self, field: &'a Field) -> Sum {
        let name = field.name.node.as_str();
        let own = Sum {
            cost: 1,
            embeddings: 0,
            aliases: u64::from(field.alias.is_some()),
            fields: 1,
        };
        let int = |w: &Self, arg: &str| w.int_arg(field, arg);
        let (multiplier, embeds) = match name {
            "messages" | "peers" | "sessions" | "conclusions" | "workspaces" => {
                let page = int(self, "first").or_else(|| int(self, "last"));
                (page.unwrap_or(DEFAULT_PAGE), 0)
            }
            "derived" => (int(self, "first").unwrap_or(DEFAULT_DERIVED), 0),
            "search" => (int(self, "limit").unwrap_or(10), 1),
            "queryConclusions" => (int(self, "topK").unwrap_or(10), 1),
            "context" if field.arguments.is_empty() => (WIDEST_WINDOW, 0),
            "context" => {
                let before = int(self, "before").unwrap_or(2);
                let after = int(self, "after").unwrap_or(2);
                (before.saturating_add(after).saturating_add(1), 0)
            }
            "reasoningTree" => (int(self, "maxNodes").unwrap_or(DEFAULT_TREE_NODES), 0),
            "sources" => (SOURCES, 0),
            "createMessages" => (1, self.list_len(field, "messages")),
            "createConclusions" => (1, self.list_len(field, "conclusions")),
            _ => (1, 0),
        };
        // Per-list totals are not multiplied by the page: they are one value each.
        let mut children = Sum::default();
        for item in &field.selection_set.node.items {
            let sum = self.selection(&item.node);
            let single = matches!(&item.node, Selection::Field(f)
                if matches!(f.node.name.node.as_str(), "totalCount" | "pageInfo" | "__typename"));
            children = children.add(if single { sum } else { sum.times(multiplier) });
        }
        let children = Sum {
            fields: 0,
            ..children
        };
        own.add(Sum {
            embeddings: embeds,
            ..Sum::default()
        })
        .add(children)
    }

    /// An argument's value with its variables filled in (an unset variable is null).
    fn argument(&self, field: &'a Field, arg: &str) -> Option<Value> {
        let (_, value) = field.arguments.iter().find(|(n, _)| n.node == arg)?;
        let filled = value
            .node
            .clone()
            .into_const_with(|var| Ok::<_, ()>(self.variable(&var).unwrap_or(Value::Null)));
        filled.ok()
    }

    fn variable(&self, var: &Name) -> Option<Value> {
        if let Some(v) = self.variables.get(var) {
            return Some(v.clone());
        }
        self.definitions
            .iter()
            .find(|d| d.node.name.node == *var)
            .and_then(|d| d.node.default_value.as_ref())
            .map(|v| v.node.clone())
    }

    /// A non-negative integer argument; a negative or non-integer one is left to the resolver to
    /// refuse (and counts as absent here).
    fn int_arg(&self, field: &'a Field, arg: &str) -> Option<u64> {
        match self.argument(field, arg)? {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    fn list_len(&self, field: &'a Field, arg: &str) -> u64 {
        match self.argument(field, arg) {
            Some(Value::List(items)) => items.len() as u64,
            Some(Value::Null) | None => 0,
            Some(_) => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    fn cost(q: &str) -> Tally {
        tally(&parse_query(q).unwrap(), None, &Variables::default())
    }

    #[test]
    fn every_field_counts_typename_included() {
        assert_eq!(cost("{ a b __typename }").cost, 3);
        assert_eq!(cost("{ a { b c } }").cost, 3);
    }

    #[test]
    fn lists_multiply_what_is_selected_under_them_by_their_page() {
        // 1 (messages) + 1 (totalCount) + 100 × (nodes + id)
        let t = cost("{ messages(first: 100) { totalCount nodes { id } } }");
        assert_eq!(t.cost, 1 + 1 + 100 * 2);
        let t = cost("{ messages { nodes { id } } }");
        assert_eq!(t.cost, 1 + DEFAULT_PAGE * 2);
        let t = cost(
            "{ m: messages(first: 100) { nodes { session { messages(first: 100) { nodes { id } } } } } }",
        );
        assert_eq!(t.cost, 1 + 100 * (1 + 1 + 1 + 100 * 2));
        assert_eq!(t.aliases, 1);
        let t = cost("{ x { context(before: 10, after: 10) { id } } }");
        assert_eq!(t.cost, 1 + 1 + 21);
    }

    #[test]
    fn variables_and_their_defaults_set_the_page() {
        let doc = parse_query(
            "query Q($n: Int = 7, $k: Int) { messages(first: $n) { nodes { id } } search(query: \"x\", limit: $k) { results { id } } }",
        )
        .unwrap();
        let t = tally(&doc, None, &Variables::default());
        assert_eq!(t.cost, (1 + 7 * 2) + (1 + 10 * 2));
        let vars = Variables::from_json(serde_json::json!({"n": 3, "k": 4}));
        let t = tally(&doc, None, &vars);
        assert_eq!(t.cost, (1 + 3 * 2) + (1 + 4 * 2));
        assert_eq!(t.embeddings, 1);
        assert_eq!(t.root_fields, 2);
    }

    #[test]
    fn a_doubling_fragment_chain_is_measured_once_per_fragment() {
        let mut q = String::from("{ ...F60 } fragment F0 on Query { a }");
        for i in 1..=60 {
            q.push_str(&format!(
                " fragment F{i} on Query {{ ...F{} ...F{} }}",
                i - 1,
                i - 1
            ));
        }
        let started = std::time::Instant::now();
        let t = cost(&q);
        // Expanding it would visit 2^60 spreads; measured once per fragment it is instant.
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(t.cost, 1u64 << 60);
        assert_eq!(t.root_fields, 1u64 << 60);
    }

    #[test]
    fn searches_in_lists_and_written_batches_count_as_embeddings() {
        let t = cost("{ workspaces(first: 20) { nodes { search(query: \"x\") { __typename } } } }");
        assert_eq!(t.embeddings, 20);
        let t = cost(
            "mutation { createMessages(workspaceId: \"w\", sessionId: \"s\", messages: [{peerId: \"a\", content: \"x\"}, {peerId: \"a\", content: \"y\"}]) { id } }",
        );
        assert_eq!(t.embeddings, 2);
    }

    #[test]
    fn aliases_and_root_fields_count_through_fragments() {
        let t = cost("{ a: x b: x ...F } fragment F on Query { c: x d: x }");
        assert_eq!(t.aliases, 4);
        assert_eq!(t.root_fields, 4);
    }

    /// Every saved playground operation passes the default limits.
    #[test]
    fn playground_examples_fit_the_default_limits() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("playground/examples");
        let limits = crate::graphql::Limits::default();
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "graphql") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let scanned = crate::graphql::limits::scan(&text, &limits);
            assert_eq!(scanned, Ok(()), "{}", path.display());
            let doc = parse_query(&text).unwrap();
            let names: Vec<Option<String>> = match &doc.operations {
                DocumentOperations::Single(_) => vec![None],
                DocumentOperations::Multiple(ops) => {
                    ops.keys().map(|k| Some(k.to_string())).collect()
                }
            };
            for name in names {
                let t = tally(&doc, name.as_deref(), &Variables::default());
                let checked_ok = crate::graphql::limits::check(&t, &limits);
                assert_eq!(checked_ok, Ok(()), "{} {name:?}: {t:?}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 9, "{checked} operations");
    }

    #[test]
    fn a_fragment_cycle_ends() {
        let t = cost("{ ...A } fragment A on Query { a ...B } fragment B on Query { b ...A }");
        assert_eq!(t.cost, 2);
    }
}
