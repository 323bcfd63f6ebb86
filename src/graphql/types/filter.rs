//! Typed filters: `where:` beside `filters: JSON` on every list and search.
//!
//! A `where` is written with the schema's input types (so GraphiQL and typed clients complete and
//! validate it) and turned into its JSON twin, a filter of the JSON DSL with the same keys, the
//! same operators and the same nesting. From there both arguments share one code path
//! (`store::filter`: parse, limits, tree, SQL), so they cannot drift apart. A null `eq` or `ne`
//! keeps its DSL meaning (IS NULL, IS NOT NULL), which is why those two are `MaybeUndefined`.

use async_graphql::{ID, InputObject, InputType, Json, MaybeUndefined};
use serde_json::{Map, Value};

use super::conclusion::ConclusionLevel;
use crate::graphql::error::{ApiResult, bad_input};
use crate::graphql::scalars::DateTime;
use crate::store::StoreError;
use crate::store::filter::{self, Resource};

/// A typed filter input and its JSON twin in the filter DSL.
pub trait Twin {
    fn twin(&self) -> Value;
}

/// A `*Where` input: the resource its keys belong to.
pub trait WhereInput: Twin {
    const RESOURCE: Resource;
}

/// The filter a list or search runs with, as the JSON the store parses: `filters` as given, or the
/// twin of `where`. Giving both is an error. A `where` is parsed here once so that its errors name
/// `where` (the store parses the twin again; a filter is at most a few thousand values).
pub fn filter_json<W: WhereInput>(
    filters: Option<Json<Value>>,
    where_: Option<W>,
) -> ApiResult<Value> {
    match (filters, where_) {
        (Some(_), Some(_)) => Err(bad_input(
            "give `filters` or `where`, not both (they are two spellings of one filter)",
        )),
        (Some(Json(json)), None) => Ok(json),
        (None, Some(w)) => {
            let twin = w.twin();
            filter::parse_at(W::RESOURCE, &twin, "where").map_err(StoreError::from)?;
            Ok(twin)
        }
        (None, None) => Ok(Value::Null),
    }
}

/// An operand as the JSON the DSL expects for it.
pub trait Operand {
    fn json(&self) -> Value;
}

impl Operand for String {
    fn json(&self) -> Value {
        Value::String(self.clone())
    }
}

impl Operand for ID {
    fn json(&self) -> Value {
        Value::String(self.0.clone())
    }
}

impl Operand for i64 {
    fn json(&self) -> Value {
        Value::from(*self)
    }
}

impl Operand for bool {
    fn json(&self) -> Value {
        Value::Bool(*self)
    }
}

impl Operand for DateTime {
    fn json(&self) -> Value {
        Value::String(self.0.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
    }
}

impl Operand for ConclusionLevel {
    fn json(&self) -> Value {
        use sea_orm::ActiveEnum;
        let level: crate::store::conclusion::Level = (*self).into();
        Value::String(level.to_value())
    }
}

impl Operand for Json<Value> {
    fn json(&self) -> Value {
        self.0.clone()
    }
}

/// An operator object of the DSL, built from the operators that were given.
#[derive(Default)]
struct Ops(Map<String, Value>);

impl Ops {
    /// `eq`/`ne`: absent adds nothing, null is the DSL's null operand.
    fn nullable<T: Operand>(mut self, op: &str, v: &MaybeUndefined<T>) -> Self {
        match v {
            MaybeUndefined::Undefined => {}
            MaybeUndefined::Null => {
                self.0.insert(op.to_owned(), Value::Null);
            }
            MaybeUndefined::Value(v) => {
                self.0.insert(op.to_owned(), v.json());
            }
        }
        self
    }

    fn some<T: Operand>(mut self, op: &str, v: &Option<T>) -> Self {
        if let Some(v) = v {
            self.0.insert(op.to_owned(), v.json());
        }
        self
    }

    fn list<T: Operand>(mut self, op: &str, v: &Option<Vec<T>>) -> Self {
        if let Some(items) = v {
            self.0
                .insert(op.to_owned(), items.iter().map(Operand::json).collect());
        }
        self
    }

    /// `eq`, `ne` and `in`.
    fn equality<T: Operand>(
        self,
        eq: &MaybeUndefined<T>,
        ne: &MaybeUndefined<T>,
        in_: &Option<Vec<T>>,
    ) -> Self {
        self.nullable("eq", eq).nullable("ne", ne).list("in", in_)
    }

