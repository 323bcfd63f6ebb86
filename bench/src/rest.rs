//! Workload 10: the same work over Honcho's REST API and over GraphQL, alternating request by
//! request on one server: batches of 100 messages into a session, a filtered page of 50, and a
//! search. Prints each side's median and the ratio REST / GraphQL.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{graphql, stats};

const CREATE: &str = "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { \
    createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id content peerId createdAt } }";
const LIST: &str = "query($w: ID!, $s: ID!) { workspace(id: $w) { session(id: $s) { \
    messages(first: 50, filters: {peer_id: \"alice\"}) { nodes { id content peerId createdAt } } } } }";
const SEARCH: &str = "query($w: ID!, $s: ID!, $q: String!) { workspace(id: $w) { session(id: $s) { \
    search(query: $q, limit: 10) { ... on MessageHits { results { id content peerId createdAt } } } } } }";

/// One request's time, failing on an error status.
async fn time(req: reqwest::RequestBuilder) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let resp = req.send().await?.error_for_status()?;
    let _: Value = resp.json().await?;
    Ok(t.elapsed())
}

async fn time_graphql(
    http: &reqwest::Client,
    url: &str,
    query: &str,
    vars: Value,
) -> anyhow::Result<Duration> {
    let t = Instant::now();
    graphql(http, url, query, &vars).await?;
    Ok(t.elapsed())
}

/// `rounds` of each operation over each API; `graphql_url` ends in `/graphql`.
pub async fn run(http: &reqwest::Client, graphql_url: &str, rounds: usize) -> anyhow::Result<()> {
    let base = graphql_url.trim_end_matches("/graphql");
    let ws = "rest-vs-graphql";
    let (rest_s, gql_s) = ("rest-session", "graphql-session");
    let mut times: [[Vec<Duration>; 2]; 3] = Default::default();
    for round in 0..rounds {
        let batch: Vec<Value> = (0..100)
            .map(|i| {
                json!({
                    "peer": if i % 2 == 0 { "alice" } else { "bob" },
                    "content": format!("round {round} message {i} about gardens and rivers"),
                })
            })
            .collect();
        let rest_batch: Vec<Value> = batch
            .iter()
            .map(|m| json!({"peer_id": m["peer"], "content": m["content"]}))
            .collect();
        let gql_batch: Vec<Value> = batch
            .iter()
            .map(|m| json!({"peerId": m["peer"], "content": m["content"]}))
            .collect();
        let rest = format!("{base}/v3/workspaces/{ws}/sessions");
        // Alternate which side goes first, so neither always meets a warmer cache.
        for side in [round % 2, 1 - round % 2] {
            let (create, list, search) = if side == 0 {
                (
                    time(
                        http.post(format!("{rest}/{rest_s}/messages"))
                            .json(&json!({"messages": rest_batch})),
                    )
                    .await?,
                    time(
                        http.post(format!("{rest}/{rest_s}/messages/list?size=50"))
                            .json(&json!({"filters": {"peer_id": "alice"}})),
                    )
                    .await?,
                    time(
                        http.post(format!("{rest}/{rest_s}/search"))
                            .json(&json!({"query": "gardens rivers", "limit": 10})),
                    )
                    .await?,
                )
            } else {
                let vars = json!({"w": ws, "s": gql_s});
                (
                    time_graphql(
                        http,
                        graphql_url,
                        CREATE,
                        json!({"w": ws, "s": gql_s, "m": gql_batch}),
                    )
                    .await?,
                    time_graphql(http, graphql_url, LIST, vars.clone()).await?,
                    time_graphql(
                        http,
                        graphql_url,
                        SEARCH,
                        json!({"w": ws, "s": gql_s, "q": "gardens rivers"}),
                    )
                    .await?,
                )
            };
            times[0][side].push(create);
            times[1][side].push(list);
            times[2][side].push(search);
        }
    }
    println!("\n(10) REST vs GraphQL, same server, {rounds} alternating rounds (p50 ms)");
    println!(
        "{:<34} {:>9} {:>9} {:>7}",
        "operation", "REST", "GraphQL", "ratio"
    );
    let names = [
        "create a batch of 100 messages",
        "list 50 with a filter",
        "search (hybrid, limit 10)",
    ];
    for (name, [rest, gql]) in names.iter().zip(times) {
        let (r, g) = (stats(rest).p50_ms, stats(gql).p50_ms);
        println!("{name:<34} {r:>9.2} {g:>9.2} {:>6.2}x", r / g);
    }
    Ok(())
}
