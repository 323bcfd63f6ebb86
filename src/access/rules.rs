//! The rule table: every GraphQL field that reads or writes scoped data has a [`Rule`] in
//! [`RULES`], and every REST route and MCP tool names the row of the GraphQL field it does the work
//! of, so the three APIs answer to one table. `rule!(Type.field)` looks a row up at compile time:
//! a field missing from the table does not build.
//!
//! The rules are Honcho v3.0.12's (docs/security.md's key table): W = a key of the workspace, P = the
//! peer's own key, S = the session's key, M = a peer key whose peer is an *active* member of the
//! session (member read), self = the get-or-create routes that compare the key's claims with the
//! ids.

/// What a field asks of the caller's key. An admin key passes every rule; a key of another
/// workspace passes none (but [`Rule::Inherit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Nothing new is reached: the parent object was authorized by the field that produced it.
    Inherit,
    /// A: admin keys only.
    Admin,
    /// W: the workspace's key.
    Workspace,
    /// Any key of the workspace (W, or a P or S key whose `w` is it): Honcho v3.0.12's "self" on
    /// workspaces.
    InWorkspace,
    /// W, or the peer's own key (P).
    Peer,
    /// W, or the session's key (S).
    Session,
    /// W, S, or a peer key whose peer is an active member of the session (M).
    SessionRead,
    /// [`Rule::SessionRead`] on the message's session (the resolver looks the message up first;
    /// an absent message is null or NOT_FOUND for any key of the workspace).
    MessageRead,
    /// [`Rule::Session`] on the message's session (peer keys never write messages).
    MessageWrite,
    /// Self: any key of the workspace, but a peer key only for its own peer.
    CreatePeer,
    /// Self: any key of the workspace, but a session key only for its own session, and a peer
    /// key only for a new session or one its peer is an active member of.
    CreateSession,
    /// A feed of messages filtered by an optional session and an optional author (for
    /// `Subscription.messageCreated`): W; S when the session is its own; P when the author is
    /// its own peer or the session is one its peer is an active member of.
    MessageFeed,
    /// Recall (search, representation, chat): W, or a scope key, whose capability then confines
    /// the recall to its scope's sessions ([`super::Granted::scope`]).
    Recall,
    /// One scope: W, or that scope's own key.
    ScopeRead,
    /// A peer as an object (id, metadata): [`Rule::Peer`], or a scope key when the peer is an
    /// active member of one of its scope's sessions (the way to that peer's recall).
    PeerRead,
}

/// One row of [`RULES`].
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// GraphQL type name, as in the schema.
    pub ty: &'static str,
    /// GraphQL field name, as in the schema (camelCase).
    pub name: &'static str,
    pub rule: Rule,
}

const fn field(ty: &'static str, name: &'static str, rule: Rule) -> Field {
    Field { ty, name, rule }
}

use Rule::*;