    /// `gt`, `gte`, `lt` and `lte`.
    fn range<T: Operand>(
        self,
        gt: &Option<T>,
        gte: &Option<T>,
        lt: &Option<T>,
        lte: &Option<T>,
    ) -> Self {
        self.some("gt", gt)
            .some("gte", gte)
            .some("lt", lt)
            .some("lte", lte)
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// Conditions on an id or a name; all the given ones must hold. `"*"` means any value, as in
/// `filters`.
#[derive(InputObject, Default)]
pub struct IdFilter {
    /// Equal to this; null: the field is null.
    pub eq: MaybeUndefined<ID>,
    /// Not equal to this (a null field counts as different); null: the field is not null.
    pub ne: MaybeUndefined<ID>,
    /// Equal to one of these (an empty list matches nothing).
    #[graphql(name = "in")]
    pub in_: Option<Vec<ID>>,
    /// Sorts after this (byte order).
    pub gt: Option<String>,
    pub gte: Option<String>,
    pub lt: Option<String>,
    pub lte: Option<String>,
    /// Contains this text, ignoring case (`%` and `_` are plain characters).
    pub contains: Option<String>,
    /// The same as `contains`.
    pub icontains: Option<String>,
}

impl Twin for IdFilter {
    fn twin(&self) -> Value {
        Ops::default()
            .equality(&self.eq, &self.ne, &self.in_)
            .range(&self.gt, &self.gte, &self.lt, &self.lte)
            .some("contains", &self.contains)
            .some("icontains", &self.icontains)
            .done()
    }
}

/// Conditions on long text (a message's content); all the given ones must hold.
#[derive(InputObject, Default)]
pub struct StringFilter {
    /// Equal to this; null: the field is null.
    pub eq: MaybeUndefined<String>,
    /// Not equal to this; null: the field is not null.
    pub ne: MaybeUndefined<String>,
    /// Equal to one of these.
    #[graphql(name = "in")]
    pub in_: Option<Vec<String>>,
    /// Contains this text, ignoring case (`%` and `_` are plain characters).
    pub contains: Option<String>,
    /// The same as `contains`.
    pub icontains: Option<String>,
}

impl Twin for StringFilter {
    fn twin(&self) -> Value {
        Ops::default()
            .equality(&self.eq, &self.ne, &self.in_)
            .some("contains", &self.contains)
            .some("icontains", &self.icontains)
            .done()
    }
}

/// Conditions on an integer (`IntFilter`) or a date and time (`DateTimeFilter`); all the given
/// ones must hold.
#[derive(InputObject)]
#[graphql(
    concrete(name = "IntFilter", params(i64)),
    concrete(name = "DateTimeFilter", params(DateTime))
)]
pub struct OrderedFilter<T: InputType + Operand> {
    pub eq: MaybeUndefined<T>,
    /// Not equal to this; null: the field is not null.
    pub ne: MaybeUndefined<T>,
    #[graphql(name = "in")]
    pub in_: Option<Vec<T>>,
    pub gt: Option<T>,
    pub gte: Option<T>,
    pub lt: Option<T>,
    pub lte: Option<T>,
}

// Derived, Default would ask `T: Default`.
impl<T: InputType + Operand> Default for OrderedFilter<T> {
    fn default() -> Self {
        OrderedFilter {
            eq: MaybeUndefined::Undefined,
            ne: MaybeUndefined::Undefined,
            in_: None,
            gt: None,
            gte: None,
            lt: None,
            lte: None,
        }
    }
}

pub type IntFilter = OrderedFilter<i64>;
pub type DateTimeFilter = OrderedFilter<DateTime>;

impl<T: InputType + Operand> Twin for OrderedFilter<T> {
    fn twin(&self) -> Value {
        Ops::default()
            .equality(&self.eq, &self.ne, &self.in_)
            .range(&self.gt, &self.gte, &self.lt, &self.lte)
            .done()
    }
}

/// Conditions on a boolean.
#[derive(InputObject, Default)]
pub struct BooleanFilter {
    pub eq: MaybeUndefined<bool>,
    pub ne: MaybeUndefined<bool>,
}

impl Twin for BooleanFilter {
    fn twin(&self) -> Value {
        Ops::default()
            .nullable("eq", &self.eq)
            .nullable("ne", &self.ne)
            .done()
    }
}

/// Conditions on a conclusion's level.
#[derive(InputObject, Default)]
pub struct ConclusionLevelFilter {
    pub eq: MaybeUndefined<ConclusionLevel>,
    pub ne: MaybeUndefined<ConclusionLevel>,
    #[graphql(name = "in")]
    pub in_: Option<Vec<ConclusionLevel>>,
}

impl Twin for ConclusionLevelFilter {
    fn twin(&self) -> Value {
        Ops::default()
            .equality(&self.eq, &self.ne, &self.in_)
            .done()
    }
}

/// Conditions on a JSON object (`metadata`), on the whole value or, with `key`, on one
/// top-level key; all the given ones must hold. To test several keys, AND several filters.
#[derive(InputObject, Default)]
pub struct JsonFilter {
    /// The top-level key the other conditions test. Without it only `contains` (an object or a
    /// list), `eq: null` and `ne: null` apply, to the whole value.
    pub key: Option<String>,
    /// With `key`: the key's value contains this JSON (`@>`: equal for scalars, `5` equals
    /// `5.0` but not `"5"`; partial for objects). Without: null means the value is null.
    pub eq: MaybeUndefined<Json<Value>>,
    /// With `key`: the key's text differs (a missing key does not match); null: the key is
    /// present and not null. Without: null means the value is not null.
    pub ne: MaybeUndefined<Json<Value>>,
    /// The key's value is one of these JSON values (each compared as `eq` would).
    #[graphql(name = "in")]
    pub in_: Option<Vec<Json<Value>>>,
    /// A number (or a string shaped like one) compares numerically, stored values that are not
    /// numbers never match; another string compares as text.
    pub gt: Option<Json<Value>>,
    pub gte: Option<Json<Value>>,
    pub lt: Option<Json<Value>>,
    pub lte: Option<Json<Value>>,
    /// With `key`: the key's text contains this string, ignoring case. Without: the value
    /// contains this object or list (`@>`).
    pub contains: Option<Json<Value>>,
    /// The key's text contains this string, ignoring case.
    pub icontains: Option<String>,
}

impl Twin for JsonFilter {
    fn twin(&self) -> Value {
        let ops = Ops::default()
            .equality(&self.eq, &self.ne, &self.in_)
            .range(&self.gt, &self.gte, &self.lt, &self.lte)
            .some("contains", &self.contains)
            .some("icontains", &self.icontains)
            .done();
        match &self.key {
            Some(key) => Value::Object(Map::from_iter([(key.clone(), ops)])),
            None => ops,
        }
    }
}

fn logical<W: Twin>(out: &mut Map<String, Value>, key: &str, items: &Option<Vec<W>>) {
    if let Some(items) = items {
        out.insert(key.to_owned(), items.iter().map(Twin::twin).collect());
    }
}

/// A `*Where` input for one resource: AND/OR/NOT of itself and one typed filter per filterable
/// key (the keys of `store::filter`'s table for that resource; a test keeps them in step).
macro_rules! where_input {
    (
        $(#[doc = $doc:literal])*
        $name:ident for $resource:ident {
            $( $(#[doc = $fdoc:literal])* $field:ident $key:literal : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(InputObject, Default)]
        pub struct $name {
            /// Every filter of the list holds.
            #[graphql(name = "AND")]
            pub and: Option<Vec<$name>>,
            /// Some filter of the list holds (an empty list adds no condition).
            #[graphql(name = "OR")]
            pub or: Option<Vec<$name>>,
            /// No filter of the list holds (NULL-safe: a row whose field is null does not match
            /// a test on it, so NOT keeps it).
            #[graphql(name = "NOT")]
            pub not: Option<Vec<$name>>,
            $( $(#[doc = $fdoc])* pub $field: Option<$ty>, )*
        }

        impl Twin for $name {
            fn twin(&self) -> Value {
                let mut out = Map::new();
                logical(&mut out, "AND", &self.and);
                logical(&mut out, "OR", &self.or);
                logical(&mut out, "NOT", &self.not);
                $(
                    if let Some(f) = &self.$field {
                        out.insert($key.to_owned(), f.twin());
                    }
                )*
                Value::Object(out)
            }
        }

        impl WhereInput for $name {
            const RESOURCE: Resource = Resource::$resource;
        }
    };
}

where_input! {
    /// A typed filter on workspaces; its fields are ANDed. The same filter as `filters: JSON`.
    WorkspaceWhere for Workspace {
        id "id": IdFilter,
        created_at "createdAt": DateTimeFilter,
        metadata "metadata": JsonFilter,
    }
}

where_input! {
    /// A typed filter on peers; its fields are ANDed. The same filter as `filters: JSON`.
    PeerWhere for Peer {
        id "id": IdFilter,
        workspace_id "workspaceId": IdFilter,
        created_at "createdAt": DateTimeFilter,
        metadata "metadata": JsonFilter,
    }
}

where_input! {
    /// A typed filter on sessions; its fields are ANDed. The same filter as `filters: JSON`.
    SessionWhere for Session {
        id "id": IdFilter,
        workspace_id "workspaceId": IdFilter,
        is_active "isActive": BooleanFilter,
        created_at "createdAt": DateTimeFilter,
        metadata "metadata": JsonFilter,
    }
}

where_input! {
    /// A typed filter on messages; its fields are ANDed. The same filter as `filters: JSON`.
    MessageWhere for Message {
        id "id": IdFilter,
        workspace_id "workspaceId": IdFilter,
        session_id "sessionId": IdFilter,
        peer_id "peerId": IdFilter,
        seq_in_session "seqInSession": IntFilter,
        content "content": StringFilter,
        token_count "tokenCount": IntFilter,
        created_at "createdAt": DateTimeFilter,
        metadata "metadata": JsonFilter,
    }
}

where_input! {
    /// A typed filter on conclusions; its fields are ANDed. The same filter as `filters: JSON`.
    ConclusionWhere for Conclusion {
        id "id": IdFilter,
        workspace_id "workspaceId": IdFilter,
        observer_id "observerId": IdFilter,
        observed_id "observedId": IdFilter,
        session_id "sessionId": IdFilter,
        level "level": ConclusionLevelFilter,
        times_derived "timesDerived": IntFilter,
        created_at "createdAt": DateTimeFilter,
        metadata "metadata": JsonFilter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each `*Where` input names exactly the keys `filters` accepts for its resource.
    #[test]
    fn where_inputs_have_the_keys_of_their_resource() {
        let sdl = crate::graphql::sdl();
        for (name, resource) in [
            ("WorkspaceWhere", Resource::Workspace),
            ("PeerWhere", Resource::Peer),
            ("SessionWhere", Resource::Session),
            ("MessageWhere", Resource::Message),
            ("ConclusionWhere", Resource::Conclusion),
        ] {
            let start = sdl
                .find(&format!("input {name} {{"))
                .unwrap_or_else(|| panic!("{name} missing from the schema"));
            let body = &sdl[start..start + sdl[start..].find("\n}").unwrap()];
            // Field lines are `name: Type`; description lines are prose.
            let fields: Vec<&str> = body
                .lines()
                .skip(1)
                .filter_map(|l| l.trim().split_once(": "))
                .map(|(name, _)| name)
                .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric()))
                .collect();
            let mut want = resource.allowed_keys();
            let mut got = fields.clone();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn the_twin_keeps_keys_operators_nesting_and_nulls() {
        let w = MessageWhere {
            or: Some(vec![
                MessageWhere {
                    peer_id: Some(IdFilter {
                        eq: MaybeUndefined::Value(ID("alice".into())),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                MessageWhere {
                    session_id: Some(IdFilter {
                        eq: MaybeUndefined::Null,
                        ..Default::default()
                    }),
                    seq_in_session: Some(IntFilter {
                        gte: Some(2),
                        lt: Some(9),
                        ..Default::default()
                    }),
                    metadata: Some(JsonFilter {
                        key: Some("topic".into()),
                        in_: Some(vec![Json(json!("travel")), Json(json!(5))]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            content: Some(StringFilter {
                ne: MaybeUndefined::Null,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            w.twin(),
            json!({
                "OR": [
                    {"peerId": {"eq": "alice"}},
                    {"sessionId": {"eq": null}, "seqInSession": {"gte": 2, "lt": 9},
                     "metadata": {"topic": {"in": ["travel", 5]}}}
                ],
                "content": {"ne": null}
            })
        );
    }

    #[test]
    fn levels_and_datetimes_are_written_as_the_dsl_reads_them() {
        let w = ConclusionWhere {
            level: Some(ConclusionLevelFilter {
                in_: Some(vec![ConclusionLevel::Deductive]),
                ..Default::default()
            }),
            created_at: Some(DateTimeFilter {
                gte: Some(DateTime("2026-01-01T10:00:00+02:00".parse().unwrap())),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            w.twin(),
            json!({"level": {"in": ["deductive"]}, "createdAt": {"gte": "2026-01-01T08:00:00Z"}})
        );
    }

    #[test]
    fn giving_both_arguments_is_refused() {
        let err = filter_json(Some(Json(json!({}))), Some(MessageWhere::default())).unwrap_err();
        assert!(err.0.message.contains("not both"), "{}", err.0.message);
        assert_eq!(
            filter_json::<MessageWhere>(None, None).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn where_errors_name_where() {
        let w = MessageWhere {
            and: Some(vec![MessageWhere {
                peer_id: Some(IdFilter {
                    contains: Some("x".repeat(1001)),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let err = filter_json(None, Some(w)).unwrap_err();
        assert!(
            err.0.message.starts_with("where.AND[0].peerId.contains:"),
            "{}",
            err.0.message
        );
    }
}
