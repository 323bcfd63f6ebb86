//! Registered persisted documents (APQ) with auth on: the cache every caller shares is filled by
//! key holders only, one document at most `APQ_MAX_DOCUMENT_BYTES`, so anonymous bodies of the
//! cache's size no longer empty it (they emptied it once: every registered document then
//! answered PERSISTED_QUERY_NOT_FOUND).

use honcho_graphql::auth::KeySpec;
use honcho_graphql::graphql::{Limits, build_schema_with_auth};
use honcho_graphql::http::persisted::{APQ_MAX_DOCUMENT_BYTES, sha256_hex};
use honcho_graphql::http::{HttpOptions, router_with};
use serde_json::{Value, json};

use crate::harness::{TestApp, auth, bearer};

/// POSTs `document` (None: the hash alone) with its persisted-query hash; the status and body.
async fn post(base: &str, key: Option<&str>, hash: &str, document: Option<&str>) -> (u16, Value) {
    let mut body = json!({"extensions": {"persistedQuery": {"version": 1, "sha256Hash": hash}}});
    if let Some(d) = document {
        body["query"] = json!(d);
    }
    let mut req = honcho_graphql::outbound::client()
        .post(format!("{base}/graphql"))
        .json(&body);
    if let Some(k) = key {
        req = req.header("authorization", k);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no coded error: {body}"))
}

#[tokio::test]
async fn with_auth_on_only_a_key_registers_and_no_anonymous_flood_evicts_a_key_holders_document() {
    let app = TestApp::new().await;
    let schema = build_schema_with_auth(app.store.clone(), &Limits::default(), auth());
    let router = router_with(schema, app.store.clone(), HttpOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let key = bearer(KeySpec {
        workspace: Some("w".into()),
        ..KeySpec::default()
    });

    // A key holder registers a document; anyone may then run it by its hash.
    let kept = "query Kept { __typename }";
    let (status, body) = post(&base, Some(&key), &sha256_hex(kept), Some(kept)).await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!({"__typename": "QueryRoot"}))
    );

    // Without a key the document runs, and nothing is registered.
    let mine = "query Mine { __typename }";
    let (status, body) = post(&base, None, &sha256_hex(mine), Some(mine)).await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!({"__typename": "QueryRoot"}))
    );
    let (_, body) = post(&base, None, &sha256_hex(mine), None).await;
    assert_eq!(code(&body), "PERSISTED_QUERY_NOT_FOUND");

    // A flood of bodies of the cache's size (two here), refused before they are hashed.
    let flood = format!("{}{{ __typename }}", " ".repeat(16_000_000));
    for key in [None, Some(key.as_str())] {
        let (status, body) = post(&base, key, &sha256_hex(&flood), Some(&flood)).await;
        assert_eq!((status, code(&body)), (400, "BAD_REQUEST"), "{body}");
    }
    // Documents of the largest size registered, a cache's worth and more, without a key (and
    // with a bad one): none is kept, none evicts.
    let mut sent = 0;
    let mut i = 0;
    while sent <= 16 * 1024 * 1024 {
        let head = format!("query Q{i} {{ __typename }}");
        let doc = format!("{head}{}", " ".repeat(APQ_MAX_DOCUMENT_BYTES - head.len()));
        let key = [None, Some("Bearer garbage")][i % 2];
        let (status, _) = post(&base, key, &sha256_hex(&doc), Some(&doc)).await;
        assert_eq!(status, 200);
        sent += doc.len();
        i += 1;
    }
    // A key does not make an oversized document registrable: refused before it is kept.
    let just_over = format!("{}{{ __typename }}", " ".repeat(APQ_MAX_DOCUMENT_BYTES));
    let (status, body) = post(&base, Some(&key), &sha256_hex(&just_over), Some(&just_over)).await;
    assert_eq!((status, code(&body)), (400, "BAD_REQUEST"), "{body}");
    let (_, body) = post(&base, Some(&key), &sha256_hex(&just_over), None).await;
    assert_eq!(code(&body), "PERSISTED_QUERY_NOT_FOUND");

    let (status, body) = post(&base, None, &sha256_hex(kept), None).await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!({"__typename": "QueryRoot"})),
        "{body}"
    );
}
