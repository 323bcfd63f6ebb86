//! The MCP server through the official client SDKs, as an agent's host uses it: the TypeScript
//! SDK (`@modelcontextprotocol/sdk` 1.x and its successor `@modelcontextprotocol/client` 2.x) and
//! the Python SDK (`mcp` on PyPI), each over Streamable HTTP against the server binary and over
//! stdio through `honcho-graphql mcp`. The steps are tests/mcp-clients/scenario.mjs (client.py
//! repeats them): list what is offered, record a conversation, search it with context, a card, a
//! reasoning tree, the resources and the prompt, a refused call, and over HTTP a 401 without key.
//! The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`) checks the tools' schemas.

use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use honcho_graphql::auth::KeySpec;

use crate::harness::{DbGuard, SECRET, ServerProcess, auth, blank_database, skip};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp-clients");

/// Whether tests/mcp-clients has its npm and PyPI packages. scripts/setup-mcp-clients.sh (which
/// `make test` runs first) is run once per test process when they are missing.
fn installed() -> bool {
    static SETUP: OnceLock<()> = OnceLock::new();
    let present = || {
        let dir = std::path::Path::new(DIR);
        dir.join("node_modules/@modelcontextprotocol/sdk").exists()
            && dir
                .join("node_modules/@modelcontextprotocol/client")
                .exists()
            && dir.join("node_modules/.bin/mcp-inspector").exists()
            && dir.join(".venv/bin/python").exists()
    };
    SETUP.get_or_init(|| {
        if !present() {
            let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-mcp-clients.sh");
            let _ = std::process::Command::new(setup).status();
        }
    });
    present()
}

/// A key for workspace `ws` alone, without its `Bearer ` prefix.
fn workspace_key(ws: &str) -> String {
    auth()
        .mint(&KeySpec {
            workspace: Some(ws.into()),
            ..KeySpec::default()
        })
        .unwrap()
}

/// How one client run reaches the server.
enum Via<'a> {
    Http(&'a ServerProcess),
    Stdio(&'a DbGuard),
}

/// What `honcho-graphql mcp` needs to serve `db` with `key`: a client passes it to the process
/// it starts.
fn stdio_env(db: &DbGuard, key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", db.url()),
        ("HONCHO_AUTH_SECRET", SECRET.into()),
        ("HONCHO_API_KEY", key.into()),
        ("HONCHO_EMBEDDER", "none".into()),
        // The server process has migrated the database.
        ("HONCHO_NO_MIGRATE", "true".into()),
        ("HONCHO_DB_POOL", "2".into()),
        ("RUST_LOG", "error".into()),
    ]
}

const BIN: &str = env!("CARGO_BIN_EXE_honcho-graphql");

/// Runs `cmd` in tests/mcp-clients (killed after 180 s); fails unless it exits 0. Its stdout,
/// and a report of the run for failure messages.
async fn output(mut cmd: tokio::process::Command) -> (String, String) {
    cmd.current_dir(DIR)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .env_remove("HONCHO_WORKSPACE_ID");
    let what = format!("{:?}", cmd.as_std());
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer in 180 s"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = format!("{what}\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    (stdout, report)
}

/// Runs the SDK client `program args` against the server, in workspace `ws` with a key for it;
/// fails unless it prints `protocol <revision>` and, last, `OK`.
async fn run(program: &str, args: &[&str], via: Via<'_>, ws: &str, revision: &str) {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).env("MCP_WORKSPACE", ws);
    let key = workspace_key(ws);
    match via {
        Via::Http(server) => {
            cmd.env("MCP_URL", server.url("/mcp")).env("MCP_KEY", &key);
        }
        // The client starts `honcho-graphql mcp` itself, with the environment it is given.
        Via::Stdio(db) => {
            cmd.env("HONCHO_BIN", BIN).envs(stdio_env(db, &key));
        }
    }
    let (stdout, report) = output(cmd).await;
    assert!(
        stdout.lines().any(|l| l == format!("protocol {revision}")),
        "want protocol {revision}: {report}"
    );
    assert_eq!(stdout.lines().last(), Some("OK"), "{report}");
}

