//! Who may do what, for every API: GraphQL, REST and MCP are siblings over this layer, and none
//! of them owns it.
//!
//! - [`auth`]: API keys (Honcho's JWTs) → a [`Caller`] and its [`Principal`];
//! - [`RULES`]: the one rule table, a row per GraphQL field; a REST route or an MCP tool names
//!   the row of the field it does the work of (`rule!(Type.field)`, checked at compile time);
//! - [`check`]: the one decision, which answers with a [`Granted`];
//! - [`Sealed`]: the store (and GraphQL's request loader) as the APIs hold them, which only a
//!   [`Granted`] opens. A handler that skips its check has no database to ask, so it does not
//!   compile. (Checking at run time instead, with a GraphQL schema extension around every field,
//!   put every field on async-graphql's slower path: 20-30% of the CPU of a request with many
//!   fields.)
//! - [`Code`] and [`Failure`]: the error codes, and the one mapping of store errors to them.
//!
//! A caller without a valid key (auth on) is [`AccessError::Unauthenticated`]; a valid key out of
//! scope is [`AccessError::Forbidden`] (Honcho v3.0.12 answers 401 for both).

pub mod auth;
mod code;
mod gate;
mod on;
mod rules;
mod services;

use std::future::Future;

pub use auth::{Auth, AuthError, Caller, Principal};
pub use code::{Code, Failure};
pub use gate::{Access, Gate};
pub use on::On;
pub(crate) use rules::rule;
pub use rules::{Field, RULES, Rule, find};
pub use services::Services;

use crate::store::peer::PeerReach;
use crate::store::search_keys::SearchKeys;
use crate::store::session::SessionReach;
use crate::store::{Lsn, Store};

/// Why a check refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AccessError {
    /// No key, or a key that is invalid or expired (auth on).
    #[error("{0}")]
    Unauthenticated(AuthError),
    /// A valid key out of the rule's reach.
    #[error("{principal} may not use {ty}.{name} on {on}")]
    Forbidden {
        principal: String,
        ty: &'static str,
        name: &'static str,
        on: String,
    },
    /// A scope key asked for recall inside another scope (or none could widen it).
    #[error("a key limited to scope {key:?} may not recall inside scope {asked:?}")]
    OutOfScope { key: String, asked: String },
    /// Deciding needed a lookup (a session's members), and it failed.
    #[error("{}", .0.message)]
    Lookup(Failure),
}

impl From<AccessError> for Failure {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::Unauthenticated(_) => Code::Unauthenticated.failure(e.to_string()),
            AccessError::Forbidden { .. } | AccessError::OutOfScope { .. } => {
                Code::Forbidden.failure(e.to_string())
            }
            AccessError::Lookup(f) => f,
        }
    }
}

/// `Authorization` (None when absent) → the caller, with `auth`'s settings; without any (a
/// schema built without [`Auth`]), nobody is authenticated.
pub fn authenticate(auth: Option<&Auth>, authorization: Option<&str>) -> Caller {
    match auth {
        Some(auth) => auth.authenticate(authorization),
        None => Caller::new(Err(AuthError::Missing)),
    }
}

/// Whether a peer is an active member of a session: what the member-read rules ask. GraphQL
/// answers from its request loader (batched and cached for the request); REST and MCP from the
/// store, one statement.
pub trait Members: Send + Sync {
    fn is_member(
        &self,
        workspace: &str,
        session: &str,
        peer: &str,
    ) -> impl Future<Output = Result<bool, Failure>> + Send;

    /// The store a scope key's reads ask whether a session, or a peer, is in its scope: one
    /// statement each, which no API batches.
    fn store(&self) -> &Store;
}

impl Members for Store {
    async fn is_member(&self, workspace: &str, session: &str, peer: &str) -> Result<bool, Failure> {
        let rows = self
            .members_by_sessions(&[(workspace.to_owned(), session.to_owned())])
            .await?;
        Ok(rows.iter().any(|m| m.peer_name == peer))
    }

    fn store(&self) -> &Store {
        self
    }
}

/// What a passed check gives: the right to open a [`Sealed`] value, and the bound of what recall
/// under it may see (a scope key's scope). Only [`check`] makes one.
pub struct Granted {
    scope: Option<String>,
}

