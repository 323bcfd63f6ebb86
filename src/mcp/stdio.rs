//! `honcho-graphql mcp`: MCP over stdin/stdout for a desktop client that starts the process, with
//! one key for every call. Logs go to stderr (stdout is the protocol's).

use clap::Args;
use rmcp::ServiceExt;

use super::{Keys, Memory};
use crate::access::Services;

/// The flags `mcp` takes besides `serve`'s.
// No Debug: it holds a key.
#[derive(Args, Clone)]
pub struct StdioArgs {
    /// The API key every tool call is made with (as `Authorization: Bearer` over HTTP); unset
    /// with auth on, every call is refused.
    #[arg(
        id = "honcho_api_key",
        long = "api-key",
        value_name = "KEY",
        env = "HONCHO_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,

    /// The workspace of tool calls that name none (a scoped key's own by default).
    #[arg(long, env = "HONCHO_WORKSPACE_ID")]
    pub workspace_id: Option<String>,
}

/// Serves MCP over stdin/stdout until the client closes it. Every call is made with `args`' key
/// (none: admin when auth is off, refused when it is on), in its workspace when it names none.
pub async fn serve(services: Services, args: StdioArgs) -> std::io::Result<()> {
    let memory = Memory::new(
        services,
        Keys::Fixed {
            authorization: args.api_key.map(|k| format!("Bearer {}", k.trim())),
            workspace: args.workspace_id,
        },
    );
    let running = memory
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
