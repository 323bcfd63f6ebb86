use sea_orm::entity::prelude::*;

/// A session's membership in a scope.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scope_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub workspace_name: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope_name: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub session_name: String,
    pub added_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
