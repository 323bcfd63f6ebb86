use sea_orm::entity::prelude::*;

/// Membership of a peer in a session, with its per-session observation config. Leaving is a soft
/// delete (`left_at`); rejoining clears it.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_peers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub workspace_name: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub session_name: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub peer_name: String,
    pub configuration: Json,
    pub internal_metadata: Json,
    pub joined_at: DateTimeUtc,
    pub left_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