/// Every field that needs a rule, and its rule. Adding a field to the schema = adding its line
/// here (the build fails on `rule!` of a field not listed, the `auth` test on a field of the
/// schema not listed).
#[rustfmt::skip]
pub const RULES: &[Field] = &[
    // Queries.
    field("QueryRoot",    "workspace",               InWorkspace),
    field("QueryRoot",    "workspaces",              Admin),
    field("Workspace",    "peer",                    PeerRead),
    field("Workspace",    "session",                 SessionRead),
    field("Workspace",    "message",                 MessageRead),
    field("Workspace",    "peers",                   Workspace),
    field("Workspace",    "sessions",                Workspace),
    field("Workspace",    "messages",                Workspace),
    field("Workspace",    "search",                  Recall),
    field("Workspace",    "conclusion",              Workspace),
    field("Workspace",    "conclusions",             Workspace),
    field("Workspace",    "queryConclusions",        Workspace),
    field("Workspace",    "deriverStatus",           Workspace),
    field("Workspace",    "erasureJob",              Workspace),
    field("DeriverStatus", "lastError",              Inherit),
    // The whole workspace in one file (docs/export.md): what `Workspace.peers`, `messages` and
    // `conclusions` reach together; the HTTP route `/export/workspaces/{id}` answers to it too.
    field("Workspace",    "export",                  Workspace),
    field("DeriverStatus", "dreams",                 Inherit),
    field("DreamStatus",  "lastError",               Inherit),
    // Webhooks: admin and workspace keys only (Honcho v3.0.12's webhook routes).
    field("Workspace",    "webhooks",                Workspace),
    field("Workspace",    "webhookDeliveries",       Workspace),
    field("Peer",         "sessions",                Peer),
    field("Peer",         "messages",                Peer),
    field("Peer",         "search",                  Peer),
    field("Peer",         "conclusions",             Workspace),
    // The dialectic reads the peer's conclusions: the same keys.
    field("Peer",         "chat",                    Recall),
    field("Peer",         "representation",          Recall),
    // A card lives in its observer's row and is bound to no session: no scope key reads one.
    field("Peer",         "card",                    Peer),
    // Scopes (docs/scopes.md): managed by workspace keys; a scope key reads its own.
    field("Workspace",    "scopes",                  Workspace),
    field("Workspace",    "scope",                   ScopeRead),
    field("Scope",        "sessions",                ScopeRead),
    field("Scope",        "status",                  ScopeRead),
    field("Session",      "peers",                   SessionRead),
    field("Session",      "messages",                SessionRead),
    field("Session",      "search",                  SessionRead),
    field("Session",      "summaries",               SessionRead),
    field("Session",      "context",                 SessionRead),
    field("SessionContext", "summary",               Inherit),
    field("SessionContext", "messages",              Inherit),
    field("SessionSummaries", "short",               Inherit),
    field("SessionSummaries", "long",                Inherit),
    field("SessionPeer",  "peer",                    Inherit),
    field("Message",      "peer",                    Inherit),
    field("Message",      "session",                 Inherit),
    field("Message",      "context",                 SessionRead),
    field("MessageHits",  "results",                 Inherit),
    field("SnippetHits",  "results",                 Inherit),
    field("SnippetHits",  "snippets",                Inherit),
    field("MessageSnippet", "matched",               Inherit),
    field("MessageSnippet", "context",               SessionRead),
    field("Conclusion",   "observer",                Inherit),
    field("Conclusion",   "observed",                Inherit),
    field("Conclusion",   "session",                 Inherit),
    field("Conclusion",   "sources",                 Inherit),
    field("Conclusion",   "derived",                 Inherit),
    field("Conclusion",   "sourceMessages",          Inherit),
    field("Conclusion",   "reasoningTree",           Inherit),
    field("ReasoningTree", "nodes",                  Inherit),
    field("ReasoningTree", "edges",                  Inherit),
    // Mutations.
    field("MutationRoot", "getOrCreateWorkspace",    InWorkspace),
    field("MutationRoot", "updateWorkspace",         Workspace),
    field("MutationRoot", "deleteWorkspace",         Workspace),
    field("MutationRoot", "getOrCreatePeer",         CreatePeer),
    field("MutationRoot", "updatePeer",              Peer),
    field("MutationRoot", "getOrCreateSession",      CreateSession),
    field("MutationRoot", "updateSession",           Session),
    field("MutationRoot", "deleteSession",           Session),
    field("MutationRoot", "cloneSession",            Session),
    field("MutationRoot", "addPeersToSession",       Session),
    field("MutationRoot", "removePeersFromSession",  Session),
    field("MutationRoot", "setSessionPeerConfig",    Session),
    field("MutationRoot", "createMessages",          Session),
    field("MutationRoot", "updateMessage",           MessageWrite),
    // Erasure (docs/erasure.md): never a peer's or a session's key, whose reach is one
    // conversation, while an erasure reaches the whole workspace's memory.
    field("MutationRoot", "deleteMessage",           Workspace),
    field("MutationRoot", "erasePeer",               Workspace),
    field("MutationRoot", "createConclusions",       Workspace),
    field("MutationRoot", "updateConclusion",        Workspace),
    field("MutationRoot", "deleteConclusion",        Workspace),
    field("MutationRoot", "recordDerivedConclusion", Admin),
    field("MutationRoot", "retryFailedDerivations",  Admin),
    field("MutationRoot", "createKey",               Admin),
    field("MutationRoot", "getOrCreateScope",        Workspace),
    field("MutationRoot", "addSessionsToScope",      Workspace),
    field("MutationRoot", "removeSessionFromScope",  Workspace),
    field("MutationRoot", "createWebhook",           Workspace),
    field("MutationRoot", "deleteWebhook",           Workspace),
    field("MutationRoot", "testWebhook",             Workspace),
    // Dreams (docs/dreams.md): Honcho v3.0.12's schedule_dream takes the workspace's key.
    field("MutationRoot", "scheduleDream",           Workspace),
    // Subscriptions (checked when the subscription starts and again before each event).
    field("SubscriptionRoot", "messageCreated",    MessageFeed),
    field("SubscriptionRoot", "conclusionCreated", Workspace),
    // Checked once: the answer is written from what the key could read when it asked.
    field("SubscriptionRoot", "peerChat",          Recall),
];

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The row of `ty.name`; in a const context (what [`rule!`] expands to) a missing row fails the
/// build.
pub const fn find(ty: &str, name: &str) -> Field {
    let mut i = 0;
    while i < RULES.len() {
        if str_eq(RULES[i].ty, ty) && str_eq(RULES[i].name, name) {
            return RULES[i];
        }
        i += 1;
    }
    panic!("this field has no row in access::RULES")
}

/// The [`RULES`] row of a field: `rule!(Workspace.session)`, checked at compile time.
macro_rules! rule {
    ($ty:ident . $field:ident) => {{
        const FIELD: $crate::access::Field =
            $crate::access::find(stringify!($ty), stringify!($field));
        FIELD
    }};
}
pub(crate) use rule;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique_and_found() {
        for (i, a) in RULES.iter().enumerate() {
            for b in &RULES[i + 1..] {
                assert!(
                    !(a.ty == b.ty && a.name == b.name),
                    "{}.{} twice",
                    a.ty,
                    a.name
                );
            }
        }
        assert_eq!(rule!(Workspace.session).rule, Rule::SessionRead);
        assert_eq!(rule!(MutationRoot.createKey).rule, Rule::Admin);
    }
}
