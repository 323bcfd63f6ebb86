//! JSON → typed filter tree (docs/filters.md: grammar and decisions). No SQL here.

use sea_orm::ActiveEnum;
use serde_json::{Map, Value};

use super::coerce::{self, IntOperand};
use super::error::{FilterError, FilterErrorKind as K, index_path, key_path, show};
use super::fields::{Field, Kind, Resource};
use super::tree::{CmpOp, KeyTest, Node, Scalar};

/// Deepest logical nesting: the top object is depth 0, each AND/OR/NOT adds one.
pub const MAX_DEPTH: usize = 5;

/// Most values one filter may bind. PostgreSQL takes at most 65535 parameters per statement and
/// a search may use the filter in each of its legs; this keeps far below that.
pub const MAX_VALUES: usize = 5000;

/// Longest string (operand or key) in a filter, in characters. Ids are at most 512; longer
/// operands only make `ILIKE` patterns and casts slower.
pub const MAX_VALUE_CHARS: usize = 1000;

/// The path every error starts from: the argument the filter came in.
pub(crate) const ROOT: &str = "filters";

/// Every operator, as docs/filters.md's grammar lists them.
pub(super) const OPERATORS: [&str; 9] = [
    "eq",
    "gt",
    "gte",
    "lt",
    "lte",
    "ne",
    "in",
    "contains",
    "icontains",
];

/// A JSON object key that is an operator, as a `'static` name.
fn operator(key: &str) -> Option<&'static str> {
    OPERATORS.iter().copied().find(|op| *op == key)
}

fn is_wildcard(v: &Value) -> bool {
    v.as_str() == Some("*")
}

type Result<T> = std::result::Result<T, FilterError>;

/// PostgreSQL text and jsonb cannot hold NUL; refuse it here rather than fail in the database.
fn no_nul(s: &str, path: &str) -> Result<()> {
    if s.contains('\0') {
        err(path, K::NulCharacter)
    } else {
        Ok(())
    }
}

/// The path of the first key or string holding a NUL inside a JSON value, if any.
fn find_nul(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::String(s) if s.contains('\0') => Some(path.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_nul(item, &index_path(path, i))),
        Value::Object(obj) => obj.iter().find_map(|(k, item)| {
            let kpath = key_path(path, k);
            if k.contains('\0') {
                Some(kpath)
            } else {
                find_nul(item, &kpath)
            }
        }),
        _ => None,
    }
}

/// The path and length of the first key or string longer than [`MAX_VALUE_CHARS`], if any.
fn find_long(v: &Value, path: &str) -> Option<(String, usize)> {
    let long = |s: &str| {
        // Bytes bound characters from above: most strings are decided without counting.
        (s.len() > MAX_VALUE_CHARS)
            .then(|| s.chars().count())
            .filter(|n| *n > MAX_VALUE_CHARS)
    };
    match v {
        Value::String(s) => long(s).map(|n| (path.to_owned(), n)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_long(item, &index_path(path, i))),
        Value::Object(obj) => obj.iter().find_map(|(k, item)| {
            let kpath = key_path(path, k);
            match long(k) {
                Some(n) => Some((kpath, n)),
                None => find_long(item, &kpath),
            }
        }),
        _ => None,
    }
}

/// A key as a JSON string, for messages.
fn quote(key: &str) -> String {
    show(&Value::String(key.to_owned()))
}

fn err<T>(path: &str, kind: K) -> Result<T> {
    Err(FilterError::new(path, kind))
}

/// Parse a whole filter: `null` or `{}` match everything; anything but an object is an error.
/// Error paths start at `root`.
pub(crate) fn parse_root(resource: Resource, json: &Value, root: &str) -> Result<Node> {
    match json {
        Value::Null => Ok(Node::True),
        Value::Object(obj) => {
            if let Some((path, got)) = find_long(json, root) {
                return err(
                    &path,
                    K::ValueTooLong {
                        max: MAX_VALUE_CHARS,
                        got,
                    },
                );
            }
            let node = Parser { resource }.object(obj, root, 0)?;
            if node.bound_values() > MAX_VALUES {
                return err(root, K::TooLarge { max: MAX_VALUES });
            }
            Ok(node)
        }
        other => err(root, K::NotAnObject { got: show(other) }),
    }
}

