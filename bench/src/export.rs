//! Workload 14: export and import throughput (messages/s), and an export's peak memory at the
//! small and the big workspace (docs/export.md). The export runs in a child process of its own
//! (this binary again, with [`CHILD`] set), so its peak RSS is the export's alone, not the
//! seeding's or the other workloads'; the import runs here, as a copy of the big workspace under
//! another name in the same database, with the file's vectors (same model).

use std::time::Instant;

use anyhow::Context as _;
use futures::StreamExt;
use honcho_graphql::embed::Embedder;
use honcho_graphql::store::Store;
use honcho_graphql::store::export::ImportOptions;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::ThroughputResult;
use crate::common::connect;

/// Set (to a workspace name) in the child that exports.
pub const CHILD: &str = "HONCHO_BENCH_EXPORT_CHILD";

/// What the exporting child reports on stdout.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ExportRun {
    pub workspace: String,
    pub messages: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// The child's peak resident set (VmHWM), in MiB.
    pub peak_rss_mib: f64,
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The child: exports `workspace` to a file and prints an [`ExportRun`].
pub async fn child(workspace: &str) -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL")?;
    let store = Store::new(connect(&url, 2).await?);
    let messages = store.export_counts(workspace).await?.messages;
    let path = out_path(workspace);
    let t = Instant::now();
    let mut stream = store.export_workspace(workspace).await?;
    let mut file = std::fs::File::create(&path)?;
    let mut bytes = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        bytes += chunk.len() as u64;
        std::io::Write::write_all(&mut file, &chunk)?;
    }
    let seconds = t.elapsed().as_secs_f64();
    let run = ExportRun {
        workspace: workspace.to_owned(),
        messages,
        bytes,
        seconds,
        peak_rss_mib: peak_rss_mib(),
    };
    println!("{}", serde_json::to_string(&run)?);
    Ok(())
}

fn out_path(workspace: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("export-{workspace}.jsonl.zst"))
}

/// Exports each workspace in a child, then imports the last (the biggest) as a copy here.
pub async fn run(
    db_url: &str,
    minilm: &Arc<dyn Embedder>,
    workspaces: &[&str],
) -> anyhow::Result<(Vec<ThroughputResult>, Vec<ExportRun>)> {
    let store = Store::new(connect(db_url, 4).await?).with_embedder(Some(minilm.clone()));
    // Records the model of the seeded vectors, as a server's start does: the file names it.
    store.check_embedder().await?;
    let mut runs = Vec::new();
    let mut out = Vec::new();
    for ws in workspaces {
        eprintln!("14 export {ws} (child process)");
        let child = std::process::Command::new(std::env::current_exe()?)
            .env(CHILD, ws)
            .env("DATABASE_URL", db_url)
            .output()?;
        anyhow::ensure!(
            child.status.success(),
            "export child failed: {}",
            String::from_utf8_lossy(&child.stderr)
        );
        let run: ExportRun = serde_json::from_slice(&child.stdout)?;
        out.push(ThroughputResult {
            workload: "14 export".into(),
            detail: format!(
                "{ws}: {:.1} MB zstd, peak RSS {:.0} MiB",
                run.bytes as f64 / 1e6,
                run.peak_rss_mib
            ),
            messages: run.messages as usize,
            seconds: run.seconds,
            messages_per_s: run.messages as f64 / run.seconds,
        });
        runs.push(run);
    }
    if let Some(last) = runs.last() {
        eprintln!("14 import {} as a copy", last.workspace);
        let file = std::fs::File::open(out_path(&last.workspace))?;
        let t = Instant::now();
        let report = store
            .import_file(
                std::io::BufReader::new(file),
                ImportOptions {
                    workspace: Some(format!("{}-copy", last.workspace)),
                    ..ImportOptions::default()
                },
                &(),
            )
            .await?;
        let seconds = t.elapsed().as_secs_f64();
        anyhow::ensure!(report.vectors_reused, "the import recomputed the vectors");
        out.push(ThroughputResult {
            workload: "14 import".into(),
            detail: format!(
                "{} as a copy, vectors kept, {} rows",
                last.workspace, report.inserted
            ),
            messages: report.messages as usize,
            seconds,
            messages_per_s: report.messages as f64 / seconds,
        });
    }
    Ok((out, runs))
}
