//! The typed filter tree: what a parsed filter means, with no SQL in it.
//!
//! Columns are the SQL column names of the resource (`peer_name`, not `peerId`); operands are
//! already coerced to the column's type. The smart constructors [`Node::and`], [`Node::or`] and
//! [`Node::not`] fold constants away, so `True`/`False` only ever appear as the whole tree.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// A node of the filter tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Matches every row (no condition).
    True,
    /// Matches no row.
    False,
    /// All children hold (two or more, none constant).
    And(Vec<Node>),
    /// Some child holds (two or more, none constant).
    Or(Vec<Node>),
    /// NULL-safe negation: `(child) IS NOT TRUE`.
    Not(Box<Node>),
    /// `column IS NULL`.
    IsNull(&'static str),
    /// `column IS NOT NULL`.
    IsNotNull(&'static str),
    /// `column <op> value`; [`CmpOp::Ne`] is `IS DISTINCT FROM` (NULL-safe).
    Compare {
        column: &'static str,
        op: CmpOp,
        value: Scalar,
    },
    /// `column IN (values…)`; never empty (an empty `in` is [`Node::False`]).
    In {
        column: &'static str,
        values: Vec<Scalar>,
    },
    /// Case-insensitive substring match: `column ILIKE '%needle%'` (needle escaped when lowered).
    ILike {
        column: &'static str,
        needle: String,
    },
    /// JSONB containment: `column @> value`.
    JsonContains { column: &'static str, value: Value },
    /// A test on the text of one top-level key: `column ->> key`.
    JsonKey {
        column: &'static str,
        key: String,
        test: KeyTest,
    },
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    /// On real columns `IS DISTINCT FROM`; on a metadata key `<>` (a missing key does not match).
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

/// An operand coerced to a column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    Text(String),
    Int(i64),
    Bool(bool),
    DateTime(DateTime<Utc>),
}

/// What is tested on `metadata ->> key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyTest {
    /// Numeric comparison. The stored text is cast to `numeric` only when it looks like a number
    /// (otherwise the row does not match); the operand is a validated numeric literal.
    Numeric { op: CmpOp, value: String },
    /// Plain text comparison (lexicographic for ordering operators).
    Text { op: CmpOp, value: String },
    /// Case-insensitive substring match.
    ILike { needle: String },
    /// The key is present and not JSON null.
    NotNull,
}

impl Node {
    /// Conjunction; `True` children are dropped, a `False` child makes it `False`, nested
    /// conjunctions are flattened. No children: `True`.
    pub fn and(children: impl IntoIterator<Item = Node>) -> Node {
        let mut out = Vec::new();
        for c in children {
            match c {
                Node::True => {}
                Node::False => return Node::False,
                Node::And(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Node::True,
            1 => out.pop().unwrap_or(Node::True),
            _ => Node::And(out),
        }
    }

    /// Disjunction; a `True` child makes it `True` (a wildcard branch matches everything),
    /// `False` children are dropped, nested disjunctions are flattened. No children: `False`.
    pub fn or(children: impl IntoIterator<Item = Node>) -> Node {
        let mut out = Vec::new();
        for c in children {
            match c {
                Node::False => {}
                Node::True => return Node::True,
                Node::Or(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Node::False,
            1 => out.pop().unwrap_or(Node::False),
            _ => Node::Or(out),
        }
    }

    /// How many values the lowered condition binds (an upper bound on its `$n` parameters).
    pub fn bound_values(&self) -> usize {
        match self {
            Node::True | Node::False | Node::IsNull(_) | Node::IsNotNull(_) => 0,
            Node::And(c) | Node::Or(c) => c.iter().map(Node::bound_values).sum(),
            Node::Not(c) => c.bound_values(),
            Node::Compare { .. } | Node::ILike { .. } | Node::JsonContains { .. } => 1,
            Node::In { values, .. } => values.len(),
            // The key (twice for the guarded numeric cast) and the operand.
            Node::JsonKey { test, .. } => match test {
                KeyTest::Numeric { .. } => 3,
                KeyTest::Text { .. } | KeyTest::ILike { .. } => 2,
                KeyTest::NotNull => 1,
            },
        }
    }

    /// NULL-safe negation; constants flip.
    #[allow(clippy::should_implement_trait)]
    pub fn not(child: Node) -> Node {
        match child {
            Node::True => Node::False,
            Node::False => Node::True,
            other => Node::Not(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(c: &'static str) -> Node {
        Node::IsNull(c)
    }

    #[test]
    fn and_folds_constants_and_flattens() {
        assert_eq!(Node::and([]), Node::True);
        assert_eq!(Node::and([Node::True, Node::True]), Node::True);
        assert_eq!(Node::and([Node::True, leaf("a")]), leaf("a"));
        assert_eq!(Node::and([leaf("a"), Node::False]), Node::False);
        assert_eq!(
            Node::and([Node::and([leaf("a"), leaf("b")]), leaf("c")]),
            Node::And(vec![leaf("a"), leaf("b"), leaf("c")])
        );
    }

    #[test]
    fn or_folds_constants_and_flattens() {
        assert_eq!(Node::or([]), Node::False);
        assert_eq!(Node::or([leaf("a"), Node::True]), Node::True);
        assert_eq!(Node::or([Node::False, leaf("a")]), leaf("a"));
        assert_eq!(
            Node::or([leaf("a"), Node::or([leaf("b"), leaf("c")])]),
            Node::Or(vec![leaf("a"), leaf("b"), leaf("c")])
        );
    }

    #[test]
    fn bound_values_are_counted() {
        let cmp = Node::Compare {
            column: "c",
            op: CmpOp::Eq,
            value: Scalar::Int(1),
        };
        let num = Node::JsonKey {
            column: "metadata",
            key: "k".into(),
            test: KeyTest::Numeric {
                op: CmpOp::Gt,
                value: "1".into(),
            },
        };
        let list = Node::In {
            column: "c",
            values: vec![Scalar::Int(1), Scalar::Int(2)],
        };
        let n = Node::and([cmp, Node::not(num), list, leaf("x")]);
        assert_eq!(n.bound_values(), 1 + 3 + 2);
    }

    #[test]
    fn not_flips_constants() {
        assert_eq!(Node::not(Node::True), Node::False);
        assert_eq!(Node::not(Node::False), Node::True);
        assert_eq!(Node::not(leaf("a")), Node::Not(Box::new(leaf("a"))));
    }
}
