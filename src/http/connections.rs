//! The accept loop and the connections it serves, in place of `axum::serve`, which runs hyper
//! without a timer: a connection that never finished its request head, or sat idle, was held for
//! ever (300 slow-header connections stayed open, and 1,100 header-less ones used up the file
//! descriptors until `/health` failed).
//!
//! Each connection has two deadlines, the same for HTTP/1 and HTTP/2, kept by a watchdog beside
//! hyper rather than inside it (hyper's own header timer for HTTP/1 also runs while a kept-alive
//! connection waits for its next request, which would make the idle time as short as the header
//! time):
//! - **header read**: from a new connection's accept, or from the first byte that arrives on an
//!   idle one, a request must have started (its head read whole) within the header-read timeout;
//! - **idle**: a connection with no request in flight and no byte received is closed after the
//!   idle timeout.
//!
//! A request in flight is bounded by the request timeout instead (`HONCHO_REQUEST_TIMEOUT_MS`).
//! A connection upgraded to a WebSocket leaves both: its own deadlines are `serve_ws`'s.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::listener::metrics;

/// How long connections may wait for a request.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionTimeouts {
    /// From accept, or from the first byte on an idle connection, to a request's whole head.
    pub header_read: Duration,
    /// A connection with no request in flight and nothing received is closed after this.
    pub idle: Duration,
}

impl Default for ConnectionTimeouts {
    fn default() -> Self {
        ConnectionTimeouts {
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(75),
        }
    }
}

/// After an accept error (most often: out of file descriptors) the listener waits this long
/// before accepting again, instead of spinning on the error.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting and waits for the
/// open connections' requests to finish (idle connections close at once).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    timeouts: ConnectionTimeouts,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let (stop, stopping) = watch::channel(false);
    // Each connection's task holds a receiver; the sender sees all of them dropped when the last
    // connection has finished.
    let (finished, open) = watch::channel(());
    futures::pin_mut!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                metrics().accepted.inc();
                let app = app.clone();
                let stopping = stopping.clone();
                let open = open.clone();
                tokio::spawn(async move {
                    serve_connection(stream, peer, app, timeouts, stopping).await;
                    drop(open);
                });
            }
            // The peer gave up before we took it: nothing to wait for.
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                metrics().accept_errors.inc();
                tracing::warn!(error = %e, "accept failed; backing off");
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    () = &mut shutdown => break,
                }
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    drop(open);
    finished.closed().await;
    Ok(())
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// One connection's activity, shared by its socket (bytes arriving), its service (requests
/// starting and ending) and its watchdog.
struct Activity {
    in_flight: AtomicUsize,
    /// No request in flight and no byte received since the last one ended (or since accept).
    waiting: AtomicBool,
    /// Since when the connection has had no request in flight, and when the first byte came
    /// after that (None: none yet).
    idle: Mutex<(Instant, Option<Instant>)>,
    /// Whether any request has started (a new connection must start one within the header-read
    /// timeout; a used one may then idle).
    used: AtomicBool,
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        metrics().open.inc();
        Activity {
            in_flight: AtomicUsize::new(0),
            waiting: AtomicBool::new(true),
            idle: Mutex::new((Instant::now(), None)),
            used: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, (Instant, Option<Instant>)> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called on every read that returned bytes; costs one relaxed load unless it is the first
    /// byte of an idle period.
    fn received(&self) {
        if self.waiting.load(Ordering::Relaxed) && self.waiting.swap(false, Ordering::AcqRel) {
            self.idle().1 = Some(Instant::now());
            self.changed.notify_one();
        }
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        self.used.store(true, Ordering::Relaxed);
        self.waiting.store(false, Ordering::Release);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_one();
        InFlight(self.clone())
    }

    /// When the connection is to be closed, and why; None while a request is in flight.
    fn deadline(&self, timeouts: &ConnectionTimeouts) -> Option<(Instant, &'static str)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let (since, first_byte) = *self.idle();
        Some(match first_byte {
            Some(at) => (at + timeouts.header_read, "header_timeout"),
            None if !self.used.load(Ordering::Relaxed) => {
                (since + timeouts.header_read, "header_timeout")
            }
            None => (since + timeouts.idle, "idle_timeout"),
        })
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        metrics().open.dec();
    }
}

/// A request in flight on its connection; dropped when its response is ready (or the request
/// is abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0.idle() = (Instant::now(), None);
            self.0.waiting.store(true, Ordering::Release);
        }
        self.0.changed.notify_one();
    }
}

/// Serves one connection; each request carries the peer's address (axum's `ConnectInfo`), as
/// `axum::serve` with connect info gives it.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    timeouts: ConnectionTimeouts,
    mut stopping: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = requests.request_started();
        let app = app.clone();
        async move {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let response = app.oneshot(request).await;
            drop(in_flight);
            response
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // WebSockets over HTTP/2 (RFC 8441), as axum::serve allows.
    builder.http2().enable_connect_protocol();
    let conn = builder.serve_connection_with_upgrades(io, service);
    futures::pin_mut!(conn);
    let mut shutting_down = false;
    loop {
        let deadline = activity.deadline(&timeouts);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = activity.changed.notified() => {}
            Ok(()) = stopping.changed(), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
            () = sleep_until(deadline) => {
                // Re-checked: a request may have started as the timer fired.
                if let Some((at, reason)) = activity.deadline(&timeouts)
                    && at <= Instant::now()
                {
                    metrics().closed.with_label_values(&[reason]).inc();
                    tracing::debug!(reason, "closing a connection that waited too long");
                    break;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<(Instant, &'static str)>) {
    match deadline {
        Some((at, _)) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The socket, telling its connection's [`Activity`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
