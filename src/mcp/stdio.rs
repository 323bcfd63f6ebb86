//! `honcho-graphql mcp`: the server's store, embedder, LLM and auth set up as `serve` sets them
//! up, answering MCP over stdin/stdout for a desktop client that starts the process. Logs go to
//! stderr (stdout is the protocol's).

use crate::StartError;
use crate::config::McpConfig;

pub async fn run(cfg: McpConfig) -> Result<(), StartError> {
    let serve = &cfg.serve;
    let auth = serve.auth.auth()?;
    let llm = crate::llm::build(&serve.llm)?;
    let dialectic = llm.clone().map(crate::dialectic::Dialectic::new);
    let store = crate::ready_store(serve, llm.is_some()).await?;
    let services =
        crate::access::Services::new(crate::access::Sealed::new(store), Some(auth), dialectic);
    tracing::info!("serving MCP on stdio");
    super::serve_stdio(services, cfg.api_key, cfg.workspace_id)
        .await
        .map_err(StartError::Serve)
}
