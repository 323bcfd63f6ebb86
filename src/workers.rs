//! Background workers (the deriver's, the webhook senders): how they are started and named.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A kind of background worker, of which [`spawn`] starts several.
pub trait Worker: Send + Sync + 'static {
    /// What its workers' names say before their index.
    const KIND: &'static str;

    /// One worker, named `name` (the `index`th), until `shutdown` turns true.
    fn work(
        self: Arc<Self>,
        name: String,
        index: u32,
        shutdown: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + Send;
}

/// Starts `n` workers of `worker`. A name is unique among the processes sharing the database
/// (`host:pid:kind index`), so the leases a worker holds say which process holds them.
pub fn spawn<W: Worker>(
    worker: &Arc<W>,
    n: u32,
    shutdown: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into());
    let pid = std::process::id();
    (0..n)
        .map(|i| {
            let name = format!("{host}:{pid}:{}{i}", W::KIND);
            tokio::spawn(worker.clone().work(name, i, shutdown.clone()))
        })
        .collect()
}
