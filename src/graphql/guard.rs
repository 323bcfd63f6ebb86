//! Authorization, in one place: every field that reads or writes scoped data has a [`Rule`] in
//! [`RULES`], and its resolver starts with
//!
//! ```ignore
//! let access = guard::require(ctx, rule!(Workspace.session), On::session(&self.0.name, &id)).await?;
//! access.loader().load_one(key).await?
//! ```
//!
//! `rule!(Type.field)` looks the field up in the table at compile time (a field missing from the
//! table does not build); [`On`] names the resource the call touches. The rules are Honcho's
//! (docs/security.md's key table): W = a key of the workspace, P = the peer's own key, S =
//! the session's key, M = a peer key whose peer is an *active* member of the session (member
//! read), self = the get-or-create routes that compare the key's claims with the ids.
//!
//! **Access by construction.** [`require`] answers with an [`Access`], and an `Access` is the only
//! way to the store and to the request's loader: both sit in the schema's and the request's data
//! [`Sealed`], whose content nothing outside this module can read. A resolver that skips its
//! check has no database to ask, so it does not compile. (Checking at run time instead, with a
//! schema extension around every field, put every field on async-graphql's slower path: 20-30%
//! of the CPU of a request with many fields.)
//!
//! A caller without a valid key (auth on) gets UNAUTHENTICATED; a valid key out of scope gets
//! FORBIDDEN (Honcho answers 401 for both).
//!
//! Which fields need a rule: every root field, and every object field that takes arguments or
//! returns an object, a union or a list of them (Relay connection and edge types excepted: their
//! content is what the field that produced them fetched). The integration test `auth` reads the
//! schema and fails on a field without a rule.

use std::collections::HashSet;
use std::fmt;

use async_graphql::Context;
use async_graphql::registry::{MetaType, Registry};

use super::RequestLoader;
use super::error::{ApiResult, Code};
use super::loaders::MembersKey;
use crate::auth::{Auth, AuthError, Caller, Principal};
use crate::store::peer::PeerReach;
use crate::store::session::SessionReach;
use crate::store::{Lsn, Store};

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
    /// Any key of the workspace (W, or a P or S key whose `w` is it): Honcho's "self" on
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
    field("Workspace",    "peer",                    Peer),
    field("Workspace",    "session",                 SessionRead),
    field("Workspace",    "message",                 MessageRead),
    field("Workspace",    "peers",                   Workspace),
    field("Workspace",    "sessions",                Workspace),
    field("Workspace",    "messages",                Workspace),
    field("Workspace",    "search",                  Workspace),
    field("Workspace",    "conclusion",              Workspace),
    field("Workspace",    "conclusions",             Workspace),
    field("Workspace",    "queryConclusions",        Workspace),
    field("Workspace",    "deriverStatus",           Workspace),
    field("DeriverStatus", "lastError",              Inherit),
    field("Peer",         "sessions",                Peer),
    field("Peer",         "messages",                Peer),
    field("Peer",         "search",                  Peer),
    field("Peer",         "conclusions",             Workspace),
    // The dialectic reads the peer's conclusions: the same keys.
    field("Peer",         "chat",                    Workspace),
    field("Session",      "peers",                   SessionRead),
    field("Session",      "messages",                SessionRead),
    field("Session",      "search",                  SessionRead),
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
    field("MutationRoot", "createConclusions",       Workspace),
    field("MutationRoot", "updateConclusion",        Workspace),
    field("MutationRoot", "deleteConclusion",        Workspace),
    field("MutationRoot", "recordDerivedConclusion", Admin),
    field("MutationRoot", "retryFailedDerivations",  Admin),
    field("MutationRoot", "createKey",               Admin),
    // Subscriptions (checked when the subscription starts and again before each event).
    field("SubscriptionRoot", "messageCreated",    MessageFeed),
    field("SubscriptionRoot", "conclusionCreated", Workspace),
    // Checked once: the answer is written from what the key could read when it asked.
    field("SubscriptionRoot", "peerChat",          Workspace),
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
    panic!("this field has no row in graphql::guard::RULES")
}

/// The [`RULES`] row of a field: `rule!(Workspace.session)`, checked at compile time.
macro_rules! rule {
    ($ty:ident . $field:ident) => {{
        const FIELD: $crate::graphql::guard::Field =
            $crate::graphql::guard::find(stringify!($ty), stringify!($field));
        FIELD
    }};
}
pub(crate) use rule;

