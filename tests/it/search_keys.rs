//! Conclusions as search keys (docs/search.md): a message is found through the explicit
//! conclusion the deriver drew from it, within the search's scope and filters, for callers who
//! may read conclusions, until the conclusion is deleted or the server turns keys off.

use std::time::Duration;

use honcho_graphql::auth::KeySpec;
use honcho_graphql::embed::conclusion_text;
use honcho_graphql::graphql::{self, Limits};
use honcho_graphql::store::queue::{ClaimRules, NewFact};
use honcho_graphql::store::search::SearchScope;
use honcho_graphql::store::search_keys::SearchKeys;
use serde_json::{Value, json};

use crate::harness::{AppServer, TestApp, bearer};

/// Alice's turns never say "kitten"; what the deriver concluded from the first one does.
const TURNS: &[(&str, &str)] = &[
    (
        "alice",
        "Guess what, I signed the papers and she came home with me yesterday!",
    ),
    ("bob", "Wow, that's awesome!"),
    ("alice", "The weather has been crazy this week."),
    ("bob", "Traffic was a nightmare this morning."),
];
const CUE: &str = "signed the papers";
const FACT: &str = "Alice adopted a kitten";

/// A key of workspace `ws`, of one of its peers or sessions when given.
fn key_of(peer: Option<&str>, session: Option<&str>) -> String {
    bearer(KeySpec {
        workspace: Some("ws".into()),
        peer: peer.map(Into::into),
        session: session.map(Into::into),
        ..KeySpec::default()
    })
}

async fn say(app: &TestApp, key: Option<&str>, session: &str, turns: &[(&str, &str)]) {
    let m: Vec<Value> = turns
        .iter()
        .map(|(p, c)| json!({"peerId": p, "content": c}))
        .collect();
    let out = app
        .exec_as(
            key,
            "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", \
             sessionId: $s, messages: $m) { id } }",
            json!({"s": session, "m": m}),
        )
        .await;
    assert!(out["errors"].is_null(), "{out}");
}

/// Does what a deriver does with every queued batch, through the same store calls, as a model
/// that concludes `FACT` about alice (alice observing herself) from the message holding `CUE`
/// and nothing else. Returns the conclusion's id.
async fn derive(app: &TestApp) -> String {
    let rules = ClaimRules {
        ready_tokens: 1,
        ready_after: Duration::ZERO,
        max_batch_tokens: 100_000,
        lease: Duration::from_secs(60),
    };
    let mut id = None;
    while let Some(claim) = app.store.claim_unit("test", rules).await.unwrap() {
        let mut facts = Vec::new();
        if claim.observer == "alice" && claim.observed == "alice" {
            for m in &claim.message_ids {
                let content: String = app
                    .sql_one(&format!("SELECT content FROM messages WHERE id = {m}"))
                    .await;
                if content.contains(CUE) {
                    let embedding = match app.store.embedder() {
                        Some(e) => Some(
                            e.embed(&[conclusion_text("alice", "alice", FACT)])
                                .await
                                .unwrap()
                                .remove(0),
                        ),
                        None => None,
                    };
                    facts.push(NewFact {
                        content: FACT.into(),
                        embedding,
                        message_ids: vec![*m],
                    });
                }
            }
        }
        let out = app
            .store
            .complete_batch(&claim, &facts, &[], 0.92)
            .await
            .unwrap();
        if let Some(c) = out.facts.first() {
            id = Some(c.id.clone());
        }
    }
    id.expect("the fact was derived")
}