struct Parser {
    resource: Resource,
}

impl Parser {
    /// `{ (logical | field)* }`, all entries ANDed.
    fn object(&self, obj: &Map<String, Value>, path: &str, depth: usize) -> Result<Node> {
        if depth > MAX_DEPTH {
            return err(path, K::TooDeep { max: MAX_DEPTH });
        }
        let mut parts = Vec::with_capacity(obj.len());
        for (key, value) in obj {
            let kpath = key_path(path, key);
            let node = match key.as_str() {
                "AND" => Node::and(self.children("AND", value, &kpath, depth)?),
                "OR" => {
                    let children = self.children("OR", value, &kpath, depth)?;
                    // An empty OR adds no condition (as in Honcho v3.0.12), unlike an OR whose
                    // branches all match nothing.
                    if children.is_empty() {
                        Node::True
                    } else {
                        Node::or(children)
                    }
                }
                "NOT" => {
                    // NOT [a, b] = (a) IS NOT TRUE AND (b) IS NOT TRUE.
                    let children = self.children("NOT", value, &kpath, depth)?;
                    Node::and(children.into_iter().map(Node::not))
                }
                _ => match self.resource.field(key) {
                    Some(field) => field_value(field, value, &kpath)?,
                    None => {
                        return err(
                            &kpath,
                            K::UnknownKey {
                                key: quote(key),
                                allowed: self.resource.allowed_keys().join(", "),
                            },
                        );
                    }
                },
            };
            parts.push(node);
        }
        Ok(Node::and(parts))
    }

    /// The operand of AND/OR/NOT: a list of filter objects, each parsed one level deeper.
    fn children(
        &self,
        op: &'static str,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Vec<Node>> {
        let Value::Array(items) = value else {
            return err(
                path,
                K::NotAList {
                    op,
                    got: show(value),
                },
            );
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let ipath = index_path(path, i);
                match item {
                    Value::Object(obj) => self.object(obj, &ipath, depth + 1),
                    other => err(&ipath, K::NotAnObject { got: show(other) }),
                }
            })
            .collect()
    }
}

/// `key: value` on a field.
fn field_value(field: &Field, value: &Value, path: &str) -> Result<Node> {
    if is_wildcard(value) {
        return Ok(Node::True);
    }
    if value.is_null() {
        return Ok(Node::IsNull(field.column));
    }
    if field.kind == Kind::Metadata {
        return metadata(field.column, value, path);
    }
    match value {
        Value::Array(items) => in_list(field, items, path),
        Value::Object(ops) => {
            if ops.is_empty() {
                return err(path, K::EmptyOperators);
            }
            let mut parts = Vec::with_capacity(ops.len());
            for (op, operand) in ops {
                let opath = key_path(path, op);
                let Some(op) = operator(op) else {
                    return err(&opath, K::UnknownOperator { op: quote(op) });
                };
                parts.push(column_operator(field, op, operand, &opath)?);
            }
            Ok(Node::and(parts))
        }
        scalar => compare(field, CmpOp::Eq, scalar, path),
    }
}

