use sea_orm::entity::prelude::*;

/// A peer's erasure, done in batches and resumable (docs/erasure.md).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "erasure_jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub workspace_name: String,
    pub peer_name: String,
    pub keep_observed: bool,
    pub phase: Phase,
    pub messages_total: i64,
    pub messages_erased: i64,
    pub conclusions_erased: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub finished_at: Option<DateTimeUtc>,
}

/// Where a job is; each phase runs in batches until nothing of its kind is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
pub enum Phase {
    /// The deriver's queued work for or about the peer.
    #[sea_orm(string_value = "queue")]
    Queue,
    /// The peer's messages.
    #[sea_orm(string_value = "messages")]
    Messages,
    /// Conclusions about the peer, and those it drew about others.
    #[sea_orm(string_value = "conclusions")]
    Conclusions,
    /// The last leftovers, other peers' cards of it, and the peer itself.
    #[sea_orm(string_value = "peer")]
    Peer,
    #[sea_orm(string_value = "done")]
    Done,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
