use sea_orm::entity::prelude::*;

/// Honcho v3.0.12's `documents`: a fact, inference or observation one peer holds about another.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "conclusions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub workspace_name: String,
    pub observer: String,
    pub observed: String,
    pub session_name: Option<String>,
    pub content: String,
    pub level: Level,
    pub times_derived: i32,
    pub source_ids: Option<Vec<String>>,
    pub internal_metadata: Json,
    /// Public, user-writable; added by the second migration.
    pub metadata: Json,
    pub created_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

/// How a conclusion came to be. Stored as lowercase text, as Honcho v3.0.12 stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::None)")]
pub enum Level {
    #[sea_orm(string_value = "explicit")]
    Explicit,
    #[sea_orm(string_value = "deductive")]
    Deductive,
    #[sea_orm(string_value = "inductive")]
    Inductive,
    #[sea_orm(string_value = "contradiction")]
    Contradiction,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
