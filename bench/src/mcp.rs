//! Workload 12: the same reads over MCP (`tools/call` at /mcp, revision 2026-07-28) and over
//! GraphQL, alternating request by request on one server and one keep-alive connection: a page
//! of 20 messages with its total, and a session search with each match's context window (full
//! text, so the embedder is not what is timed). Prints each side's p50 and p95 and the ratio
//! MCP / GraphQL.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::common::{graphql, send_json, stats};

const WS: &str = "mcp-vs-graphql";
const SESSION: &str = "s";
const QUERY: &str = "kayak river";

const CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
    createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id } }";
/// The fields of a message as the MCP tools return them.
const FIELDS: &str =
    "id content peerId sessionId workspaceId metadata createdAt tokenCount seqInSession";

fn page_query() -> String {
    format!(
        "query($w: ID!, $s: ID!) {{ workspace(id: $w) {{ session(id: $s) {{ \
         messages(first: 20) {{ totalCount nodes {{ {FIELDS} }} }} }} }} }}"
    )
}

fn search_query() -> String {
    format!(
        "query($w: ID!, $s: ID!, $q: String!) {{ workspace(id: $w) {{ session(id: $s) {{ \
         search(query: $q, limit: 10, includeContext: true, contextWindow: 2) {{ \
         ... on SnippetHits {{ results {{ {FIELDS} }} \
         snippets {{ sessionId matched {{ id }} context {{ {FIELDS} }} }} }} }} }} }} }}"
    )
}

/// One `tools/call` as a 2026-07-28 client sends it; fails unless the tool succeeded.
async fn call_tool(
    http: &reqwest::Client,
    url: &str,
    tool: &str,
    arguments: &Value,
) -> anyhow::Result<Value> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "honcho-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let req = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body);
    let resp = send_json(req).await?;
    let result = &resp["result"];
    if result["isError"] != json!(false) {
        bail!("{tool}: {resp}");
    }
    Ok(result["structuredContent"].clone())
}

/// A session of 1,000 turns in its own workspace; every tenth mentions the query's words.
async fn seed(http: &reqwest::Client, graphql_url: &str) -> anyhow::Result<()> {
    for batch in 0..10 {
        let messages: Vec<Value> = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                let topic = if n % 10 == 3 {
                    "taking the kayak down the river"
                } else {
                    "the garden, the weather and the week ahead"
                };
                json!({
                    "peerId": if n % 2 == 0 { "alice" } else { "bob" },
                    "content": format!("turn {n}: {topic}"),
                })
            })
            .collect();
        graphql(
            http,
            graphql_url,
            CREATE,
            &json!({"w": WS, "s": SESSION, "m": messages}),
        )
        .await
        .context("seeding workload 12")?;
    }
    Ok(())
}

/// `rounds` of each read over each protocol; `graphql_url` ends in `/graphql` and the server
/// also serves /mcp.
pub async fn run(http: &reqwest::Client, graphql_url: &str, rounds: usize) -> anyhow::Result<()> {
    seed(http, graphql_url).await?;
    let mcp_url = format!("{}/mcp", graphql_url.trim_end_matches("/graphql"));
    let page_args = json!({"workspace_id": WS, "session_id": SESSION, "size": 20});
    let search_args = json!({"workspace_id": WS, "session_id": SESSION, "query": QUERY,
                             "message_limit": 10, "include_context": true, "context_window": 2});
    let (page, search) = (page_query(), search_query());
    let vars = json!({"w": WS, "s": SESSION, "q": QUERY});
    // The two sides must read the same rows, or the comparison means nothing.
    let over_mcp = call_tool(http, &mcp_url, "get_session_messages", &page_args).await?;
    let over_gql = graphql(http, graphql_url, &page, &vars).await?;
    let total = &over_gql["data"]["workspace"]["session"]["messages"]["totalCount"];
    if over_mcp["total"] != *total || over_mcp["messages"].as_array().map(Vec::len) != Some(20) {
        bail!("workload 12: MCP's page {over_mcp} is not GraphQL's {over_gql}");
    }
    let ids = |hits: &Value| -> Vec<Value> {
        let hits = hits.as_array().map_or(&[][..], Vec::as_slice);
        hits.iter().map(|m| m["id"].clone()).collect()
    };
    let over_mcp = call_tool(http, &mcp_url, "search", &search_args).await?;
    let over_gql = graphql(http, graphql_url, &search, &vars).await?;
    let found = ids(&over_mcp["messages"]);
    if found.len() != 10
        || found != ids(&over_gql["data"]["workspace"]["session"]["search"]["results"])
    {
        bail!("workload 12: MCP's search {over_mcp} is not GraphQL's {over_gql}");
    }

    let mut times: [[Vec<Duration>; 2]; 2] = Default::default();
    for round in 0..rounds {
        // Alternate which side goes first, so neither always meets a warmer cache.
        for side in [round % 2, 1 - round % 2] {
            for (op, (tool, args, query)) in [
                ("get_session_messages", &page_args, &page),
                ("search", &search_args, &search),
            ]
            .into_iter()
            .enumerate()
            {
                let t = Instant::now();
                if side == 0 {
                    call_tool(http, &mcp_url, tool, args).await?;
                } else {
                    graphql(http, graphql_url, query, &vars).await?;
                }
                times[op][side].push(t.elapsed());
            }
        }
    }
    println!("\n(12) MCP vs GraphQL, same server, {rounds} alternating rounds (ms)");
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "read", "MCP p50", "GQL p50", "MCP p95", "GQL p95", "p50 x"
    );
    let names = [
        "a page of 20 messages with its total",
        "session search, limit 10, context ±2 (FTS)",
    ];
    for (name, [mcp, gql]) in names.iter().zip(times) {
        let (m, g) = (stats(mcp), stats(gql));
        println!(
            "{name:<44} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6.2}x",
            m.p50_ms,
            g.p50_ms,
            m.p95_ms,
            g.p95_ms,
            m.p50_ms / g.p50_ms
        );
    }
    Ok(())
}
