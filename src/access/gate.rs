//! The way to the store for the APIs that serve one call per request (REST routes, MCP tools):
//! the caller's key and the sealed store. GraphQL has its own (`graphql::guard`), which adds the
//! request's loader and reads the caller from the request's data; both ask [`check`].

use super::{AccessError, Caller, Field, On, Principal, Sealed, check, recall_scope};
use crate::store::Store;
use crate::store::search_keys::SearchKeys;

/// One request's caller and the store it may reach through [`Gate::require`].
#[derive(Clone)]
pub struct Gate {
    store: Sealed<Store>,
    caller: Caller,
}

/// What a passed check gives a REST route or an MCP tool: the store. [`Gate::require`] is the
/// only constructor.
#[derive(Clone)]
pub struct Access<'a> {
    store: &'a Store,
    scope: Option<String>,
}

impl<'a> Access<'a> {
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The scope a recall under this grant runs in, given the one the call asked for
    /// ([`super::recall_scope`]): a scope key's own, whatever was asked.
    pub fn recall_scope(&self, asked: Option<&str>) -> Result<Option<String>, AccessError> {
        recall_scope(self.scope.as_deref(), asked)
    }
}

impl Gate {
    pub fn new(store: Sealed<Store>, caller: Caller) -> Self {
        Gate { store, caller }
    }

    /// Checks `field`'s rule (a [`super::RULES`] row, `rule!(Type.field)`) on `on`.
    pub async fn require(&self, field: Field, on: On<'_>) -> Result<Access<'_>, AccessError> {
        let granted = check(Some(&self.store), || self.caller.principal(), field, on).await?;
        Ok(Access {
            store: self.store.open(&granted),
            scope: granted.scope().map(str::to_owned),
        })
    }

    /// The caller's principal (after [`Gate::require`] passed, for what the store decides by key).
    pub fn principal(&self) -> Result<Principal, AccessError> {
        self.caller
            .principal()
            .map_err(AccessError::Unauthenticated)
    }

    /// What this caller's message searches of `workspace` may rank by ([`super::search_keys`]);
    /// the messages alone for a caller without a valid key.
    pub async fn search_keys(&self, workspace: &str) -> SearchKeys {
        match self.caller.principal() {
            Ok(p) => super::search_keys(&p, workspace).await,
            Err(_) => SearchKeys::Messages,
        }
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}
