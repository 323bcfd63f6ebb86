//! Read replicas against a real streaming standby of the test cluster (tests/it/standby.rs):
//! queries read from it, everything else from the primary; a consistency token makes a read see
//! the writes before it; a lagging, stopped or restarted standby changes where reads go and
//! never fails a request.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_graphql::{Request, Variables};
use futures::StreamExt;
use honcho_graphql::graphql::{self, CONSISTENCY_TOKEN, Limits};
use honcho_graphql::store::replicas::{ReadAfter, ReadSettings, Replica, ReplicaState};
use honcho_graphql::store::{Lsn, ReadPool, Reader};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Value, json};

use crate::harness::{ServerProcess, TestApp};
use crate::standby::{Standby, standby};

const CREATE: &str = "mutation($c: String!) { createMessages(workspaceId: \"w\", sessionId: \"s\", \
                      messages: [{peerId: \"alice\", content: $c}]) { seqInSession } }";
const COUNT: &str =
    "{ workspace(id: \"w\") { session(id: \"s\") { messages(first: 1) { totalCount } } } }";

/// A test app whose queries may read from the standby's copy of its database.
async fn replica_app(standby: &Standby, max_lag_ms: u64, wait_ms: u64) -> (TestApp, Arc<ReadPool>) {
    let mut app = TestApp::new().await;
    // The standby must have the new database before the pool's first check.
    standby.catch_up().await;
    let settings = ReadSettings {
        pool: 4,
        statement_timeout: Some(Duration::from_secs(10)),
        max_lag: Duration::from_millis(max_lag_ms),
        token_wait: Duration::from_millis(wait_ms),
    };
    let pool = ReadPool::connect(&app._db.url(), &[standby.url(&app._db.name)], settings)
        .await
        .unwrap();
    app.store = app.store.clone().with_read_pool(Some(pool.clone()));
    app.schema = graphql::build_schema(app.store.clone(), &Limits::default());
    wait_for(&pool.replicas()[0], ReplicaState::Up).await;
    (app, pool)
}

