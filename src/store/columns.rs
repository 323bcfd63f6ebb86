//! Column lists for hand-written SQL (SELECT, RETURNING, joins), derived from the entities so that
//! a column added to an entity is selected everywhere without editing SQL strings.

use sea_orm::{EntityTrait, IdenStatic, Iterable};

/// `col, col, …`: every column of the entity, qualified by `alias` when it is not empty.
pub(crate) fn list<E: EntityTrait>(alias: &str) -> String {
    let dot = if alias.is_empty() { "" } else { "." };
    E::Column::iter()
        .map(|c| format!("{alias}{dot}{}", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `alias.col AS prefixcol, …` for every column of the entity, to read a joined row back with
/// `FromQueryResult::from_query_result(row, prefix)`.
pub(crate) fn aliased<E: EntityTrait>(alias: &str, prefix: &str) -> String {
    E::Column::iter()
        .map(|c| format!("{alias}.{0} AS {prefix}{0}", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entity::conclusion;

    #[test]
    fn conclusion_columns_leave_out_the_embedding() {
        let cols = list::<conclusion::Entity>("");
        assert_eq!(
            cols,
            "id, workspace_name, observer, observed, session_name, content, level, \
             times_derived, source_ids, internal_metadata, metadata, created_at, deleted_at"
        );
        assert!(list::<conclusion::Entity>("c").starts_with("c.id, c.workspace_name, "));
        assert!(aliased::<conclusion::Entity>("c", "c_").starts_with("c.id AS c_id, "));
    }
}
