//! Which keys each resource accepts in a filter, the column each one names, and its value kind.
//!
//! Everything not listed here (embeddings, internal metadata, configuration, `deleted_at`,
//! `content_tsv`, `source_ids`, ...) is not filterable: an unknown key is an error that lists these.

/// The resource a filter applies to; it decides the allowed keys and their columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    Workspace,
    Peer,
    Session,
    Message,
    Conclusion,
}

/// How a column's values are compared and what operand types it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Short text (ids, names): equality, `in`, ordering, `contains`/`icontains`.
    Text,
    /// Long text (message content): equality, `ne`, `in`, `contains`/`icontains`; no ordering.
    LongText,
    /// Integer column (`bigint` or `integer`): exact numeric comparisons.
    Int,
    /// Boolean column: JSON booleans only; equality, `ne`, `in`.
    Bool,
    /// `timestamptz` column: RFC 3339 or date-only strings.
    DateTime,
    /// Conclusion level: the closed set of `entity::conclusion::Level`; equality, `ne`, `in`.
    Level,
    /// The public JSONB `metadata` column (nested-metadata rules).
    Metadata,
}

impl Kind {
    /// What an operand of this kind must look like, for error messages.
    pub(crate) fn expected(self) -> &'static str {
        match self {
            Kind::Text | Kind::LongText => "a string",
            Kind::Int => "an integer",
            Kind::Bool => "a boolean (true or false)",
            Kind::DateTime => "a datetime string",
            Kind::Level => "a conclusion level",
            Kind::Metadata => "an object",
        }
    }

    /// Name of the kind, for "operator X is not supported on ..." messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Text => "a text field",
            Kind::LongText => "message content",
            Kind::Int => "an integer field",
            Kind::Bool => "a boolean field",
            Kind::DateTime => "a datetime field",
            Kind::Level => "the level field",
            Kind::Metadata => "the whole metadata value",
        }
    }
}

/// One filterable key: its two spellings, the SQL column, and the value kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub camel: &'static str,
    pub snake: &'static str,
    pub column: &'static str,
    pub kind: Kind,
}

const fn f(camel: &'static str, snake: &'static str, column: &'static str, kind: Kind) -> Field {
    Field {
        camel,
        snake,
        column,
        kind,
    }
}

/// The column of `Session.isActive`, which has none: a deleted session is gone at once, so every
/// session a query can see is active. Comparisons on it are lowered against the constant `TRUE`.
pub(crate) const ALWAYS_TRUE: &str = "TRUE";

const ID_NAME: Field = f("id", "id", "name", Kind::Text);
const WORKSPACE_ID: Field = f("workspaceId", "workspace_id", "workspace_name", Kind::Text);
const CREATED_AT: Field = f("createdAt", "created_at", "created_at", Kind::DateTime);
const METADATA: Field = f("metadata", "metadata", "metadata", Kind::Metadata);

static WORKSPACE: &[Field] = &[ID_NAME, CREATED_AT, METADATA];

static PEER: &[Field] = &[ID_NAME, WORKSPACE_ID, CREATED_AT, METADATA];

static SESSION: &[Field] = &[
    ID_NAME,
    WORKSPACE_ID,
    f("isActive", "is_active", ALWAYS_TRUE, Kind::Bool),
    CREATED_AT,
    METADATA,
];

static MESSAGE: &[Field] = &[
    f("id", "id", "public_id", Kind::Text),
    WORKSPACE_ID,
    f("sessionId", "session_id", "session_name", Kind::Text),
    f("peerId", "peer_id", "peer_name", Kind::Text),
    f(
        "seqInSession",
        "seq_in_session",
        "seq_in_session",
        Kind::Int,
    ),
    f("content", "content", "content", Kind::LongText),
    f("tokenCount", "token_count", "token_count", Kind::Int),
    CREATED_AT,
    METADATA,
];

static CONCLUSION: &[Field] = &[
    f("id", "id", "id", Kind::Text),
    WORKSPACE_ID,
    f("observerId", "observer_id", "observer", Kind::Text),
    f("observedId", "observed_id", "observed", Kind::Text),
    f("sessionId", "session_id", "session_name", Kind::Text),
    f("level", "level", "level", Kind::Level),
    f("timesDerived", "times_derived", "times_derived", Kind::Int),
    CREATED_AT,
    METADATA,
];

impl Resource {
    /// All resources, for tests and documentation.
    pub const ALL: [Resource; 5] = [
        Resource::Workspace,
        Resource::Peer,
        Resource::Session,
        Resource::Message,
        Resource::Conclusion,
    ];

    /// The keys this resource accepts, with their columns and kinds (the integration tests
    /// generate filters from them).
    pub fn fields(self) -> &'static [Field] {
        match self {
            Resource::Workspace => WORKSPACE,
            Resource::Peer => PEER,
            Resource::Session => SESSION,
            Resource::Message => MESSAGE,
            Resource::Conclusion => CONCLUSION,
        }
    }

    /// The field a filter key names, in camelCase or snake_case; `None` when not filterable.
    pub(crate) fn field(self, key: &str) -> Option<&'static Field> {
        self.fields()
            .iter()
            .find(|f| f.camel == key || f.snake == key)
    }

    /// The keys this resource accepts (camelCase; snake_case works too), for error messages.
    pub fn allowed_keys(self) -> Vec<&'static str> {
        let mut keys = vec!["AND", "OR", "NOT"];
        keys.extend(self.fields().iter().map(|f| f.camel));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_resolve_to_the_same_column() {
        let m = Resource::Message;
        assert_eq!(m.field("seqInSession"), m.field("seq_in_session"));
        assert_eq!(m.field("peer_id").unwrap().column, "peer_name");
        assert_eq!(m.field("id").unwrap().column, "public_id");
        assert_eq!(Resource::Peer.field("id").unwrap().column, "name");
        let c = Resource::Conclusion;
        assert_eq!(c.field("observer_id").unwrap().column, "observer");
        assert_eq!(c.field("observedId").unwrap().column, "observed");
        assert_eq!(c.field("times_derived").unwrap().kind, Kind::Int);
        assert_eq!(
            Resource::Session.field("is_active").unwrap().kind,
            Kind::Bool
        );
    }

    #[test]
    fn internal_columns_are_never_filterable() {
        for r in Resource::ALL {
            for key in [
                "embedding",
                "internal_metadata",
                "internalMetadata",
                "deleted_at",
                "deletedAt",
                "content_tsv",
                "configuration",
                "source_ids",
                "sourceIds",
                "name",
                "public_id",
                "session_name",
                "observer",
                "SeqInSession",
            ] {
                assert!(r.field(key).is_none(), "{r:?} accepts {key}");
            }
        }
    }

    #[test]
    fn keys_not_on_a_resource_are_rejected() {
        assert!(Resource::Workspace.field("workspaceId").is_none());
        assert!(Resource::Peer.field("isActive").is_none());
        assert!(Resource::Session.field("peerId").is_none());
        assert!(Resource::Conclusion.field("content").is_none());
        assert!(Resource::Message.field("level").is_none());
    }

    #[test]
    fn every_spelling_is_unique_within_a_resource() {
        for r in Resource::ALL {
            let fields = r.fields();
            for (i, a) in fields.iter().enumerate() {
                for b in &fields[i + 1..] {
                    for x in [a.camel, a.snake] {
                        assert!(x != b.camel && x != b.snake, "{r:?}: {x} twice");
                    }
                }
            }
        }
    }
}
