use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    /// Internal ordering key; clients see `public_id` as the message id.
    #[sea_orm(primary_key)]
    pub id: i64,
    #[sea_orm(unique)]
    pub public_id: String,
    pub workspace_name: String,
    pub session_name: String,
    pub peer_name: String,
    pub seq_in_session: i64,
    pub content: String,
    pub metadata: Json,
    pub internal_metadata: Json,
    pub token_count: i32,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