async fn wait_for(replica: &Replica, state: ReplicaState) {
    let started = Instant::now();
    while replica.state() != state {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the replica is still {:?}, not {state:?}",
            replica.state()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs a request as the HTTP handler does with `x-honcho-after: after`.
async fn exec(app: &TestApp, query: &str, vars: Value, after: Option<Lsn>) -> Value {
    let mut req = Request::new(query).variables(Variables::from_json(vars));
    if let Some(lsn) = after {
        req = req.data(ReadAfter(lsn));
    }
    let resp = serde_json::to_value(graphql::execute(&app.schema, req).await).unwrap();
    assert!(resp.get("errors").is_none(), "{resp}");
    resp
}

/// Writes one message; its response's consistency token.
async fn write(app: &TestApp, content: &str) -> Lsn {
    let resp = exec(app, CREATE, json!({"c": content}), None).await;
    resp["extensions"][CONSISTENCY_TOKEN]
        .as_str()
        .unwrap_or_else(|| panic!("a mutation answers with a consistency token: {resp}"))
        .parse()
        .unwrap()
}

async fn count(app: &TestApp, after: Option<Lsn>) -> i64 {
    let resp = exec(app, COUNT, json!({}), after).await;
    resp["data"]["workspace"]["session"]["messages"]["totalCount"]
        .as_i64()
        .unwrap_or(0)
}

async fn in_recovery(reader: &Reader) -> bool {
    let row = reader
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT pg_is_in_recovery() AS r",
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get("", "r").unwrap()
}

#[tokio::test]
async fn queries_read_from_the_standby_and_mutations_from_the_primary() {
    let Some(turn) = standby().await else { return };
    let (app, pool) = replica_app(turn.standby, 60_000, 1_000).await;
    let replica = pool.replicas()[0].clone();

    // A handle routed for a query reads from a server in recovery; the store's own, the primary.
    assert!(in_recovery(app.store.routed(None).await.reader()).await);
    assert!(!in_recovery(app.store.reader()).await);

    let served = replica.statements();
    app.take_statements();
    let token = write(&app, "hello").await;
    assert_eq!(
        replica.statements(),
        served,
        "a mutation reads nothing from the replica"
    );
    assert!(app.take_statements() > 0);

    assert_eq!(count(&app, Some(token)).await, 1);
    assert!(
        replica.statements() > served,
        "the query was read from the standby"
    );
    assert_eq!(
        app.take_statements(),
        0,
        "nothing of the query ran on the primary"
    );
}

/// The guarantee, measured: every read with the token of the write before it sees that write.
/// `HONCHO_REPLICA_ITERATIONS` (default 1,000) writes, each followed at once by a read.
#[tokio::test]
async fn a_read_with_the_token_always_sees_the_write_before_it() {
    let Some(turn) = standby().await else { return };
    let (app, pool) = replica_app(turn.standby, 60_000, 50).await;
    let replica = pool.replicas()[0].clone();
    let n: i64 = std::env::var("HONCHO_REPLICA_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let (mut stale, mut from_replica) = (0, 0);
    let started = Instant::now();
    for i in 1..=n {
        let token = write(&app, &format!("message {i}")).await;
        let before = replica.statements();
        if count(&app, Some(token)).await != i {
            stale += 1;
        }
        if replica.statements() > before {
            from_replica += 1;
        }
    }
    eprintln!(
        "{n} write-then-read iterations in {:.1} s: {stale} stale, {from_replica} read from the standby, {} from the primary",
        started.elapsed().as_secs_f64(),
        n - from_replica
    );
    assert_eq!(
        stale, 0,
        "reads with a token never miss the write before them"
    );
    assert!(from_replica > 0, "the standby served some of them");
}

#[tokio::test]
async fn without_the_token_a_read_may_be_stale_and_with_it_never_is() {
    let Some(turn) = standby().await else { return };
    let (app, pool) = replica_app(turn.standby, 60_000, 100).await;
    let replica = pool.replicas()[0].clone();
    let first = write(&app, "one").await;
    assert_eq!(count(&app, Some(first)).await, 1);

    let paused = turn.standby.pause_replay().await;
    let second = write(&app, "two").await;
    let served = replica.statements();
    assert_eq!(
        count(&app, None).await,
        1,
        "without a token the standby answers with what it has replayed"
    );
    assert!(replica.statements() > served);
    let waited = Instant::now();
    assert_eq!(
        count(&app, Some(second)).await,
        2,
        "with it, the primary answers"
    );
    let waited = waited.elapsed();
    assert!(
        waited >= Duration::from_millis(100) && waited < Duration::from_secs(2),
        "after waiting the bound for the standby: {waited:?}"
    );

    drop(paused);
    let started = Instant::now();
    loop {
        let served = replica.statements();
        let seen = count(&app, Some(second)).await;
        assert_eq!(seen, 2);
        if replica.statements() > served {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the standby catches up"
        );
    }
}

#[tokio::test]
async fn a_standby_behind_the_lag_limit_takes_no_reads_until_it_catches_up() {
    let Some(turn) = standby().await else { return };
    let (app, pool) = replica_app(turn.standby, 300, 50).await;
    let replica = pool.replicas()[0].clone();

    let paused = turn.standby.pause_replay().await;
    write(&app, "while the standby is stuck").await;
    wait_for(&replica, ReplicaState::Lagging).await;
    assert!(replica.lag().unwrap() > Duration::from_millis(300));
    let served = replica.statements();
    assert_eq!(
        count(&app, None).await,
        1,
        "the primary answers, so the read is fresh"
    );
    assert_eq!(replica.statements(), served);

    drop(paused);
    wait_for(&replica, ReplicaState::Up).await;
    assert_eq!(count(&app, None).await, 1);
    assert!(
        replica.statements() > served,
        "the standby takes reads again"
    );
}

/// Readers run all along while the standby is stopped and started again: no request fails, reads
/// move to the primary, and back to the standby once a check finds it up.
#[tokio::test]
async fn a_standby_stopped_mid_run_fails_no_request_and_is_used_again_once_restarted() {
    let Some(turn) = standby().await else { return };
    let standby = turn.standby;
    let (app, pool) = replica_app(standby, 60_000, 50).await;
    let app = Arc::new(app);
    let replica = pool.replicas()[0].clone();
    let token = write(&app, "before the outage").await;

    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (requests, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let readers: Vec<_> = (0..2)
        .map(|i| {
            let (app, done, requests, failed) =
                (app.clone(), done.clone(), requests.clone(), failed.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    let after = (i == 1).then_some(token);
                    let req = Request::new(COUNT);
                    let req = match after {
                        Some(lsn) => req.data(ReadAfter(lsn)),
                        None => req,
                    };
                    let resp =
                        serde_json::to_value(graphql::execute(&app.schema, req).await).unwrap();
                    requests.fetch_add(1, Ordering::Relaxed);
                    let total = &resp["data"]["workspace"]["session"]["messages"]["totalCount"];
                    if resp.get("errors").is_some() || total != 1 {
                        eprintln!("failed: {resp}");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    let wait_for_requests = |n: usize| {
        let requests = requests.clone();
        async move {
            let target = requests.load(Ordering::Relaxed) + n;
            while requests.load(Ordering::Relaxed) < target {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    wait_for_requests(50).await;
    let before_stop = replica.statements();
    assert!(
        before_stop > 0,
        "reads went to the standby before it stopped"
    );
    tokio::task::spawn_blocking(|| standby.stop())
        .await
        .unwrap();
    wait_for(&replica, ReplicaState::Down).await;
    let down_at = replica.statements();
    wait_for_requests(100).await;
    assert_eq!(
        replica.statements(),
        down_at,
        "a stopped standby serves nothing"
    );

    tokio::task::spawn_blocking(|| standby.resume())
        .await
        .unwrap();
    wait_for(&replica, ReplicaState::Up).await;
    wait_for_requests(50).await;
    assert!(
        replica.statements() > down_at,
        "reads went back to the standby"
    );

    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    eprintln!(
        "{} requests across the standby's stop and restart, {} failed",
        requests.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no request failed");
}

/// A subscription's rows are loaded from the primary: the notification comes at commit there,
/// before any standby has the rows. With the standby's replay paused the event still arrives
/// whole.
#[tokio::test]
async fn subscriptions_load_their_rows_from_the_primary() {
    let Some(turn) = standby().await else { return };
    let (app, pool) = replica_app(turn.standby, 60_000, 50).await;
    let replica = pool.replicas()[0].clone();
    let bus = honcho_graphql::store::events::EventBus::start(&app._db.url(), 16)
        .await
        .unwrap();
    let schema =
        graphql::build_schema_with_events(app.store.clone(), &Limits::default(), Some(bus.clone()));

    let _paused = turn.standby.pause_replay().await;
    let mut events = graphql::execute_stream(
        &schema,
        Request::new(
            "subscription { messageCreated(workspaceId: \"w\") { content seqInSession peer { id } } }",
        ),
        None,
    );
    let started = Instant::now();
    while bus.subscribers() == 0 {
        if let Ok(Some(resp)) = tokio::time::timeout(Duration::from_millis(5), events.next()).await
        {
            panic!("answered before any event: {resp:?}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never subscribed"
        );
    }
    let served = replica.statements();
    write(&app, "news").await;
    let event = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the event arrives")
        .unwrap();
    let event = serde_json::to_value(event).unwrap();
    assert_eq!(
        event["data"]["messageCreated"],
        json!({"content": "news", "seqInSession": 1, "peer": {"id": "alice"}}),
        "{event}"
    );
    assert_eq!(
        replica.statements(),
        served,
        "nothing was read from the standby"
    );
}

/// The server binary with a replica: a mutation's response carries the token, the header routes
/// a read, a malformed header is refused, and `/ready` and `/metrics` show the replica.
#[tokio::test]
async fn over_http_the_token_round_trips_and_ready_and_metrics_show_the_replica() {
    let Some(turn) = standby().await else { return };
    let app = TestApp::new().await;
    turn.standby.catch_up().await;
    let replica_url = turn.standby.url(&app._db.name);
    let server = ServerProcess::start(
        &app._db,
        &[
            ("HONCHO_AUTH_SECRET", ""),
            ("HONCHO_READ_DATABASE_URL", &replica_url),
            ("HONCHO_MAX_REPLICA_LAG_MS", "60000"),
            ("HONCHO_REPLICA_WAIT_MS", "1000"),
        ],
    )
    .await;
    let http = honcho_graphql::outbound::client();
    let post = |body: Value, after: Option<String>| {
        let mut req = http.post(server.url("/graphql")).json(&body);
        if let Some(after) = after {
            req = req.header("x-honcho-after", after);
        }
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };

    let (status, written) = post(
        json!({"query": CREATE, "variables": {"c": "over http"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{written}");
    let token = written["extensions"][CONSISTENCY_TOKEN]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {written}"))
        .to_owned();
    let (status, read) = post(json!({"query": COUNT}), Some(token)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        read["data"]["workspace"]["session"]["messages"]["totalCount"], 1,
        "{read}"
    );

    let (status, refused) = post(json!({"query": COUNT}), Some("yesterday".into())).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["errors"][0]["extensions"]["code"], "BAD_REQUEST");
    assert!(
        refused["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("x-honcho-after"),
        "{refused}"
    );

    let ready = server.get_json("/ready").await;
    let name = replica_url.trim_start_matches("postgres://postgres@");
    assert_eq!(ready["replicas"][0]["replica"], name, "{ready}");
    assert_eq!(ready["replicas"][0]["state"], "up", "{ready}");
    assert!(ready["replicas"][0]["lagMs"].is_u64(), "{ready}");

    let metrics = server.get_text("/metrics").await;
    assert!(
        metrics.contains(&format!("honcho_replica_up{{replica=\"{name}\"}} 1")),
        "{metrics}"
    );
    assert!(
        metrics.contains("honcho_read_routes_total{reason="),
        "{metrics}"
    );
    assert!(
        metrics.contains("honcho_consistency_wait_seconds_count 1"),
        "{metrics}"
    );
}