/// The resource a call touches, as far as the rules care.
#[derive(Clone, Copy, Debug, Default)]
pub struct On<'a> {
    pub workspace: Option<&'a str>,
    pub peer: Option<&'a str>,
    pub session: Option<&'a str>,
}

impl<'a> On<'a> {
    /// No resource (admin-only fields).
    pub fn nothing() -> Self {
        On::default()
    }

    pub fn workspace(workspace: &'a str) -> Self {
        On {
            workspace: Some(workspace),
            ..On::default()
        }
    }

    pub fn peer(workspace: &'a str, peer: &'a str) -> Self {
        On {
            peer: Some(peer),
            ..On::workspace(workspace)
        }
    }

    pub fn session(workspace: &'a str, session: &'a str) -> Self {
        On {
            session: Some(session),
            ..On::workspace(workspace)
        }
    }

    /// A message of `session` (None when there is no such message).
    pub fn message(workspace: &'a str, session: Option<&'a str>) -> Self {
        On {
            session,
            ..On::workspace(workspace)
        }
    }
}

impl fmt::Display for On<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("workspace", self.workspace),
            ("peer", self.peer),
            ("session", self.session),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v:?}")))
        .collect();
        f.write_str(&parts.join(", "))
    }
}

/// The caller's principal: from the request's [`Caller`] (HTTP header, WebSocket
/// `connection_init`); without one, admin when auth is off and UNAUTHENTICATED when it is on (or
/// when the schema carries no [`Auth`] at all).
pub fn principal(ctx: &Context<'_>) -> ApiResult<Principal> {
    let caller = match ctx.data_opt::<Caller>() {
        Some(caller) => caller.principal(),
        None => match ctx.data_opt::<Auth>() {
            Some(auth) if !auth.enabled() => Ok(Principal::Admin),
            _ => Err(AuthError::Missing),
        },
    };
    caller.map_err(|e| Code::Unauthenticated.error(e.to_string()))
}

/// A value that only this module can open: the store in the schema's data, the loader in each
/// request's data. Anyone may seal (that grants nothing); the way back out is [`require`].
/// Cloning one grants nothing either.
#[derive(Clone)]
pub struct Sealed<T>(T);

impl<T> Sealed<T> {
    pub fn new(value: T) -> Self {
        Sealed(value)
    }
}

/// The request's loader over the sealed store, sealed in turn.
pub fn request_loader(store: &Sealed<Store>) -> Sealed<RequestLoader> {
    Sealed(super::request_loader(&store.0))
}

/// The store for one query whose reads may go to a replica ([`Store::routed`]): one that has
/// replayed `after`, when given. None without a read pool (the schema's store serves as it is).
/// Nothing is opened to the caller: fields still reach it only through [`require`].
pub async fn routed(store: &Sealed<Store>, after: Option<Lsn>) -> Option<Sealed<Store>> {
    store.0.read_pool()?;
    Some(Sealed(store.0.routed(after).await))
}

/// The consistency token to answer a mutation with (None without a read pool, or when the
/// primary did not say: logged, and the client reads as without a token).
pub async fn consistency_token(store: &Sealed<Store>) -> Option<Lsn> {
    match store.0.consistency_token().await {
        Ok(lsn) => lsn,
        Err(err) => {
            tracing::warn!(error = %err, "no consistency token for this mutation");
            None
        }
    }
}

/// What a passed check gives: the store and the request's loader, for the field that asked. The
/// fields are private and [`require`] is the only constructor.
#[derive(Clone, Copy)]
pub struct Access<'a> {
    store: &'a Store,
    loader: &'a RequestLoader,
}

impl<'a> Access<'a> {
    pub fn store(&self) -> &'a Store {
        self.store
    }

    pub fn loader(&self) -> &'a RequestLoader {
        self.loader
    }
}

/// Checks `field`'s rule for the caller on `on`: the [`Access`] it grants, or UNAUTHENTICATED or
/// FORBIDDEN.
pub async fn require<'a>(ctx: &Context<'a>, field: Field, on: On<'_>) -> ApiResult<Access<'a>> {
    debug_assert!(
        ctx.field().name() == field.name,
        "{} asked for the rule of {}.{}",
        ctx.field().name(),
        field.ty,
        field.name
    );
    check(ctx, field, on).await?;
    Ok(Access {
        store: &ctx.data::<Sealed<Store>>()?.0,
        loader: &ctx.data::<Sealed<RequestLoader>>()?.0,
    })
}