/// One operator on a real column.
fn column_operator(field: &Field, op: &'static str, operand: &Value, path: &str) -> Result<Node> {
    if is_wildcard(operand) {
        return Ok(Node::True);
    }
    if operand.is_null() {
        return match op {
            "eq" => Ok(Node::IsNull(field.column)),
            "ne" => Ok(Node::IsNotNull(field.column)),
            _ => err(path, K::NullOperand),
        };
    }
    let unsupported = || {
        err(
            path,
            K::UnsupportedOperator {
                op,
                on: field.kind.describe(),
            },
        )
    };
    match op {
        "gt" | "gte" | "lt" | "lte" => {
            if !matches!(field.kind, Kind::Text | Kind::Int | Kind::DateTime) {
                return unsupported();
            }
            let cmp = match op {
                "gt" => CmpOp::Gt,
                "gte" => CmpOp::Gte,
                "lt" => CmpOp::Lt,
                _ => CmpOp::Lte,
            };
            compare(field, cmp, operand, path)
        }
        "eq" => compare(field, CmpOp::Eq, operand, path),
        "ne" => compare(field, CmpOp::Ne, operand, path),
        "in" => match operand {
            Value::Array(items) => in_list(field, items, path),
            other => err(
                path,
                K::InvalidValue {
                    expected: "a list",
                    got: show(other),
                },
            ),
        },
        // contains / icontains: both case-insensitive substring matches, text columns only.
        _ => {
            if !matches!(field.kind, Kind::Text | Kind::LongText) {
                return unsupported();
            }
            match operand {
                Value::String(s) => {
                    no_nul(s, path)?;
                    Ok(Node::ILike {
                        column: field.column,
                        needle: s.clone(),
                    })
                }
                other => err(
                    path,
                    K::InvalidValue {
                        expected: "a string",
                        got: show(other),
                    },
                ),
            }
        }
    }
}

/// `column <op> operand` with the operand coerced to the column's type.
fn compare(field: &Field, op: CmpOp, operand: &Value, path: &str) -> Result<Node> {
    if field.kind == Kind::Int {
        let n = int(operand, path)?;
        return Ok(int_compare(field.column, op, n));
    }
    Ok(Node::Compare {
        column: field.column,
        op,
        value: scalar(field, operand, path)?,
    })
}

fn int(operand: &Value, path: &str) -> Result<IntOperand> {
    coerce::int_operand(operand).ok_or_else(|| {
        FilterError::new(
            path,
            K::InvalidValue {
                expected: Kind::Int.expected(),
                got: show(operand),
            },
        )
    })
}

/// An exact comparison of an integer column with any number: fractional and out-of-range
/// operands become integer bounds or constants, so only `i64` values are ever bound.
fn int_compare(column: &'static str, op: CmpOp, n: IntOperand) -> Node {
    let cmp = |op, v: i64| Node::Compare {
        column,
        op,
        value: Scalar::Int(v),
    };
    match (op, n) {
        (op, IntOperand::Exact(v)) => cmp(op, v),
        // No integer equals a non-integer or an out-of-range number; every row differs from it
        // (NULL-safe, like IS DISTINCT FROM).
        (CmpOp::Eq, _) => Node::False,
        (CmpOp::Ne, _) => Node::True,
        // For non-integer x: c > x ⇔ c > ⌊x⌋, c ≥ x ⇔ c ≥ ⌈x⌉, c < x ⇔ c < ⌈x⌉, c ≤ x ⇔ c ≤ ⌊x⌋.
        (CmpOp::Gt, IntOperand::Frac(x)) => cmp(CmpOp::Gt, x.floor() as i64),
        (CmpOp::Gte, IntOperand::Frac(x)) => cmp(CmpOp::Gte, x.ceil() as i64),
        (CmpOp::Lt, IntOperand::Frac(x)) => cmp(CmpOp::Lt, x.ceil() as i64),
        (CmpOp::Lte, IntOperand::Frac(x)) => cmp(CmpOp::Lte, x.floor() as i64),
        (CmpOp::Gt | CmpOp::Gte, IntOperand::Above) => Node::False,
        (CmpOp::Lt | CmpOp::Lte, IntOperand::Below) => Node::False,
        (CmpOp::Gt | CmpOp::Gte, IntOperand::Below) => Node::IsNotNull(column),
        (CmpOp::Lt | CmpOp::Lte, IntOperand::Above) => Node::IsNotNull(column),
    }
}