impl Granted {
    /// The scope the caller's key is limited to: recall under this grant must stay inside it.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }
}

/// The scope a recall runs in: the one `asked` for, or the key's own. A key limited to a scope
/// reaches no other, nor the whole workspace: it asking for another is FORBIDDEN, and asking for
/// none is its own.
pub fn recall_scope(key: Option<&str>, asked: Option<&str>) -> Result<Option<String>, AccessError> {
    match (key, asked) {
        (None, asked) => Ok(asked.map(str::to_owned)),
        (Some(key), None) => Ok(Some(key.to_owned())),
        (Some(key), Some(asked)) if key == asked => Ok(Some(key.to_owned())),
        (Some(key), Some(asked)) => Err(AccessError::OutOfScope {
            key: key.to_owned(),
            asked: asked.to_owned(),
        }),
    }
}

/// A value only a [`Granted`] opens: the store in GraphQL's schema data and REST's state, the
/// loader in each GraphQL request's data. Anyone may seal (that grants nothing), and cloning one
/// grants nothing either.
#[derive(Clone)]
pub struct Sealed<T>(T);

impl<T> Sealed<T> {
    pub fn new(value: T) -> Self {
        Sealed(value)
    }

    pub fn open(&self, _: &Granted) -> &T {
        &self.0
    }

    /// A value made from this one, sealed in turn (a request's loader over the store).
    pub fn map<U>(&self, f: impl FnOnce(&T) -> U) -> Sealed<U> {
        Sealed(f(&self.0))
    }
}

impl Sealed<Store> {
    /// The store for one query whose reads may go to a replica ([`Store::routed`]): one that has
    /// replayed `after`, when given. None without a read pool (this store serves as it is).
    pub async fn routed(&self, after: Option<Lsn>) -> Option<Sealed<Store>> {
        self.0.read_pool()?;
        Some(Sealed(self.0.routed(after).await))
    }

    /// The consistency token to answer a mutation with (None without a read pool, or when the
    /// primary did not say: logged, and the client reads as without a token).
    pub async fn consistency_token(&self) -> Option<Lsn> {
        match self.0.consistency_token().await {
            Ok(lsn) => lsn,
            Err(err) => {
                tracing::warn!(error = %err, "no consistency token for this mutation");
                None
            }
        }
    }
}

/// The one decision, for GraphQL fields, REST routes and MCP tools alike: `field`'s rule for the
/// caller on `on`. The principal is asked for only when the rule needs one ([`Rule::Inherit`]
/// reaches nothing new); `members` only when the rule asks about membership.
pub async fn check<M: Members>(
    members: Option<&Sealed<M>>,
    principal: impl FnOnce() -> Result<Principal, AuthError>,
    field: Field,
    on: On<'_>,
) -> Result<Granted, AccessError> {
    if field.rule == Rule::Inherit {
        return Ok(Granted { scope: None });
    }
    let principal = principal().map_err(AccessError::Unauthenticated)?;
    let members = members.map(|m| &m.0);
    if allows(members, &principal, field.rule, on).await? {
        Ok(Granted {
            scope: principal.scope().map(str::to_owned),
        })
    } else {
        Err(AccessError::Forbidden {
            principal: principal.to_string(),
            ty: field.ty,
            name: field.name,
            on: on.to_string(),
        })
    }
}