async fn check(ctx: &Context<'_>, field: Field, on: On<'_>) -> ApiResult<()> {
    // Inherit fields reach nothing new: no principal is needed, and none is looked up.
    if field.rule == Inherit {
        return Ok(());
    }
    let principal = principal(ctx)?;
    // Looked up only by the rules that ask about membership.
    let loader = ctx.data_opt::<Sealed<RequestLoader>>().map(|l| &l.0);
    decide(loader, &principal, field, on).await
}

/// The one decision, for GraphQL fields and REST routes alike.
async fn decide(
    loader: Option<&RequestLoader>,
    principal: &Principal,
    field: Field,
    on: On<'_>,
) -> ApiResult<()> {
    if allows(loader, principal, field.rule, on).await? {
        Ok(())
    } else {
        Err(Code::Forbidden.error(format!(
            "{principal} may not use {}.{} on {on}",
            field.ty, field.name
        )))
    }
}

/// The REST edge's way to the store: each route names the [`RULES`] row of the GraphQL field it
/// does the work of, so both APIs answer to one table. `store` and `loader` are the schema's and
/// the request's, sealed as for GraphQL; `caller` is the request's key.
pub async fn require_route<'a>(
    store: &'a Sealed<Store>,
    loader: &'a Sealed<RequestLoader>,
    caller: &Caller,
    field: Field,
    on: On<'_>,
) -> ApiResult<Access<'a>> {
    if field.rule != Inherit {
        let principal = caller
            .principal()
            .map_err(|e| Code::Unauthenticated.error(e.to_string()))?;
        decide(Some(&loader.0), &principal, field, on).await?;
    }
    Ok(Access {
        store: &store.0,
        loader: &loader.0,
    })
}

async fn allows(
    loader: Option<&RequestLoader>,
    p: &Principal,
    rule: Rule,
    on: On<'_>,
) -> ApiResult<bool> {
    use Principal as K;
    let w = match (rule, p) {
        (Inherit, _) | (_, K::Admin) => return Ok(true),
        (Admin, _) => return Ok(false),
        (_, K::Workspace(w) | K::Peer { workspace: w, .. } | K::Session { workspace: w, .. }) => w,
    };
    // Scoped keys never leave their workspace.
    if on.workspace != Some(w.as_str()) {
        return Ok(false);
    }
    let is = |mine: &str, theirs: Option<&str>| theirs == Some(mine);
    Ok(match (rule, p) {
        (Inherit, _) | (_, K::Admin | K::Workspace(_)) | (InWorkspace, _) => true,
        (Peer | CreatePeer, K::Peer { peer, .. }) => is(peer, on.peer),
        (Session | SessionRead | CreateSession, K::Session { session, .. }) => {
            is(session, on.session)
        }
        (MessageRead | MessageWrite, K::Session { session, .. }) => {
            on.session.is_none_or(|s| s == session)
        }
        (SessionRead, K::Peer { peer, .. }) => member(loader, w, on.session, peer).await?,
        (MessageRead, K::Peer { peer, .. }) => {
            on.session.is_none() || member(loader, w, on.session, peer).await?
        }
        (CreatePeer, K::Session { .. }) => true,
        (MessageFeed, K::Session { session, .. }) => is(session, on.session),
        (MessageFeed, K::Peer { peer, .. }) => {
            is(peer, on.peer) || member(loader, w, on.session, peer).await?
        }
        // What a peer key may do to a session that exists (only one it is an active member of,
        // and without changing it) is decided by the store inside the write's transaction
        // ([`session_reach`]): a check here would race the write.
        (CreateSession, K::Peer { .. }) => on.session.is_some(),
        (Admin | Workspace | Peer | Session | MessageWrite, _) => false,
    })
}

/// What `getOrCreateSession` may do to a session that exists, for this caller (the rule
/// [`Rule::CreateSession`] let it through).
pub fn session_reach(p: &Principal) -> SessionReach<'_> {
    match p {
        Principal::Peer { peer, .. } => SessionReach::Member(peer),
        _ => SessionReach::Any,
    }
}

/// What `getOrCreatePeer` may do to a peer that exists, for this caller (the rule
/// [`Rule::CreatePeer`] let it through): a session key creates peers but never reads or changes
/// one, as it may not `updatePeer`.
pub fn peer_reach(p: &Principal) -> PeerReach {
    match p {
        Principal::Session { .. } => PeerReach::CreateOnly,
        _ => PeerReach::Any,
    }
}