/// A non-integer operand coerced to the column's type (strings, booleans, datetimes, levels).
fn scalar(field: &Field, operand: &Value, path: &str) -> Result<Scalar> {
    let invalid = || {
        err(
            path,
            K::InvalidValue {
                expected: field.kind.expected(),
                got: show(operand),
            },
        )
    };
    match (field.kind, operand) {
        (Kind::Text | Kind::LongText, Value::String(s)) => {
            no_nul(s, path)?;
            Ok(Scalar::Text(s.clone()))
        }
        (Kind::Bool, Value::Bool(b)) => Ok(Scalar::Bool(*b)),
        (Kind::DateTime, Value::String(s)) => match coerce::parse_datetime(s) {
            Some(dt) => Ok(Scalar::DateTime(dt)),
            None => err(path, K::InvalidDatetime { got: show(operand) }),
        },
        (Kind::Level, Value::String(s)) => match coerce::level(s) {
            Some(l) => Ok(Scalar::Text(l.to_value())),
            None => err(path, K::UnknownLevel { got: show(operand) }),
        },
        _ => invalid(),
    }
}

/// `in` on a real column: `"*"` in the list matches everything, `null` elements mean IS NULL,
/// an empty list matches nothing.
fn in_list(field: &Field, items: &[Value], path: &str) -> Result<Node> {
    if items.iter().any(is_wildcard) {
        return Ok(Node::True);
    }
    let mut values = Vec::with_capacity(items.len());
    let mut or_null = false;
    for (i, item) in items.iter().enumerate() {
        let ipath = index_path(path, i);
        if item.is_null() {
            or_null = true;
        } else if field.kind == Kind::Int {
            // Non-integers and out-of-range numbers equal no integer: they drop out.
            if let IntOperand::Exact(v) = int(item, &ipath)? {
                values.push(Scalar::Int(v));
            }
        } else {
            values.push(scalar(field, item, &ipath)?);
        }
    }
    let listed = if values.is_empty() {
        Node::False
    } else {
        Node::In {
            column: field.column,
            values,
        }
    };
    Ok(if or_null {
        Node::or([listed, Node::IsNull(field.column)])
    } else {
        listed
    })
}

/// The entries of an operator dict: operator, operand, path of the operand.
type Operators<'a> = Vec<(&'static str, &'a Value, String)>;