/// The contents a GraphQL search returns, best first: the workspace's own search (`on` empty),
/// or that of `on` (`peer(id: "alice")`, `session(id: "s")`).
async fn found(app: &TestApp, key: Option<&str>, on: &str, query: &str) -> Vec<String> {
    let search = "search(query: $q) { ... on MessageHits { results { content } } }";
    let selection = if on.is_empty() {
        search.to_owned()
    } else {
        format!("{on} {{ {search} }}")
    };
    let out = app
        .exec_as(
            key,
            &format!("query($q: String!) {{ workspace(id: \"ws\") {{ {selection} }} }}"),
            json!({"q": query}),
        )
        .await;
    assert!(out["errors"].is_null(), "{out}");
    let mut v = &out["data"]["workspace"];
    if let Some((name, _)) = on.split_once('(') {
        v = &v[name];
    }
    v["search"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

async fn store_search(app: &TestApp, scope: SearchScope<'_>, filters: Value) -> Vec<String> {
    app.store
        .search(scope, "kitten", &filters, 10, SearchKeys::WithConclusions)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect()
}

#[tokio::test]
async fn a_message_is_found_through_the_conclusion_drawn_from_it_until_it_is_deleted() {
    let app = TestApp::new().await.deriving();
    say(&app, None, "s", TURNS).await;
    assert!(found(&app, None, "", "kitten").await.is_empty());

    let id = derive(&app).await;
    let cited = [TURNS[0].1.to_owned()];
    assert_eq!(found(&app, None, "", "kitten").await, cited);
    assert_eq!(
        found(&app, None, "session(id: \"s\")", "kitten").await,
        cited
    );
    assert_eq!(
        found(&app, None, "peer(id: \"alice\")", "kitten").await,
        cited
    );
    // Scope and filters still decide which messages a search may return.
    assert!(
        found(&app, None, "peer(id: \"bob\")", "kitten")
            .await
            .is_empty()
    );
    let by = |peer: &str| json!({"peer_id": peer});
    let scope = SearchScope::Workspace("ws");
    assert!(store_search(&app, scope, by("bob")).await.is_empty());
    assert_eq!(store_search(&app, scope, by("alice")).await, cited);
    // A caller that may not rank by conclusions does not.
    assert!(
        app.store
            .search(
                SearchScope::Workspace("ws"),
                "kitten",
                &Value::Null,
                10,
                SearchKeys::Messages
            )
            .await
            .unwrap()
            .is_empty()
    );

    app.store.delete_conclusion("ws", &id).await.unwrap();
    assert!(found(&app, None, "", "kitten").await.is_empty());
}

#[tokio::test]
async fn the_server_setting_turns_conclusion_keys_off() {
    let mut app = TestApp::new().await.deriving();
    say(&app, None, "s", TURNS).await;
    derive(&app).await;
    assert_eq!(found(&app, None, "", "kitten").await.len(), 1);

    app.store = app.store.clone().with_conclusion_keys(false);
    app.schema = graphql::build_schema(app.store.clone(), &Limits::default());
    assert!(found(&app, None, "", "kitten").await.is_empty());
    assert!(
        store_search(&app, SearchScope::Workspace("ws"), Value::Null)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn only_keys_that_may_read_conclusions_search_by_them() {
    let app = TestApp::new().await.deriving().auth_on();
    let admin = bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    });
    let (workspace, alice) = (key_of(None, None), key_of(Some("alice"), None));
    let session = key_of(None, Some("s"));
    say(&app, Some(&admin), "s", TURNS).await;
    derive(&app).await;

    let cited = [TURNS[0].1.to_owned()];
    assert_eq!(found(&app, Some(&admin), "", "kitten").await, cited);
    assert_eq!(found(&app, Some(&workspace), "", "kitten").await, cited);
    assert_eq!(
        found(&app, Some(&workspace), "session(id: \"s\")", "kitten").await,
        cited
    );
    // Alice's key reads her messages and her session, not the workspace's conclusions: her
    // searches rank by the messages alone.
    assert!(
        found(&app, Some(&alice), "peer(id: \"alice\")", "kitten")
            .await
            .is_empty()
    );
    assert!(
        found(&app, Some(&alice), "session(id: \"s\")", "kitten")
            .await
            .is_empty()
    );
    assert!(
        found(&app, Some(&session), "session(id: \"s\")", "kitten")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn with_an_embedder_the_nearest_conclusions_raise_the_messages_they_cite() {
    let app = TestApp::with_embedder().await.deriving();
    let mut turns: Vec<(&str, &str)> = TURNS.to_vec();
    let filler = [
        ("bob", "I've been so busy with work lately."),
        ("alice", "I made the best pasta last night."),
        ("bob", "We should grab coffee sometime soon."),
        ("alice", "The kids kept me up all night again."),
        ("bob", "My cousin just got a new puppy, so cute."),
        (
            "alice",
            "I can't believe it's already the end of the month.",
        ),
    ];
    turns.extend(filler);
    say(&app, None, "s", &turns).await;
    let cited = TURNS[0].1.to_owned();
    let question = "Does Alice have a pet cat?";
    let before = found(&app, None, "", question).await;
    derive(&app).await;
    let after = found(&app, None, "", question).await;
    assert_eq!(after.first(), Some(&cited), "{after:#?}");
    assert_ne!(before.first(), Some(&cited), "{before:#?}");
}

#[tokio::test]
async fn rest_searches_rank_by_conclusions_for_the_same_keys() {
    let app = TestApp::new().await.deriving().auth_on();
    let (workspace, alice) = (key_of(None, None), key_of(Some("alice"), None));
    say(&app, Some(&workspace), "s", TURNS).await;
    derive(&app).await;
    let server = AppServer::start(app).await;
    let search = |key: String, path: &'static str| {
        let req = server
            .client
            .post(format!("{}/v3/workspaces/ws/{path}", server.base))
            .header("authorization", key)
            .json(&json!({"query": "kitten"}));
        async move {
            let found: Value = req.send().await.unwrap().json().await.unwrap();
            found
                .as_array()
                .unwrap_or_else(|| panic!("{found}"))
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let cited = [TURNS[0].1.to_owned()];
    assert_eq!(search(workspace.clone(), "search").await, cited);
    assert_eq!(search(workspace, "peers/alice/search").await, cited);
    assert!(search(alice, "peers/alice/search").await.is_empty());
}
