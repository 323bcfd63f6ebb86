//! `GET /export/workspaces/{workspace_id}`: the workspace's export (docs/export.md), the bytes
//! `honcho-graphql export` writes, streamed as they are read. Not one of Honcho's routes, so
//! outside `/v3` and its OpenAPI document; authorized by `Workspace.export`'s row (admin and
//! workspace keys).

use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::{Gate, RestResult};
use crate::access::{On, rule};

pub async fn download(gate: Gate, Path(workspace_id): Path<String>) -> RestResult<Response> {
    let access = gate
        .require(rule!(Workspace.export), On::workspace(&workspace_id))
        .await?;
    // NOT_FOUND comes here, before the status line; a failure later cuts the body short, and
    // the missing end line tells the importer.
    let stream = access.store().export_workspace(&workspace_id).await?;
    let body = Body::from_stream(
        stream.map(|chunk| chunk.map(Bytes::from).map_err(std::io::Error::other)),
    );
    Ok((
        [
            (CONTENT_TYPE, "application/zstd".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{workspace_id}.jsonl.zst\""),
            ),
        ],
        body,
    )
        .into_response())
}