/// Whether an object is an operator dict: some key is an operator. Then every key must be one.
fn operator_dict<'a>(obj: &'a Map<String, Value>, path: &str) -> Result<Option<Operators<'a>>> {
    if !obj.keys().any(|k| operator(k).is_some()) {
        return Ok(None);
    }
    obj.iter()
        .map(|(k, v)| match operator(k) {
            Some(op) => Ok((op, v, key_path(path, k))),
            None => err(&key_path(path, k), K::MixedOperators { key: quote(k) }),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The `metadata` field (docs/filters.md, Metadata).
fn metadata(column: &'static str, value: &Value, path: &str) -> Result<Node> {
    if let Some(at) = find_nul(value, path) {
        return err(&at, K::NulCharacter);
    }
    match value {
        Value::Array(_) => Ok(Node::JsonContains {
            column,
            value: value.clone(),
        }),
        Value::Object(obj) => {
            if let Some(ops) = operator_dict(obj, path)? {
                let parts = ops
                    .into_iter()
                    .map(|(op, operand, opath)| {
                        whole_metadata_operator(column, op, operand, &opath)
                    })
                    .collect::<Result<Vec<_>>>()?;
                return Ok(Node::and(parts));
            }
            let mut parts = Vec::with_capacity(obj.len());
            for (key, v) in obj {
                let kpath = key_path(path, key);
                parts.push(metadata_key(column, key, v, &kpath)?);
            }
            Ok(Node::and(parts))
        }
        other => err(
            path,
            K::InvalidValue {
                expected: "an object of metadata keys, or a list",
                got: show(other),
            },
        ),
    }
}

/// An operator on the whole metadata value: only `contains` with an object or list, `eq: null`,
/// `ne: null`.
fn whole_metadata_operator(
    column: &'static str,
    op: &'static str,
    operand: &Value,
    path: &str,
) -> Result<Node> {
    match (op, operand) {
        (_, v) if is_wildcard(v) => Ok(Node::True),
        ("contains", Value::Object(_) | Value::Array(_)) => Ok(Node::JsonContains {
            column,
            value: operand.clone(),
        }),
        ("eq", Value::Null) => Ok(Node::IsNull(column)),
        ("ne", Value::Null) => Ok(Node::IsNotNull(column)),
        _ => err(path, K::WholeMetadataOperator { op }),
    }
}

/// One key of a metadata filter: a plain value is JSONB containment `{key: value}` (JSON-typed,
/// partial for nested objects); an operator dict tests `metadata ->> key`.
fn metadata_key(column: &'static str, key: &str, value: &Value, path: &str) -> Result<Node> {
    if is_wildcard(value) {
        return Ok(Node::True);
    }
    if let Value::Object(obj) = value
        && let Some(ops) = operator_dict(obj, path)?
    {
        let parts = ops
            .into_iter()
            .map(|(op, operand, opath)| key_operator(column, key, op, operand, &opath))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Node::and(parts));
    }
    Ok(contains_key(column, key, value))
}

fn contains_key(column: &'static str, key: &str, value: &Value) -> Node {
    let mut obj = Map::new();
    obj.insert(key.to_owned(), value.clone());
    Node::JsonContains {
        column,
        value: Value::Object(obj),
    }
}

/// One operator on a metadata key.
fn key_operator(
    column: &'static str,
    key: &str,
    op: &'static str,
    operand: &Value,
    path: &str,
) -> Result<Node> {
    if is_wildcard(operand) {
        return Ok(Node::True);
    }
    let key_test = |test| Node::JsonKey {
        column,
        key: key.to_owned(),
        test,
    };
    match op {
        // The plain value `{key: operand}`.
        "eq" => Ok(contains_key(column, key, operand)),
        "gt" | "gte" | "lt" | "lte" | "ne" => {
            let cmp = match op {
                "gt" => CmpOp::Gt,
                "gte" => CmpOp::Gte,
                "lt" => CmpOp::Lt,
                "lte" => CmpOp::Lte,
                _ => CmpOp::Ne,
            };
            match operand {
                Value::Null if cmp == CmpOp::Ne => Ok(key_test(KeyTest::NotNull)),
                Value::Null => err(path, K::NullOperand),
                Value::Bool(b) => Ok(key_test(KeyTest::Text {
                    op: cmp,
                    value: b.to_string(),
                })),
                Value::Number(_) | Value::String(_) => {
                    Ok(key_test(match coerce::numeric_literal(operand) {
                        Some(value) => KeyTest::Numeric { op: cmp, value },
                        None => KeyTest::Text {
                            op: cmp,
                            value: operand.as_str().unwrap_or_default().to_owned(),
                        },
                    }))
                }
                other => err(
                    path,
                    K::InvalidValue {
                        expected: "a number, a string or a boolean",
                        got: show(other),
                    },
                ),
            }
        }
        // `in` compares JSON values: each element behaves as the plain value `{key: element}`.
        "in" => match operand {
            Value::Array(items) if items.iter().any(is_wildcard) => Ok(Node::True),
            Value::Array(items) => Ok(Node::or(
                items.iter().map(|item| contains_key(column, key, item)),
            )),
            other => err(
                path,
                K::InvalidValue {
                    expected: "a list",
                    got: show(other),
                },
            ),
        },
        _ => match operand {
            Value::String(s) => Ok(key_test(KeyTest::ILike { needle: s.clone() })),
            other => err(
                path,
                K::InvalidValue {
                    expected: "a string",
                    got: show(other),
                },
            ),
        },
    }
}
