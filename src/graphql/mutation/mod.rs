//! Mutations, one object per area, merged into the root.

mod conclusions;
mod core;
mod dreams;
mod erasure;
mod keys;
mod scopes;
mod webhooks;

use async_graphql::MergedObject;

#[derive(MergedObject, Default)]
pub struct MutationRoot(
    core::CoreMutation,
    conclusions::ConclusionMutation,
    dreams::DreamsMutation,
    erasure::ErasureMutation,
    keys::KeysMutation,
    scopes::ScopesMutation,
    webhooks::WebhooksMutation,
);
