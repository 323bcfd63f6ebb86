//! What every API is served with besides its own transport: the sealed store, the key settings
//! and the dialectic. REST routes and MCP tools hold one; GraphQL holds the same values in its
//! schema's data (`http::rest_state` builds one from them, so all APIs serve one store).

use super::{Auth, Caller, Gate, Sealed, authenticate};
use crate::dialectic::Dialectic;
use crate::store::Store;

#[derive(Clone)]
pub struct Services {
    store: Sealed<Store>,
    /// None: nobody is authenticated (a server always has one; some tests build without).
    auth: Option<Auth>,
    dialectic: Option<Dialectic>,
}

impl Services {
    pub fn new(store: Sealed<Store>, auth: Option<Auth>, dialectic: Option<Dialectic>) -> Self {
        Services {
            store,
            auth,
            dialectic,
        }
    }

    /// `Authorization` (None when absent) → the caller, with these key settings.
    pub fn authenticate(&self, authorization: Option<&str>) -> Caller {
        authenticate(self.auth.as_ref(), authorization)
    }

    /// The way to the store for one call by `caller`.
    pub fn gate(&self, caller: Caller) -> Gate {
        Gate::new(self.store.clone(), caller)
    }

    pub fn auth(&self) -> Option<&Auth> {
        self.auth.as_ref()
    }

    /// The dialectic, when an LLM is configured.
    pub fn dialectic(&self) -> Option<&Dialectic> {
        self.dialectic.as_ref()
    }
}
