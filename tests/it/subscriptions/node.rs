//! The npm `graphql-ws` client under Node against our WebSocket endpoint.

use super::*;

/// The npm `graphql-ws` client under Node: a client we did not write.
#[tokio::test]
async fn the_npm_graphql_ws_client_receives_events() {
    let node_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node-ws");
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::harness::skip("node is not installed");
        return;
    }
    if !std::path::Path::new(node_dir)
        .join("node_modules/graphql-ws")
        .exists()
    {
        let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/setup-node-ws.sh");
        let ok = std::process::Command::new(setup)
            .status()
            .is_ok_and(|s| s.success());
        if !ok
            || !std::path::Path::new(node_dir)
                .join("node_modules/graphql-ws")
                .exists()
        {
            crate::harness::skip(&format!(
                "could not install the npm graphql-ws client (run {setup})"
            ));
            return;
        }
    }
    let app = TestApp::new().await;
    let a = Instance::start(&app, 1024).await;
    let child = tokio::process::Command::new("node")
        .current_dir(node_dir)
        .args([
            "subscribe.mjs",
            &format!("ws://{}/graphql/ws", a.addr),
            "ws",
            "chat",
            "3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until("node to subscribe", Duration::from_secs(20), || {
        a.bus.subscribers() == 1
    })
    .await;
    a.create("chat", msgs("alice", &["from rust", "to node"]))
        .await;
    a.create("elsewhere", msgs("alice", &["not for node"]))
        .await;
    a.create("chat", msgs("bob", &["third"])).await;
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("node finishes")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(String, i64, String)> = lines
        .iter()
        .map(|r| {
            let m = &r["data"]["messageCreated"];
            (
                m["content"].as_str().unwrap().to_owned(),
                m["seqInSession"].as_i64().unwrap(),
                m["peer"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("from rust".to_owned(), 1, "alice".to_owned()),
            ("to node".to_owned(), 2, "alice".to_owned()),
            ("third".to_owned(), 3, "bob".to_owned()),
        ]
    );
}
