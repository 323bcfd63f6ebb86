//! Semantic representations and context over REST: `search_query` brings the conclusions that
//! answer it (the conclusions' hybrid search, real MiniLM vectors) first, `search_top_k` bounds
//! them, `search_max_distance` keeps far ones out, `include_most_frequent` gives the most derived
//! a share, and out-of-range values are refused with a code.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{AppServer, TestApp};

const MUSIC: [&str; 2] = [
    "Alice plays the cello in a youth orchestra",
    "Alice takes piano lessons on Saturdays",
];

const OTHERS: [&str; 8] = [
    "Alice drinks green tea every morning",
    "Alice lives in Lisbon near the river",
    "Alice works night shifts as a nurse",
    "Alice owns a grey cat named Pixel",
    "Alice is training for a half marathon",
    "Alice is allergic to peanuts",
    "Alice drives an old red van",
    "Alice reads mystery novels before bed",
];

const MUSICIAN: &str = "Alice is a musician";

struct Fixture {
    http: AppServer,
}

impl Fixture {
    /// Alice's own conclusions, oldest first: the two about music, a DEDUCTIVE one derived
    /// twice from the first of them, then eight about other things.
    async fn new() -> Fixture {
        let app = TestApp::with_embedder().await;
        for p in ["alice", "bob"] {
            app.ok(
                "mutation($p: ID!) { getOrCreatePeer(workspaceId: \"w\", id: $p) { id } }",
                json!({"p": p}),
            )
            .await;
        }
        app.ok(
            "mutation { getOrCreateSession(workspaceId: \"w\", id: \"s1\", \
             peers: [{peerId: \"alice\"}, {peerId: \"bob\"}]) { id } }",
            json!({}),
        )
        .await;
        let music = create(&app, &MUSIC).await;
        for _ in 0..2 {
            app.ok(
                "mutation($i: DerivedConclusionInput!) { recordDerivedConclusion(\
                 workspaceId: \"w\", input: $i) { id } }",
                json!({"i": {"content": MUSICIAN, "observerId": "alice", "observedId": "alice",
                             "level": "DEDUCTIVE", "sourceIds": [music[0]]}}),
            )
            .await;
        }
        create(&app, &OTHERS).await;
        Fixture {
            http: AppServer::start(app).await,
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .client
            .request(method, format!("{}{path}", self.http.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Alice's representation of herself for `body`: its conclusions, block by block, in order.
    async fn represent(&self, body: Value) -> Vec<String> {
        let (status, v) = self
            .call(
                Method::POST,
                "/v3/workspaces/w/peers/alice/representation",
                Some(body),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        listed(v["representation"].as_str().unwrap())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }
}

async fn create(app: &TestApp, contents: &[&str]) -> Vec<String> {
    let items = contents
        .iter()
        .map(|c| json!({"content": c, "observerId": "alice", "observedId": "alice"}));
    app.create_conclusions("w", items).await
}

/// The conclusions a representation lists (`N. [date] content` lines), in order.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (n, rest) = l.split_once(". [")?;
            n.parse::<u32>().ok()?;
            Some(rest.split_once("] ")?.1.to_owned())
        })
        .collect()
}

fn music_in(list: &[String]) -> usize {
    list.iter().filter(|c| MUSIC.contains(&c.as_str())).count()
}

#[tokio::test]
async fn a_search_query_brings_the_relevant_conclusions_first() {
    let fx = Fixture::new().await;
    // The newest three are about other things.
    let plain = fx.represent(json!({"max_conclusions": 3})).await;
    assert_eq!(plain.len(), 3);
    assert_eq!(music_in(&plain), 0, "{plain:?}");
    // A third of the budget goes to the search, and its hit leads.
    let asked = fx
        .represent(json!({"max_conclusions": 3,
                          "search_query": "Which musical instrument does Alice play?"}))
        .await;
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[0], MUSIC[0], "{asked:?}");
    assert_eq!(music_in(&asked), 1, "{asked:?}");

    // The session context's representation of a peer takes the same options.
    let (status, ctx) = fx
        .get(
            "/v3/workspaces/w/sessions/s1/context?peer_target=alice&max_conclusions=3\
             &search_query=Which%20musical%20instrument%20does%20Alice%20play%3F",
        )
        .await;
    assert_eq!(status, 200, "{ctx}");
    let rep = listed(ctx["peer_representation"].as_str().unwrap());
    assert_eq!(rep[0], MUSIC[0], "{rep:?}");
}

#[tokio::test]
async fn search_top_k_bounds_the_search_hits() {
    let fx = Fixture::new().await;
    let query = "Alice's music: the instruments she plays and her lessons";
    for (k, music) in [(1, 1), (2, 2)] {
        let list = fx
            .represent(json!({"max_conclusions": 6, "search_query": query, "search_top_k": k}))
            .await;
        assert_eq!(list.len(), 6, "{list:?}");
        assert_eq!(music_in(&list), music, "top_k {k}: {list:?}");
        // The hits lead their block.
        assert!(
            list[..music].iter().all(|c| MUSIC.contains(&c.as_str())),
            "{list:?}"
        );
    }
}

#[tokio::test]
async fn search_max_distance_keeps_far_conclusions_out() {
    let fx = Fixture::new().await;
    let query = "Alice plays the cello in an orchestra";
    let near = fx
        .represent(json!({"max_conclusions": 3, "search_query": query,
                          "search_max_distance": 1.0}))
        .await;
    assert_eq!(near[0], MUSIC[0], "{near:?}");
    // Nothing is that near: the search's share stays empty, the newest fill the rest.
    let strict = fx
        .represent(json!({"max_conclusions": 3, "search_query": "Which sports does Alice follow on television?",
                          "search_max_distance": 0.05}))
        .await;
    assert_eq!(strict.len(), 2, "{strict:?}");
    assert_eq!(music_in(&strict), 0, "{strict:?}");
}

#[tokio::test]
async fn include_most_frequent_gives_the_most_derived_a_share() {
    let fx = Fixture::new().await;
    let plain = fx.represent(json!({"max_conclusions": 4})).await;
    assert!(!plain.iter().any(|c| c == MUSICIAN), "{plain:?}");
    let frequent = fx
        .represent(json!({"max_conclusions": 4, "include_most_frequent": true}))
        .await;
    assert!(frequent.iter().any(|c| c == MUSICIAN), "{frequent:?}");

    // The peer context includes them unless told not to (Honcho v3.0.12's default there).
    let (status, ctx) = fx
        .get("/v3/workspaces/w/peers/alice/context?max_conclusions=4")
        .await;
    assert_eq!(status, 200, "{ctx}");
    assert!(
        listed(ctx["representation"].as_str().unwrap()).contains(&MUSICIAN.to_owned()),
        "{ctx}"
    );
    let (_, ctx) = fx
        .get("/v3/workspaces/w/peers/alice/context?max_conclusions=4&include_most_frequent=false")
        .await;
    assert!(
        !listed(ctx["representation"].as_str().unwrap()).contains(&MUSICIAN.to_owned()),
        "{ctx}"
    );
}

#[tokio::test]
async fn out_of_range_search_options_are_refused_with_a_code() {
    let fx = Fixture::new().await;
    let rep = "/v3/workspaces/w/peers/alice/representation";
    for body in [
        json!({"search_query": "music", "search_top_k": 0}),
        json!({"search_query": "music", "search_top_k": 101}),
        json!({"search_query": "music", "search_max_distance": 1.5}),
        json!({"search_max_distance": -0.1}),
        json!({"max_conclusions": 0}),
    ] {
        let (status, v) = fx.call(Method::POST, rep, Some(body.clone())).await;
        assert_eq!(status, 422, "{body}: {v}");
        assert!(
            v["detail"].as_str().unwrap().contains("must be between"),
            "{v}"
        );
    }
    for path in [
        "/v3/workspaces/w/peers/alice/context?search_top_k=101",
        "/v3/workspaces/w/peers/alice/context?search_query=x&search_max_distance=2",
        "/v3/workspaces/w/sessions/s1/context?search_top_k=0",
        "/v3/workspaces/w/sessions/s1/context?peer_target=alice&search_max_distance=-1",
    ] {
        let (status, v) = fx.get(path).await;
        assert_eq!(status, 422, "{path}: {v}");
    }
}

#[tokio::test]
async fn graphql_peer_representation_takes_the_same_options() {
    let fx = Fixture::new().await;
    let app = &fx.http.app;
    let d = app
        .ok(
            "{ workspace(id: \"w\") { peer(id: \"alice\") { \
               plain: representation(maxConclusions: 3) \
               asked: representation(maxConclusions: 3, \
                 searchQuery: \"Which musical instrument does Alice play?\") \
               frequent: representation(maxConclusions: 4, includeMostFrequent: true) } } }",
            json!({}),
        )
        .await;
    let peer = &d["workspace"]["peer"];
    assert_eq!(music_in(&listed(peer["plain"].as_str().unwrap())), 0);
    assert_eq!(listed(peer["asked"].as_str().unwrap())[0], MUSIC[0]);
    assert!(listed(peer["frequent"].as_str().unwrap()).contains(&MUSICIAN.to_owned()));
    for bad in [
        "searchTopK: 0",
        "searchTopK: 101",
        "searchMaxDistance: 1.5",
        "maxConclusions: -1",
    ] {
        let (code, message) = app
            .err(
                &format!(
                    "{{ workspace(id: \"w\") {{ peer(id: \"alice\") {{ \
                     representation(searchQuery: \"music\", {bad}) }} }} }}"
                ),
                json!({}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "{bad}: {message}");
    }
}