/// A fresh database served by the binary with auth on (no embedder: full-text search).
async fn server() -> (DbGuard, ServerProcess) {
    let db = blank_database().await;
    let server = ServerProcess::start(&db, &[]).await;
    (db, server)
}

#[tokio::test]
async fn the_typescript_sdks_work_over_http_and_stdio_in_2025_11_25_and_2026_07_28() {
    if !installed() {
        return skip("the MCP clients are not installed: run scripts/setup-mcp-clients.sh");
    }
    let (db, server) = server().await;
    // 1.x knows no revision past 2025-11-25; 2.x pinned to 2026-07-28 never sends initialize.
    for (sdk, revision) in [("v1", "2025-11-25"), ("v2", "2026-07-28")] {
        let ws = format!("ts-{sdk}-http");
        run(
            "node",
            &["client.mjs", sdk, "http"],
            Via::Http(&server),
            &ws,
            revision,
        )
        .await;
        let ws = format!("ts-{sdk}-stdio");
        run(
            "node",
            &["client.mjs", sdk, "stdio"],
            Via::Stdio(&db),
            &ws,
            revision,
        )
        .await;
    }
}

#[tokio::test]
async fn the_python_sdk_works_over_http_and_stdio_in_2026_07_28_and_2025_11_25() {
    if !installed() {
        return skip("the MCP clients are not installed: run scripts/setup-mcp-clients.sh");
    }
    let (db, server) = server().await;
    let python = format!("{DIR}/.venv/bin/python");
    // `auto` (the SDK's default) asks server/discover first; `legacy` sends initialize.
    for (mode, revision) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let ws = format!("py-{mode}-http");
        let args = ["client.py", mode, "http"];
        run(&python, &args, Via::Http(&server), &ws, revision).await;
        let ws = format!("py-{mode}-stdio");
        let args = ["client.py", mode, "stdio"];
        run(&python, &args, Via::Stdio(&db), &ws, revision).await;
    }
}

/// The MCP Inspector's CLI lists the tools with `--strict`, which checks every tool's input
/// schema for portability across model providers and exits non-zero on an error-severity
/// finding; warnings are allowed (docs/mcp.md says which).
#[tokio::test]
async fn the_mcp_inspector_cli_lists_the_tools_with_no_schema_error_in_either_era() {
    if !installed() {
        return skip("the MCP clients are not installed: run scripts/setup-mcp-clients.sh");
    }
    let (db, server) = server().await;
    let key = workspace_key("inspector");
    // Its catalog and client settings live under HOME: not the developer's.
    let home = std::env::temp_dir().join(format!("honcho-inspector-{}", nanoid::nanoid!()));
    std::fs::create_dir_all(&home).unwrap();
    for era in ["legacy", "modern"] {
        for http in [true, false] {
            let inspector = format!("{DIR}/node_modules/.bin/mcp-inspector");
            let mut cmd = tokio::process::Command::new(inspector);
            cmd.env("HOME", &home)
                .env("MCP_INSPECTOR_SECRET_STORE", "memory")
                .args(["--cli", "--protocol-era", era, "--format", "json"])
                .args(["--method", "tools/list", "--strict"]);
            if http {
                // Before --header, whose values run to the end of the arguments.
                let auth = format!("Authorization: Bearer {key}");
                cmd.args([&server.url("/mcp"), "--header", &auth]);
            } else {
                for (name, value) in stdio_env(&db, &key) {
                    cmd.args(["-e", &format!("{name}={value}")]);
                }
                cmd.args([BIN, "mcp"]);
            }
            let (stdout, report) = output(cmd).await;
            let listed: serde_json::Value = serde_json::from_str(&stdout).expect(&report);
            let tools = listed["result"]["tools"].as_array().expect(&report);
            assert_eq!(tools.len(), scenario_tools(), "{report}");
            assert!(report.contains("0 errors, "), "{report}");
        }
    }
    let _ = std::fs::remove_dir_all(home);
}

/// How many tools the server lists: the clients' scenario names each of them.
fn scenario_tools() -> usize {
    let scenario: serde_json::Value =
        serde_json::from_str(include_str!("../mcp-clients/scenario.json")).unwrap();
    scenario["tools"].as_array().unwrap().len()
}
