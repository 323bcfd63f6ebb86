//! Typed filter tree → sea_query [`Condition`] over columns qualified by a table name or alias.
//!
//! Every operand is a bound value (`$n` when built); the only SQL text written here is fixed
//! (operators, `CAST(... AS numeric)`, the numeric-shape regex, `IS NOT TRUE`, `FALSE`).

use sea_orm::sea_query::extension::postgres::PgExpr;
use sea_orm::sea_query::{Alias, BinOper, Condition, Expr, ExprTrait, LikeExpr, Value};

use super::coerce::MAX_NUMERIC_LEN;
use super::fields::ALWAYS_TRUE;
use super::tree::{CmpOp, KeyTest, Node, Scalar};

/// What `metadata ->> key` must look like to be cast to `numeric`: the shape jsonb prints numbers
/// in, plus exponents (at most 3 digits), and at most [`MAX_NUMERIC_LEN`] characters (checked
/// apart: PostgreSQL's regular expressions cap repetition counts at 255), so the cast cannot
/// overflow. Anything else is not compared numerically, and no stored value ever makes the query
/// fail.
pub(crate) const NUMERIC_TEXT_RE: &str = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$";

/// The condition for a tree; `True` is the empty conjunction (`Cond::all()`).
pub(crate) fn condition(node: &Node, table: &str) -> Condition {
    match node {
        Node::True => Condition::all(),
        Node::And(children) => children
            .iter()
            .fold(Condition::all(), |c, n| c.add(condition(n, table))),
        Node::Or(children) => children
            .iter()
            .fold(Condition::any(), |c, n| c.add(condition(n, table))),
        leaf => Condition::all().add(expr(leaf, table)),
    }
}

fn col(table: &str, column: &str) -> Expr {
    if column == ALWAYS_TRUE {
        return Expr::cust(ALWAYS_TRUE);
    }
    Expr::col((Alias::new(table), Alias::new(column)))
}

fn value(s: &Scalar) -> Value {
    match s {
        Scalar::Text(t) => t.clone().into(),
        Scalar::Int(i) => (*i).into(),
        Scalar::Bool(b) => (*b).into(),
        Scalar::DateTime(dt) => (*dt).into(),
    }
}

fn compare(left: Expr, op: CmpOp, right: Expr, ne_null_safe: bool) -> Expr {
    match op {
        CmpOp::Eq => left.eq(right),
        CmpOp::Ne if ne_null_safe => left.binary(BinOper::Custom("IS DISTINCT FROM"), right),
        CmpOp::Ne => left.ne(right),
        CmpOp::Gt => left.gt(right),
        CmpOp::Gte => left.gte(right),
        CmpOp::Lt => left.lt(right),
        CmpOp::Lte => left.lte(right),
    }
}

/// `%needle%` with the LIKE metacharacters `%`, `_` and the escape `\` escaped.
pub(crate) fn like_pattern(needle: &str) -> String {
    let mut p = String::with_capacity(needle.len() + 2);
    p.push('%');
    for c in needle.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// `left ILIKE '%needle%'`, relying on PostgreSQL's default LIKE escape character `\`
/// (sea_query renders an explicit `ESCAPE` inside parentheses, which PostgreSQL refuses).
fn ilike(left: Expr, needle: &str) -> Expr {
    left.ilike(LikeExpr::new(like_pattern(needle)))
}

fn expr(node: &Node, table: &str) -> Expr {
    match node {
        Node::True => Expr::cust("TRUE"),
        Node::False => Expr::cust("FALSE"),
        Node::And(_) | Node::Or(_) => condition(node, table).into(),
        Node::Not(child) => {
            Expr::cust_with_exprs("($1) IS NOT TRUE", [condition(child, table).into()])
        }
        Node::IsNull(c) => col(table, c).is_null(),
        Node::IsNotNull(c) => col(table, c).is_not_null(),
        Node::Compare {
            column,
            op,
            value: v,
        } => compare(col(table, column), *op, Expr::val(value(v)), true),
        Node::In { column, values } => col(table, column).is_in(values.iter().map(value)),
        Node::ILike { column, needle } => ilike(col(table, column), needle),
        Node::JsonContains { column, value: v } => {
            col(table, column).contains(Expr::val(Value::Json(Some(Box::new(v.clone())))))
        }
        Node::JsonKey { column, key, test } => {
            let text = col(table, column).cast_json_field(key.clone());
            match test {
                KeyTest::NotNull => text.is_not_null(),
                KeyTest::Text { op, value: v } => compare(text, *op, Expr::val(v.clone()), false),
                KeyTest::ILike { needle } => ilike(text, needle),
                KeyTest::Numeric { op, value: v } => {
                    let guarded = Expr::cust_with_exprs(
                        format!(
                            "CASE WHEN length($1) <= {MAX_NUMERIC_LEN} AND ($1) ~ '{NUMERIC_TEXT_RE}' \
                             THEN CAST(($1) AS numeric) END"
                        ),
                        [text],
                    );
                    let operand =
                        Expr::cust_with_exprs("CAST($1 AS numeric)", [Expr::val(v.clone())]);
                    compare(guarded, *op, operand, false)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_metacharacters() {
        assert_eq!(like_pattern("abc"), "%abc%");
        assert_eq!(like_pattern("50%_off\\"), r"%50\%\_off\\%");
        assert_eq!(like_pattern(""), "%%");
    }
}
