//! GraphQL's side of the access layer ([`crate::access`]): every field that reads or writes scoped
//! data starts with
//!
//! ```ignore
//! let access = guard::require(ctx, rule!(Workspace.session), On::session(&self.0.name, &id)).await?;
//! access.loader().load_one(key).await?
//! ```
//!
//! `rule!(Type.field)` is the field's row of [`crate::access::RULES`]; [`On`] names the resource
//! the call touches. [`require`] reads the caller from the request's data, asks
//! [`access::check`] (membership through the request's loader, batched and cached), and answers
//! with an [`Access`]: the store and the loader, both sealed in the schema's and the request's
//! data until a check opens them.
//!
//! Which fields need a rule: every root field, and every object field that takes arguments or
//! returns an object, a union or a list of them (Relay connection and edge types excepted: their
//! content is what the field that produced them fetched). The integration test `auth` reads the
//! schema and fails on a field without a rule.

use std::collections::HashSet;

use async_graphql::Context;
use async_graphql::registry::{MetaType, Registry};

use super::RequestLoader;
use super::error::{ApiError, ApiResult};
use super::loaders::MembersKey;
use crate::access::{
    self, Auth, AuthError, Caller, Failure, Field, Granted, Members, On, Principal, Sealed,
};
use crate::store::Store;
use crate::store::search_keys::SearchKeys;

/// The caller's principal: from the request's [`Caller`] (HTTP header, WebSocket
/// `connection_init`); without one, admin when auth is off and UNAUTHENTICATED when it is on (or
/// when the schema carries no [`Auth`] at all).
pub fn principal(ctx: &Context<'_>) -> ApiResult<Principal> {
    principal_of(ctx).map_err(|e| ApiError::from(access::AccessError::Unauthenticated(e)))
}

fn principal_of(ctx: &Context<'_>) -> Result<Principal, AuthError> {
    match ctx.data_opt::<Caller>() {
        Some(caller) => caller.principal(),
        None => match ctx.data_opt::<Auth>() {
            Some(auth) if !auth.enabled() => Ok(Principal::Admin),
            _ => Err(AuthError::Missing),
        },
    }
}

/// What the caller's message searches of `workspace` may rank by
/// ([`access::search_keys`]); the messages alone for a caller without a valid key.
pub async fn search_keys(ctx: &Context<'_>, workspace: &str) -> SearchKeys {
    match principal_of(ctx) {
        Ok(p) => access::search_keys(&p, workspace).await,
        Err(_) => SearchKeys::Messages,
    }
}

/// The request's loader over the sealed store, sealed in turn.
pub fn request_loader(store: &Sealed<Store>) -> Sealed<RequestLoader> {
    store.map(super::request_loader)
}

/// What a passed check gives a resolver: the store and the request's loader. The fields are
/// private and [`require`] is the only constructor.
#[derive(Clone)]
pub struct Access<'a> {
    store: &'a Store,
    loader: &'a RequestLoader,
    scope: Option<String>,
}

impl<'a> Access<'a> {
    pub fn store(&self) -> &'a Store {
        self.store
    }

    pub fn loader(&self) -> &'a RequestLoader {
        self.loader
    }

    /// The scope a recall under this grant runs in ([`access::recall_scope`]).
    pub fn recall_scope(&self, asked: Option<&str>) -> ApiResult<Option<String>> {
        Ok(access::recall_scope(self.scope.as_deref(), asked)?)
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
    let granted = check(ctx, field, on).await?;
    Ok(Access {
        store: ctx.data::<Sealed<Store>>()?.open(&granted),
        loader: ctx.data::<Sealed<RequestLoader>>()?.open(&granted),
        scope: granted.scope().map(str::to_owned),
    })
}

async fn check(ctx: &Context<'_>, field: Field, on: On<'_>) -> ApiResult<Granted> {
    let members = ctx.data_opt::<Sealed<RequestLoader>>();
    Ok(access::check(members, || principal_of(ctx), field, on).await?)
}

impl Members for RequestLoader {
    async fn is_member(&self, workspace: &str, session: &str, peer: &str) -> Result<bool, Failure> {
        let members = self
            .load_one(MembersKey(workspace.to_owned(), session.to_owned()))
            .await
            .map_err(Failure::from)?
            .unwrap_or_default();
        Ok(members.iter().any(|m| m.peer_name == peer))
    }

    fn store(&self) -> &Store {
        self.loader().store()
    }
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

    use crate::access::Rule::*;
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
                "Recall" => Recall,
                "ScopeRead" => ScopeRead,
                "PeerRead" => PeerRead,
                other => panic!("unknown rule {other}"),
            };
            let on = On {
                workspace: w.as_deref(),
                peer: p.as_deref(),
                session: s.as_deref(),
                scope: None,
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
        let work = || Principal::Scope {
            workspace: "ws".into(),
            scope: "work".into(),
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
            (s1(), "Recall", "ws", "F"),
            (alice(), "Recall", "ws", "F"),
            (w(), "Recall", "ws", "y"),
            (work(), "Recall", "ws", "y"),
            (work(), "Recall", "other", "F"),
            (work(), "InWorkspace", "ws", "y"),
            (work(), "Workspace", "ws", "F"),
            (work(), "Peer", "ws/alice", "F"),
            (work(), "Session", "ws/-/s1", "F"),
            (work(), "MessageWrite", "ws/-/s1", "F"),
            (work(), "CreateSession", "ws/-/s1", "F"),
            (work(), "CreatePeer", "ws/zed", "F"),
            (work(), "MessageRead", "ws", "y"),
            (work(), "ScopeRead", "ws", "F"),
            (alice(), "PeerRead", "ws/alice", "y"),
            (alice(), "PeerRead", "ws/bob", "F"),
            (s1(), "PeerRead", "ws/alice", "F"),
            (w(), "PeerRead", "ws/alice", "y"),
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
}
