//! Connections that hold the server's resources without sending a request are closed: slow
//! request heads at the header-read timeout, idle kept-alive connections at the idle timeout.
//! Against the real binary, with real sockets.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{ServerProcess, TestApp};

const HEADER_READ_MS: u64 = 1000;
const IDLE_MS: u64 = 4000;

async fn server() -> (TestApp, ServerProcess) {
    server_with(HEADER_READ_MS).await
}

async fn server_with(header_read_ms: u64) -> (TestApp, ServerProcess) {
    let app = TestApp::new().await;
    let server = ServerProcess::start(
        &app._db,
        &[
            ("HONCHO_HEADER_READ_TIMEOUT_MS", &header_read_ms.to_string()),
            ("HONCHO_IDLE_TIMEOUT_MS", &IDLE_MS.to_string()),
        ],
    )
    .await;
    (app, server)
}

/// Writes `first`, then `trickle` every 250 ms, until the server closes the connection; how long
/// after `first` that was (None: still open after `give_up`).
async fn held_open(
    mut stream: TcpStream,
    first: &'static [u8],
    trickle: Option<&'static [u8]>,
    give_up: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    if stream.write_all(first).await.is_err() {
        return Some(started.elapsed());
    }
    let mut buf = [0u8; 4096];
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.tick().await;
    while started.elapsed() < give_up {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return Some(started.elapsed()),
                // An answer (a 408, say) is fine; the close is what counts.
                Ok(_) => {}
            },
            _ = tick.tick() => {
                if let Some(bytes) = trickle
                    && stream.write_all(bytes).await.is_err()
                {
                    return Some(started.elapsed());
                }
            }
        }
    }
    None
}

async fn metric(server: &ServerProcess, line_start: &str) -> f64 {
    let text = server.get_text("/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in /metrics:\n{text}"))
}

#[tokio::test]
async fn three_hundred_slow_header_connections_are_closed_and_health_keeps_answering() {
    let (_app, server) = server().await;
    let before = metric(&server, "honcho_http_connections_open ").await;
    let mut attackers = Vec::new();
    for _ in 0..300 {
        let stream = TcpStream::connect(server.addr).await.unwrap();
        // A real slowloris: a request head that never ends, one header line at a time.
        attackers.push(tokio::spawn(held_open(
            stream,
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            Some(b"X-Slow: 1\r\n"),
            Duration::from_secs(10),
        )));
    }
    // While they are open, /health answers promptly.
    let client = honcho_graphql::outbound::client();
    let mut slowest_health = Duration::ZERO;
    for _ in 0..5 {
        let started = Instant::now();
        let resp = client
            .get(server.url("/health"))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        assert!(resp.is_ok_and(|r| r.status() == 200));
        slowest_health = slowest_health.max(started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut spread = (Duration::MAX, Duration::ZERO);
    for attacker in attackers {
        let closed = attacker.await.unwrap();
        let closed = closed.expect("a slow-header connection was still open after 10 s");
        spread = (spread.0.min(closed), spread.1.max(closed));
        assert!(
            closed >= Duration::from_millis(HEADER_READ_MS - 100)
                && closed < Duration::from_millis(HEADER_READ_MS + 2500),
            "closed after {closed:?}"
        );
    }
    eprintln!(
        "300 slow-header connections closed after {spread:?}, /health at most {slowest_health:?}"
    );
    assert!(
        metric(
            &server,
            "honcho_http_connections_timed_out_total{reason=\"header_timeout\"}"
        )
        .await
            >= 300.0
    );
    // None of them is left: only the test's own kept-alive connections (each metric() call's
    // client goes away a moment after its request).
    let mut open = f64::MAX;
    for _ in 0..20 {
        open = metric(&server, "honcho_http_connections_open ").await;
        if open <= before + 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(open <= before + 2.0, "{open} open, {before} before");
    assert!(server.alive());
}

#[tokio::test]
async fn silent_connections_and_a_bare_http2_preface_are_closed_at_the_header_read_timeout() {
    let (_app, server) = server().await;
    let silent = TcpStream::connect(server.addr).await.unwrap();
    let h2 = TcpStream::connect(server.addr).await.unwrap();
    let (silent, h2) = tokio::join!(
        held_open(silent, b"", None, Duration::from_secs(8)),
        // The preface and an empty SETTINGS frame, then no stream ever.
        held_open(
            h2,
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
            None,
            Duration::from_secs(8),
        ),
    );
    for closed in [silent, h2] {
        let closed = closed.expect("still open after 8 s");
        assert!(
            closed < Duration::from_millis(HEADER_READ_MS + 2500),
            "{closed:?}"
        );
    }
}

#[tokio::test]
async fn a_kept_alive_connection_idles_until_the_idle_timeout_not_the_header_one() {
    let (_app, server) = server().await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    let answered = Instant::now();
    // Past the header-read timeout the idle connection is still usable...
    tokio::time::sleep(Duration::from_millis(HEADER_READ_MS * 2)).await;
    stream
        .write_all(b"GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let n = stream.read(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let body: Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert!(
        body["listener"]["open_connections"].as_i64().unwrap() >= 1,
        "{body}"
    );
    assert!(body["listener"]["fds_max"].as_u64().unwrap() > 0, "{body}");
    let answered_again = Instant::now();
    assert!(answered_again - answered > Duration::from_millis(HEADER_READ_MS));
    // ...and closed once it has idled for the idle timeout.
    let closed = held_open(stream, b"", None, Duration::from_secs(10))
        .await
        .expect("an idle connection was still open after 10 s");
    assert!(
        closed >= Duration::from_millis(IDLE_MS - 200)
            && closed < Duration::from_millis(IDLE_MS + 3000),
        "closed after {closed:?}"
    );
}

#[tokio::test]
async fn a_flood_of_silent_connections_past_the_descriptor_limit_does_not_stop_health() {
    // Long enough that all 300 are open at once even on a loaded machine.
    let (_app, server) = server_with(3000).await;
    // A small descriptor limit, so 300 connections run the process out, as 1,100 connections do
    // at the usual default limit of 1,024.
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), "--nofile=200:200"])
        .status()
        .expect("prlimit (util-linux)");
    assert!(limited.success());
    let flood = futures::future::join_all((0..300).map(|_| TcpStream::connect(server.addr))).await;
    let started = Instant::now();
    let resp = honcho_graphql::outbound::client()
        .get(server.url("/health"))
        .timeout(Duration::from_secs(15))
        .send()
        .await;
    assert!(
        resp.is_ok_and(|r| r.status() == 200),
        "/health did not answer"
    );
    // It waited in the backlog until timed-out connections gave their descriptors back.
    eprintln!(
        "/health answered after {:?} behind 300 silent connections",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop(flood);
    assert!(metric(&server, "honcho_http_accept_errors_total ").await >= 1.0);
    assert_eq!(metric(&server, "honcho_process_max_fds ").await, 200.0);
    assert!(server.alive());
}