/// Whether `peer` is an active member of the session (batched and cached per request).
async fn member(
    loader: Option<&RequestLoader>,
    workspace: &str,
    session: Option<&str>,
    peer: &str,
) -> ApiResult<bool> {
    let Some(session) = session else {
        return Ok(false);
    };
    let loader = loader.ok_or_else(|| Code::Internal.error("no request loader"))?;
    let members = loader
        .load_one(MembersKey(workspace.to_owned(), session.to_owned()))
        .await?
        .unwrap_or_default();
    Ok(members.iter().any(|m| m.peer_name == peer))
}

/// Which fields of a schema need a rule (see the module docs).
pub fn fields_needing_rules(registry: &Registry) -> HashSet<(String, String)> {
    let roots: Vec<&str> = [
        Some(registry.query_type.as_str()),
        registry.mutation_type.as_deref(),
        registry.subscription_type.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let composite = |ty: &str| {
        let base = ty.trim_matches(|c| c == '[' || c == ']' || c == '!');
        matches!(
            registry.types.get(base),
            Some(MetaType::Object { .. } | MetaType::Interface { .. } | MetaType::Union { .. })
        )
    };
    let mut out = HashSet::new();
    for (name, ty) in &registry.types {
        let fields = match ty {
            MetaType::Object { fields, .. } | MetaType::Interface { fields, .. } => fields,
            _ => continue,
        };
        if name.starts_with("__") || is_relay_container(fields.keys().map(String::as_str)) {
            continue;
        }
        for (fname, f) in fields {
            if fname.starts_with("__") {
                continue;
            }
            if roots.contains(&name.as_str()) || !f.args.is_empty() || composite(&f.ty) {
                out.insert((name.clone(), fname.clone()));
            }
        }
    }
    out
}

/// A Relay connection (`edges nodes pageInfo totalCount`) or edge (`cursor node`) type: it holds
/// what the field that returned it fetched, and fetches nothing itself.
pub fn is_relay_container<'a>(fields: impl Iterator<Item = &'a str>) -> bool {
    let names: HashSet<&str> = fields.filter(|f| !f.starts_with("__")).collect();
    let connection: HashSet<&str> = ["edges", "nodes", "pageInfo", "totalCount"].into();
    let edge: HashSet<&str> = ["cursor", "node"].into();
    names == edge || (names.contains("edges") && names.is_subset(&connection))
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::{EmptyMutation, EmptySubscription, Object, Schema, Value};

    use crate::graphql::error::ApiResult;

    /// Asks `require` for any rule on any resource, as the principal in the request's data.
    struct Probe;

    #[Object(name = "Probe")]
    impl Probe {
        async fn check(
            &self,
            ctx: &Context<'_>,
            rule: String,
            w: Option<String>,
            p: Option<String>,
            s: Option<String>,
        ) -> ApiResult<bool> {
            let rule = match rule.as_str() {
                "Admin" => Admin,
                "Workspace" => Workspace,
                "InWorkspace" => InWorkspace,
                "Peer" => Peer,
                "Session" => Session,
                "SessionRead" => SessionRead,
                "MessageRead" => MessageRead,
                "MessageWrite" => MessageWrite,
                "CreatePeer" => CreatePeer,
                "CreateSession" => CreateSession,
                "MessageFeed" => MessageFeed,
                other => panic!("unknown rule {other}"),
            };
            let on = On {
                workspace: w.as_deref(),
                peer: p.as_deref(),
                session: s.as_deref(),
            };
            let field = Field {
                ty: "Probe",
                name: "check",
                rule,
            };
            check(ctx, field, on).await?;
            Ok(true)
        }
    }

    async fn decide(auth: Option<Auth>, caller: Option<Caller>, rule: &str, on: &str) -> String {
        let mut schema = Schema::build(Probe, EmptyMutation, EmptySubscription);
        if let Some(a) = auth {
            schema = schema.data(a);
        }
        let [w, p, s] = [0, 1, 2].map(|i| {
            let v = on.split('/').nth(i).unwrap_or("-");
            if v == "-" {
                "null".to_owned()
            } else {
                format!("{v:?}")
            }
        });
        let query = format!("{{ check(rule: {rule:?}, w: {w}, p: {p}, s: {s}) }}");
        let mut req = async_graphql::Request::new(query);
        if let Some(c) = caller {
            req = req.data(c);
        }
        let resp = schema.finish().execute(req).await;
        match resp.errors.first() {
            None => "y".into(),
            Some(e) => match e.extensions.as_ref().and_then(|x| x.get("code")) {
                Some(Value::String(code)) if code == "FORBIDDEN" => "F".into(),
                Some(Value::String(code)) if code == "UNAUTHENTICATED" => "U".into(),
                _ => format!("{e:?}"),
            },
        }
    }

    /// The decisions that need no database (member read is exercised by the integration tests).
    #[tokio::test]
    async fn decisions_without_membership() {
        let on = Some(Auth::with_secret("x").unwrap());
        let key = |p: Principal| Some(Caller::new(Ok(p)));
        let w = || Principal::Workspace("ws".into());
        let alice = || Principal::Peer {
            workspace: "ws".into(),
            peer: "alice".into(),
        };
        let s1 = || Principal::Session {
            workspace: "ws".into(),
            session: "s1".into(),
        };
        // (principal, rule, workspace/peer/session ("-" = none), expected)
        let cases: Vec<(Principal, &str, &str, &str)> = vec![
            (Principal::Admin, "Admin", "", "y"),
            (Principal::Admin, "Session", "other/-/x", "y"),
            (w(), "Admin", "", "F"),
            (w(), "Workspace", "ws", "y"),
            (w(), "Workspace", "other", "F"),
            (w(), "SessionRead", "ws/-/s9", "y"),
            (w(), "MessageFeed", "ws", "y"),
            (w(), "Workspace", "", "F"),
            (alice(), "InWorkspace", "ws", "y"),
            (alice(), "InWorkspace", "other", "F"),
            (alice(), "Workspace", "ws", "F"),
            (alice(), "Peer", "ws/alice", "y"),
            (alice(), "Peer", "ws/bob", "F"),
            (alice(), "Peer", "other/alice", "F"),
            (alice(), "CreatePeer", "ws/alice", "y"),
            (alice(), "CreatePeer", "ws/bob", "F"),
            (alice(), "Session", "ws/-/s1", "F"),
            (alice(), "SessionRead", "ws", "F"),
            (alice(), "MessageRead", "ws", "y"),
            (alice(), "MessageWrite", "ws", "F"),
            (alice(), "MessageFeed", "ws/alice", "y"),
            (alice(), "MessageFeed", "ws/bob", "F"),
            (alice(), "MessageFeed", "ws", "F"),
            (s1(), "Session", "ws/-/s1", "y"),
            (s1(), "Session", "ws/-/s2", "F"),
            (s1(), "Session", "other/-/s1", "F"),
            (s1(), "SessionRead", "ws/-/s1", "y"),
            (s1(), "MessageRead", "ws/-/s1", "y"),
            (s1(), "MessageRead", "ws/-/s2", "F"),
            (s1(), "MessageRead", "ws", "y"),
            (s1(), "MessageWrite", "ws/-/s1", "y"),
            (s1(), "MessageWrite", "ws/-/s2", "F"),
            (s1(), "MessageWrite", "ws", "y"),
            (s1(), "CreateSession", "ws/-/s1", "y"),
            (s1(), "CreateSession", "ws/-/s2", "F"),
            (s1(), "CreatePeer", "ws/zed", "y"),
            (s1(), "Peer", "ws/alice", "F"),
            (s1(), "InWorkspace", "ws", "y"),
            (s1(), "Workspace", "ws", "F"),
            (s1(), "MessageFeed", "ws/-/s1", "y"),
            (s1(), "MessageFeed", "ws/alice/s2", "F"),
            (s1(), "MessageFeed", "ws", "F"),
        ];
        let mut wrong = Vec::new();
        for (p, rule, target, want) in cases {
            let got = decide(on.clone(), key(p.clone()), rule, target).await;
            if got != want {
                wrong.push(format!("{p} {rule} on {target:?}: want {want}, got {got}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // Without a caller: admin when auth is off, UNAUTHENTICATED when on or unknown.
        let expired = Some(Caller::new(Err(AuthError::Expired)));
        assert_eq!(decide(on.clone(), expired, "InWorkspace", "ws").await, "U");
        assert_eq!(decide(on, None, "InWorkspace", "ws").await, "U");
        assert_eq!(decide(Some(Auth::disabled()), None, "Admin", "").await, "y");
        assert_eq!(decide(None, None, "InWorkspace", "ws").await, "U");
    }

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
