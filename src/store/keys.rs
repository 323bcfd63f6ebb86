//! Rows named by many (workspace, name) keys at once, for the dataloaders' batches.

use sea_orm::{ConnectionTrait, EntityTrait};

use super::{StoreResult, stmt};

/// The rows of `E`'s table (which has `workspace_name` and `name` columns) for all `keys`, in one
/// statement; keys with no row are simply missing from the answer.
pub(crate) async fn by_names<E: EntityTrait, C: ConnectionTrait>(
    db: &C,
    keys: &[(String, String)],
) -> StoreResult<Vec<E::Model>> {
    let (ws, names): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
    let table = E::default().table_name().to_owned();
    Ok(E::find()
        .from_raw_sql(stmt(
            &format!(
                "SELECT t.* FROM {table} t \
                 JOIN unnest($1::text[], $2::text[]) AS k(w, n) \
                   ON t.workspace_name = k.w AND t.name = k.n"
            ),
            [ws.into(), names.into()],
        ))
        .all(db)
        .await?)
}
