use async_graphql::{Context, ID, Object};

use crate::access::{On, rule};
use crate::auth::{Auth, KeySpec, MintError};
use crate::graphql::error::{ApiResult, Code, bad_input};
use crate::graphql::guard;
use crate::graphql::scalars::DateTime;

/// API keys.
#[derive(Default)]
pub struct KeysMutation;

#[Object]
impl KeysMutation {
    /// Mints an API key (admin keys only): a workspace key (`workspaceId`), a peer key
    /// (`workspaceId` + `peerId`) or a session key (`workspaceId` + `sessionId`), valid until
    /// `expiresAt` (for ever without it). `scopeId` with `workspaceId` limits the key to that
    /// scope's sessions, read only (docs/scopes.md). BAD_USER_INPUT when auth is disabled.
    async fn create_key(
        &self,
        ctx: &Context<'_>,
        workspace_id: Option<ID>,
        peer_id: Option<ID>,
        session_id: Option<ID>,
        expires_at: Option<DateTime>,
        scope_id: Option<ID>,
    ) -> ApiResult<String> {
        guard::require(ctx, rule!(MutationRoot.createKey), On::nothing()).await?;
        let auth = ctx.data::<Auth>()?;
        let spec = KeySpec {
            admin: false,
            workspace: workspace_id.map(|w| w.0),
            peer: peer_id.map(|p| p.0),
            session: session_id.map(|s| s.0),
            scope: scope_id.map(|s| s.0),
            expires_at: expires_at.map(|t| t.0),
        };
        auth.mint(&spec).map_err(|e| match e {
            MintError::Signing => Code::Internal.error(e.to_string()),
            _ => bad_input(e.to_string()),
        })
    }
}
