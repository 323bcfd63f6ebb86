//! Writes through PgBouncer in transaction mode, events on a direct connection (run by hand).

use super::*;

/// Writes through PgBouncer in transaction mode, events on a direct connection; and shows that a
/// listener behind the bouncer hears nothing. HONCHO_PGBOUNCER_URL = the bouncer without a
/// database (e.g. `postgres://postgres@127.0.0.1:6439`), forwarding every database to the test
/// server (`* = host=... port=...`), `pool_mode = transaction`, and `max_prepared_statements > 0`
/// (PgBouncer >= 1.21): sqlx names every prepared statement, which older bouncers (Debian 12 has
/// 1.18) mix up between clients ("prepared statement sqlx_s_N already exists"); sqlx's
/// `statement-cache-capacity=0` does not help, it still names them. HONCHO_PGBOUNCER_PARAMS is
/// appended to the bouncer URL (e.g. `?sslmode=disable`).
#[tokio::test]
#[ignore = "needs a PgBouncer (HONCHO_PGBOUNCER_URL)"]
async fn through_pgbouncer_in_transaction_mode() {
    let Ok(bouncer) = std::env::var("HONCHO_PGBOUNCER_URL") else {
        crate::harness::skip("HONCHO_PGBOUNCER_URL is not set");
        return;
    };
    let suffix = std::env::var("HONCHO_PGBOUNCER_PARAMS").unwrap_or_default();
    let app = TestApp::new().await;
    let via_bouncer = format!("{bouncer}/{}{suffix}", app._db.name);
    let store = Store::connect(&via_bouncer, 10, None).await.unwrap();
    let bus = EventBus::start(&app._db.url(), 1024).await.unwrap();
    let schema = graphql::build_schema_with_events(store, &Limits::default(), Some(bus.clone()));
    let a = Instance {
        addr: "127.0.0.1:9".parse().unwrap(),
        bus,
        schema,
        store: app.store.clone(),
        _server: None,
    };
    let mut sub = a
        .subscribe(
            "subscription { messageCreated(workspaceId: \"ws\", sessionId: \"chat\") { seqInSession peer { id } } }",
            json!({}),
        )
        .await;
    // 16 concurrent writers, 3 messages each, through the bouncer: the per-session advisory lock
    // is transaction-scoped, so transaction pooling keeps seqs gapless.
    create_concurrently(&a.schema, 16, |w| {
        msgs(&format!("p{}", w % 4), &["x", "y", "z"])
    })
    .await;
    let got = take(&mut sub, 48, Duration::from_secs(20)).await;
    assert_eq!(seqs(&got), (1..=48).collect::<Vec<_>>());
    // A listener behind the bouncer: its LISTEN ran on a pooled server connection that went back
    // to the pool. (Its notifications then make PgBouncer close that server connection, under
    // whichever client holds it: never point HONCHO_EVENTS_DATABASE_URL at transaction pooling.)
    let deaf = EventBus::start(&format!("{bouncer}/{}{suffix}", app._db.name), 16)
        .await
        .unwrap();
    write_one(&a.store, "chat", "direct", "written past the bouncer").await;
    assert_eq!(take(&mut sub, 1, Duration::from_secs(10)).await.len(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        deaf.notices_received(),
        0,
        "LISTEN through transaction pooling hears nothing: the listener needs a session"
    );
}
