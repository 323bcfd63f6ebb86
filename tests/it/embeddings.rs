use std::sync::Arc;

use honcho_graphql::store::Store;
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database};
use serde_json::json;

use crate::harness::{TestApp, blank_database, minilm};

#[tokio::test]
async fn written_messages_get_embeddings_except_blank_ones() {
    let app = TestApp::with_embedder().await;
    app.ok(
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [
            {peerId: \"a\", content: \"My favorite color is blue\"}, {peerId: \"a\", content: \"   \"}]) { id } }",
        json!({}),
    )
    .await;
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages WHERE embedding IS NOT NULL")
            .await,
        1
    );
    assert_eq!(
        app.sql_i64(
            "SELECT count(*) FROM messages WHERE embedding IS NULL AND btrim(content) = ''"
        )
        .await,
        1
    );
    // Unit length, as the model normalises (within 1e-4), and 384 dimensions.
    assert_eq!(
        app.sql_i64(
            "SELECT count(*) FROM messages WHERE embedding IS NOT NULL \
             AND abs(vector_norm(embedding) - 1) < 1e-4 AND vector_dims(embedding) = 384"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn a_dimension_mismatch_stops_start_up_and_reembed_resize_fixes_it() {
    let guard = blank_database().await;
    let db = Database::connect(guard.url()).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    // A database built for a 768-dimensional model.
    db.execute_unprepared(
        "ALTER TABLE messages ALTER COLUMN embedding TYPE vector(768) USING NULL;
         UPDATE honcho_meta SET value = '768' WHERE key = 'embedding_dims';",
    )
    .await
    .unwrap();
    let store = Store::new(db.clone()).with_embedder(Some(minilm()));
    let err = store.check_embedder().await.unwrap_err().to_string();
    assert!(err.contains("768") && err.contains("384"), "{err}");
    assert!(
        err.contains("honcho-graphql reembed --resize"),
        "names the fix: {err}"
    );

    store.reembed(false, true, &()).await.unwrap();
    store.check_embedder().await.unwrap();
    db.close().await.unwrap();
}

#[tokio::test]
async fn a_different_model_of_the_same_dimension_is_refused_too() {
    let app = TestApp::with_embedder().await;
    app.store.check_embedder().await.unwrap();
    app.store
        .db()
        .execute_unprepared(
            "UPDATE honcho_meta SET value = 'some-other-model' WHERE key = 'embedding_model'",
        )
        .await
        .unwrap();
    let err = app.store.check_embedder().await.unwrap_err().to_string();
    assert!(err.contains("reembed --all"), "{err}");
}

#[tokio::test]
async fn reembed_fills_in_missing_embeddings() {
    let app = TestApp::new().await; // written without an embedder
    app.ok(
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [
            {peerId: \"a\", content: \"one\"}, {peerId: \"a\", content: \"two\"}]) { id } }",
        json!({}),
    )
    .await;
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages WHERE embedding IS NULL")
            .await,
        2
    );
    let store = app.store.clone().with_embedder(Some(minilm()));
    assert_eq!(store.reembed(false, false, &()).await.unwrap(), 2);
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM messages WHERE embedding IS NULL")
            .await,
        0
    );
}

/// An embedder that only names a model: enough for the start-up check.
struct Named(&'static str);

#[async_trait::async_trait]
impl honcho_graphql::embed::Embedder for Named {
    fn dims(&self) -> usize {
        384
    }
    fn model_id(&self) -> &str {
        self.0
    }
    async fn embed(
        &self,
        _texts: &[String],
    ) -> Result<Vec<Vec<f32>>, honcho_graphql::embed::EmbedError> {
        unreachable!("the start-up check embeds nothing")
    }
}

#[tokio::test]
async fn of_two_instances_starting_at_once_with_different_models_one_is_refused() {
    let app = TestApp::new().await;
    for round in 0..10 {
        app.store
            .db()
            .execute_unprepared("DELETE FROM honcho_meta WHERE key = 'embedding_model'")
            .await
            .unwrap();
        let a = app
            .store
            .clone()
            .with_embedder(Some(Arc::new(Named("model-a"))));
        let b = app
            .store
            .clone()
            .with_embedder(Some(Arc::new(Named("model-b"))));
        let (ra, rb) = tokio::join!(a.check_embedder(), b.check_embedder());
        assert!(
            ra.is_ok() != rb.is_ok(),
            "round {round}: exactly one starts ({ra:?}, {rb:?})"
        );
        let refused = ra.err().or(rb.err()).unwrap().to_string();
        assert!(refused.contains("reembed --all"), "{refused}");
    }
}

/// Cosine similarity of the stored vector of the message at `seq` in session `s` with `v`.
async fn stored_cosine(app: &TestApp, seq: i64, v: &[f32]) -> f64 {
    let literal = format!(
        "[{}]",
        v.iter().map(f32::to_string).collect::<Vec<_>>().join(",")
    );
    let row = app
        .store
        .db()
        .query_one_raw(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "SELECT 1 - (embedding <=> $1::vector) AS c FROM messages \
             WHERE session_name = 's' AND seq_in_session = $2",
            [literal.into(), seq.into()],
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get("", "c").unwrap()
}

#[tokio::test]
async fn a_message_vector_holds_the_turn_before_it_and_reembed_recomputes_it() {
    use honcho_graphql::embed::message_text;
    let app = TestApp::with_embedder().await;
    let create = "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }";
    app.ok(
        create,
        json!({"m": [{"peerId": "melanie", "content": "Did you finally go to the pottery class?"},
                     {"peerId": "caroline", "content": "Yes, last week!"}]}),
    )
    .await;
    // The next batch's first message takes its context from the stored session.
    app.ok(
        create,
        json!({"m": [{"peerId": "melanie", "content": "Wow, how was it?"}]}),
    )
    .await;
    let texts = [
        message_text(&[], "melanie", "Did you finally go to the pottery class?"),
        message_text(
            &[("melanie", "Did you finally go to the pottery class?")],
            "caroline",
            "Yes, last week!",
        ),
        message_text(
            &[("caroline", "Yes, last week!")],
            "melanie",
            "Wow, how was it?",
        ),
        "Yes, last week!".to_owned(),
    ];
    let v = minilm().embed(&texts).await.unwrap();
    for seq in 1..=3 {
        let c = stored_cosine(&app, seq, &v[seq as usize - 1]).await;
        assert!(c > 0.999, "seq {seq}: cosine {c}");
    }
    assert!(
        stored_cosine(&app, 2, &v[3]).await < 0.95,
        "not the reply alone"
    );

    // Vectors of another scheme (the reply alone), as an older server wrote them: reembed --all
    // puts the contextual ones back.
    let alone = format!(
        "[{}]",
        v[3].iter()
            .map(f32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    app.store
        .db()
        .execute_unprepared(&format!(
            "UPDATE messages SET embedding = '{alone}' WHERE seq_in_session = 2"
        ))
        .await
        .unwrap();
    assert!(stored_cosine(&app, 2, &v[3]).await > 0.999);
    app.store.reembed(true, false, &()).await.unwrap();
    for seq in 1..=3 {
        let c = stored_cosine(&app, seq, &v[seq as usize - 1]).await;
        assert!(c > 0.999, "after reembed, seq {seq}: cosine {c}");
    }
}

#[tokio::test]
async fn a_conclusion_vector_holds_its_peers_ids_and_reembed_recomputes_it() {
    use honcho_graphql::embed::conclusion_text;
    let app = TestApp::with_embedder().await;
    app.ok(
        "mutation { a: getOrCreatePeer(workspaceId: \"ws\", id: \"alice\") { id }
                    b: getOrCreatePeer(workspaceId: \"ws\", id: \"bob\") { id } }",
        json!({}),
    )
    .await;
    app.ok(
        "mutation { createConclusions(workspaceId: \"ws\", conclusions: [
            {content: \"works night shifts\", observerId: \"alice\", observedId: \"bob\"}]) { id } }",
        json!({}),
    )
    .await;
    let texts = [
        conclusion_text("alice", "bob", "works night shifts"),
        "works night shifts".to_owned(),
    ];
    let v = minilm().embed(&texts).await.unwrap();
    let cosine = |v: Vec<f32>| {
        let app = &app;
        async move {
            let literal = format!(
                "[{}]",
                v.iter().map(f32::to_string).collect::<Vec<_>>().join(",")
            );
            app.sql_one::<f64>(&format!(
                "SELECT 1 - (embedding <=> '{literal}'::vector) FROM conclusions"
            ))
            .await
        }
    };
    assert!(cosine(v[0].clone()).await > 0.999);
    assert!(cosine(v[1].clone()).await < 0.95, "not the content alone");
    app.store
        .db()
        .execute_unprepared("UPDATE conclusions SET embedding = NULL")
        .await
        .unwrap();
    app.store.reembed(true, false, &()).await.unwrap();
    assert!(
        cosine(v[0].clone()).await > 0.999,
        "reembed writes the same text"
    );
}

#[tokio::test]
async fn vectors_of_an_older_server_are_reported_until_reembed_all_recomputes_them() {
    let app = TestApp::with_embedder().await;
    app.ok(
        "mutation { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: [
            {peerId: \"a\", content: \"My favorite color is blue\"}]) { id } }",
        json!({}),
    )
    .await;
    let router = honcho_graphql::http::router(app.schema.clone(), app.store.clone(), 1 << 20);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ready = format!("http://{}/ready", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let ready = || crate::harness::get_json(&ready);
    // A database this server wrote from the start holds only current vectors.
    assert!(!app.store.vectors_predate_context().await.unwrap());
    assert!(ready().await.get("vectors").is_none());

    // Upgrading a database that holds vectors (the marker's migration run again over them).
    let all = Migrator::migrations();
    let marker = all
        .iter()
        .position(|m| m.name() == "m20261201_000061_embedding_text_marker")
        .unwrap();
    let db = app.store.db();
    Migrator::down(db, Some((all.len() - marker) as u32))
        .await
        .unwrap();
    Migrator::up(db, None).await.unwrap();
    assert!(app.store.vectors_predate_context().await.unwrap());
    assert_eq!(
        ready().await["vectors"]["fix"],
        "honcho-graphql reembed --all"
    );
    // Filling in missing vectors is not enough; recomputing them all is.
    app.store.reembed(false, false, &()).await.unwrap();
    assert!(app.store.vectors_predate_context().await.unwrap());
    app.store.reembed(true, false, &()).await.unwrap();
    assert!(!app.store.vectors_predate_context().await.unwrap());
    assert!(ready().await.get("vectors").is_none());
    server.abort();
}