async fn allows<M: Members>(
    members: Option<&M>,
    p: &Principal,
    rule: Rule,
    on: On<'_>,
) -> Result<bool, AccessError> {
    use Principal as K;
    use Rule::*;
    let w = match (rule, p) {
        (Inherit, _) | (_, K::Admin) => return Ok(true),
        (Admin, _) => return Ok(false),
        (
            _,
            K::Workspace(w)
            | K::Peer { workspace: w, .. }
            | K::Session { workspace: w, .. }
            | K::Scope { workspace: w, .. },
        ) => w,
    };
    // Scoped keys never leave their workspace.
    if on.workspace != Some(w.as_str()) {
        return Ok(false);
    }
    let is = |mine: &str, theirs: Option<&str>| theirs == Some(mine);
    Ok(match (rule, p) {
        (Inherit, _) | (_, K::Admin | K::Workspace(_)) | (InWorkspace, _) => true,
        // A scope key reads its scope's sessions and recalls inside them; it writes nothing.
        (Recall, K::Scope { .. }) => true,
        (ScopeRead, K::Scope { scope, .. }) => is(scope, on.scope),
        (PeerRead, K::Scope { scope, .. }) => match (members, on.peer) {
            (Some(m), Some(peer)) => m
                .store()
                .peer_in_scope(w, scope, peer)
                .await
                .map_err(|e| AccessError::Lookup(e.into()))?,
            (None, Some(_)) => {
                return Err(AccessError::Lookup(
                    Code::Internal.failure("no way to look up a scope's peers"),
                ));
            }
            (_, None) => false,
        },
        (SessionRead, K::Scope { scope, .. }) => in_scope(members, w, scope, on.session).await?,
        (MessageRead, K::Scope { scope, .. }) => {
            on.session.is_none() || in_scope(members, w, scope, on.session).await?
        }
        (_, K::Scope { .. }) => false,
        (Peer | PeerRead | CreatePeer, K::Peer { peer, .. }) => is(peer, on.peer),
        (Session | SessionRead | CreateSession, K::Session { session, .. }) => {
            is(session, on.session)
        }
        (MessageRead | MessageWrite, K::Session { session, .. }) => {
            on.session.is_none_or(|s| s == session)
        }
        (SessionRead, K::Peer { peer, .. }) => member(members, w, on.session, peer).await?,
        (MessageRead, K::Peer { peer, .. }) => {
            on.session.is_none() || member(members, w, on.session, peer).await?
        }
        (CreatePeer, K::Session { .. }) => true,
        (MessageFeed, K::Session { session, .. }) => is(session, on.session),
        (MessageFeed, K::Peer { peer, .. }) => {
            is(peer, on.peer) || member(members, w, on.session, peer).await?
        }
        // What a peer key may do to a session that exists (only one it is an active member of,
        // and without changing it) is decided by the store inside the write's transaction
        // ([`session_reach`]): a check here would race the write.
        (CreateSession, K::Peer { .. }) => on.session.is_some(),
        (Admin | Workspace | Peer | PeerRead | Session | MessageWrite | Recall | ScopeRead, _) => {
            false
        }
    })
}

/// What a message search of `workspace` may rank by for this caller: the conclusions citing the
/// messages only when the caller may read the workspace's conclusions (the rule of
/// `Workspace.conclusions`), so that no search ranks by what its caller could not read
/// (docs/search.md, "Conclusions as search keys"). Peer and session keys search by the messages
/// alone.
pub async fn search_keys(p: &Principal, workspace: &str) -> SearchKeys {
    let rule = rule!(Workspace.conclusions).rule;
    match allows::<Store>(None, p, rule, On::workspace(workspace)).await {
        Ok(true) => SearchKeys::WithConclusions,
        _ => SearchKeys::Messages,
    }
}

/// Whether `peer` is an active member of the session.
async fn member<M: Members>(
    members: Option<&M>,
    workspace: &str,
    session: Option<&str>,
    peer: &str,
) -> Result<bool, AccessError> {
    let Some(session) = session else {
        return Ok(false);
    };
    let members = members.ok_or_else(|| {
        AccessError::Lookup(Code::Internal.failure("no way to look up a session's members"))
    })?;
    members
        .is_member(workspace, session, peer)
        .await
        .map_err(AccessError::Lookup)
}

/// Whether the session is a member of the key's scope.
async fn in_scope<M: Members>(
    members: Option<&M>,
    workspace: &str,
    scope: &str,
    session: Option<&str>,
) -> Result<bool, AccessError> {
    let Some(session) = session else {
        return Ok(false);
    };
    let members = members.ok_or_else(|| {
        AccessError::Lookup(Code::Internal.failure("no way to look up a scope's sessions"))
    })?;
    members
        .store()
        .session_in_scope(workspace, scope, session)
        .await
        .map_err(|e| AccessError::Lookup(e.into()))
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
