use clap::{Parser, Subcommand};
use migration::{Migrator, MigratorTrait};

use futures::StreamExt;
use honcho_graphql::auth::{AuthArgs, KeySpec, parse_duration};
use honcho_graphql::config::{DbConfig, McpConfig, ServeConfig};
use honcho_graphql::deriver::DeriverArgs;
use honcho_graphql::llm::LlmArgs;
use honcho_graphql::store::Store;
use honcho_graphql::store::embedding::ReembedProgress;
use honcho_graphql::store::erasure::{DEFAULT_ERASURE_BATCH, ErasureJob, ErasureProgress};
use honcho_graphql::store::export::{ImportOptions, ImportProgress, ImportReport, OnConflict};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::AsyncWriteExt;

#[derive(Parser)]
#[command(name = "honcho-graphql", version, about = "Honcho's memory model over GraphQL")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start; boxing the large `serve` configuration would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Migrate and serve GraphQL over HTTP.
    Serve(Box<ServeConfig>),
    /// Serve MCP over stdin/stdout for desktop clients; the key comes from HONCHO_API_KEY.
    Mcp(Box<McpConfig>),
    /// Run deriver workers alone (no HTTP): queued messages become conclusions.
    Deriver {
        #[command(flatten)]
        db: DbConfig,
        #[command(flatten)]
        llm: LlmArgs,
        #[command(flatten)]
        deriver: DeriverArgs,
    },
    /// Apply or revert schema migrations.
    Migrate {
        #[command(subcommand)]
        action: MigrateAction,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Print the GraphQL schema (SDL).
    Schema,
    /// Mint an API key signed with HONCHO_AUTH_SECRET and print it.
    Key {
        /// An admin key: reaches everything.
        #[arg(long, conflicts_with_all = ["workspace", "peer", "session", "scope"])]
        admin: bool,
        /// The workspace the key is for (alone: a workspace key).
        #[arg(long)]
        workspace: Option<String>,
        /// A peer key for this peer of the workspace.
        #[arg(long, requires = "workspace")]
        peer: Option<String>,
        /// A session key for this session of the workspace.
        #[arg(long, requires = "workspace")]
        session: Option<String>,
        /// Limits a workspace key to this scope's sessions, read only (docs/scopes.md).
        #[arg(long, requires = "workspace", conflicts_with_all = ["peer", "session"])]
        scope: Option<String>,
        /// Lifetime, e.g. 90s, 15m, 1h, 7d (without it the key does not expire).
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<chrono::Duration>,
        #[command(flatten)]
        auth: AuthArgs,
    },
    /// Fill in missing embeddings of messages and conclusions with the configured embedder.
    Reembed {
        /// Re-embed every row, not only those without an embedding (after a model change).
        #[arg(long)]
        all: bool,
        /// Convert the vector columns to the embedder's dimension first (drops all embeddings).
        #[arg(long)]
        resize: bool,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Erase a peer for good (docs/erasure.md): its messages, the conclusions about it and those
    /// it drew, what only those supported, its cards and queued work. Run again after a crash to
    /// continue an unfinished erasure.
    Erase {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        peer: String,
        /// Hand the conclusions the peer drew about others to them instead of deleting them.
        #[arg(long)]
        keep_observed: bool,
        /// Messages (or conclusions) per transaction.
        #[arg(long, default_value_t = DEFAULT_ERASURE_BATCH)]
        batch: u64,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Write a workspace, everything of it, to stdout as zstd-compressed JSON lines
    /// (docs/export.md), consistent as of one moment while writes go on.
    Export {
        #[arg(long)]
        workspace: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Read an export from stdin into its workspace (or --workspace); run again after a stop to
    /// finish it: rows already written are left as they are.
    Import {
        /// Import under this name instead of the exported workspace's (ids are derived anew).
        #[arg(long)]
        workspace: Option<String>,
        /// What to do with a row that exists with other content.
        #[arg(long, value_enum, default_value = "fail")]
        on_conflict: ConflictFlag,
        /// Records per transaction.
        #[arg(long, default_value_t = 500)]
        batch: usize,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Copy a workspace from a running Honcho v3 server through its REST API; run again after a
    /// stop to go on from where it was.
    ImportHoncho {
        /// The Honcho server, e.g. https://api.honcho.dev (without /v3).
        #[arg(long)]
        base_url: String,
        #[arg(long)]
        workspace: String,
        /// A key of the source server (admin, or the workspace's).
        #[arg(long, env = "HONCHO_SOURCE_API_KEY")]
        api_key: Option<String>,
        #[arg(long, value_enum, default_value = "fail")]
        on_conflict: ConflictFlag,
        #[command(flatten)]
        db: DbConfig,
    },
}

/// What `import` does with a row that exists with other content.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ConflictFlag {
    /// Stop; the batch holding it is not written.
    Fail,
    /// Keep the existing row.
    Skip,
    /// Overwrite it with the file's.
    Replace,
}

impl From<ConflictFlag> for OnConflict {
    fn from(f: ConflictFlag) -> Self {
        match f {
            ConflictFlag::Fail => OnConflict::Fail,
            ConflictFlag::Skip => OnConflict::Skip,
            ConflictFlag::Replace => OnConflict::Replace,
        }
    }
}

#[derive(Subcommand)]
enum MigrateAction {
    /// Apply pending migrations (all, or the next N).
    Up { n: Option<u32> },
    /// Revert the last N migrations (default 1).
    Down { n: Option<u32> },
    /// List migrations and whether each is applied.
    Status,
    /// Drop every table and migrate from scratch.
    Fresh,
}

/// mimalloc instead of glibc's malloc: resolving and serialising a GraphQL response allocates per
/// field, and in a profile of a page of 50 messages a fifth of the server's CPU was in malloc/free.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // SAFETY: first thing in main: no other thread exists yet.
    let result = unsafe { honcho_graphql::runtime() }
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run()));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // One line, the error and its causes, whatever RUST_BACKTRACE says: a failed start or
        // migration says what to do, and a backtrace of main's stack would bury it.
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    // Held to the end of the command: dropping it flushes the spans not yet exported.
    let command = Cli::parse().command;
    // Over stdio, stdout is the protocol's: logs go to stderr.
    let _telemetry = honcho_graphql::telemetry::init(matches!(command, Command::Mcp(_)))?;
    match command {
        Command::Serve(cfg) => Ok(honcho_graphql::serve(*cfg).await?),
        Command::Mcp(cfg) => Ok(honcho_graphql::serve_mcp_stdio(*cfg).await?),
        Command::Deriver { db, llm, deriver } => {
            Ok(honcho_graphql::derive(db, llm, deriver).await?)
        }
        Command::Migrate { action, db } => {
            // A fresh database's vector columns take the configured embedder's dimension, as
            // `serve` would give them.
            honcho_graphql::configured_embedder(&db.embedder)?;
            let store = Store::connect(&db.database_url, 2, None).await?;
            let conn = store.db();
            match action {
                MigrateAction::Up { n } => Migrator::up(conn, n).await?,
                MigrateAction::Down { n } => Migrator::down(conn, Some(n.unwrap_or(1))).await?,
                MigrateAction::Status => Migrator::status(conn).await?,
                MigrateAction::Fresh => Migrator::fresh(conn).await?,
            }
            Ok(())
        }
        Command::Reembed { all, resize, db } => {
            let store = honcho_graphql::open_store(&db).await?;
            Migrator::up(store.db(), None).await?;
            let n = store.reembed(all, resize, &Bars::default()).await?;
            println!("embedded {n} rows");
            Ok(())
        }
        Command::Erase {
            workspace,
            peer,
            keep_observed,
            batch,
            db,
        } => {
            let store = honcho_graphql::open_store(&db).await?;
            Migrator::up(store.db(), None).await?;
            let job = store
                .start_peer_erasure(&workspace, &peer, keep_observed)
                .await?;
            let bar = ErasureBar::new(&job);
            let job = store.run_erasure(&job.id, batch, &bar).await?;
            bar.0.finish();
            println!(
                "erased peer {peer}: {} messages, {} conclusions (job {})",
                job.messages_erased, job.conclusions_erased, job.id
            );
            Ok(())
        }
        Command::Export { workspace, db } => {
            let store = honcho_graphql::open_store(&db).await?;
            Migrator::up(store.db(), None).await?;
            let mut stream = store.export_workspace(&workspace).await?;
            let mut out = tokio::io::stdout();
            while let Some(chunk) = stream.next().await {
                out.write_all(&chunk?).await?;
            }
            out.flush().await?;
            Ok(())
        }
        Command::Import {
            workspace,
            on_conflict,
            batch,
            db,
        } => {
            let store = honcho_graphql::open_store(&db).await?;
            Migrator::up(store.db(), None).await?;
            let options = ImportOptions {
                workspace,
                on_conflict: on_conflict.into(),
                batch,
            };
            let bar = ImportBar::new();
            let report = store.import_file(std::io::stdin(), options, &bar).await?;
            bar.0.finish_and_clear();
            eprintln!("{}", describe(&report));
            Ok(())
        }
        Command::ImportHoncho {
            base_url,
            workspace,
            api_key,
            on_conflict,
            db,
        } => {
            let store = honcho_graphql::open_store(&db).await?;
            Migrator::up(store.db(), None).await?;
            let job = honcho_graphql::import_honcho::ImportHoncho {
                base_url,
                workspace,
                api_key,
                on_conflict: on_conflict.into(),
            };
            let bar = ImportBar::new();
            let report = job.run(&store, &bar).await?;
            bar.0.finish_and_clear();
            eprintln!("{}", describe(&report));
            Ok(())
        }
        Command::Key {
            admin,
            workspace,
            peer,
            session,
            scope,
            expires_in,
            auth,
        } => {
            let auth = auth.auth()?;
            if !auth.enabled() {
                anyhow::bail!(
                    "HONCHO_AUTH_SECRET is not set: there is no secret to sign keys with"
                );
            }
            let spec = KeySpec {
                admin,
                workspace,
                peer,
                session,
                scope,
                expires_at: expires_in.map(|d| chrono::Utc::now() + d),
            };
            println!("{}", auth.mint(&spec)?);
            Ok(())
        }
        Command::Schema => {
            print!("{}", honcho_graphql::graphql::sdl());
            Ok(())
        }
    }
}

fn describe(r: &ImportReport) -> String {
    format!(
        "imported into {}: {} rows written, {} unchanged, {} skipped, {} replaced; {} messages \
         read; vectors {}",
        r.workspace,
        r.inserted,
        r.unchanged,
        r.skipped,
        r.replaced,
        r.messages,
        if r.vectors_reused {
            "kept".to_owned()
        } else {
            format!("computed here ({})", r.embedded)
        }
    )
}

/// An import's progress on the terminal: records written, by kind.
struct ImportBar(ProgressBar);

impl ImportBar {
    fn new() -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg:>12} {pos} {per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        ImportBar(bar)
    }
}

impl ImportProgress for ImportBar {
    fn advanced(&self, kind: &'static str, n: u64) {
        if self.0.message() != kind {
            self.0.set_message(kind);
            self.0.set_position(0);
        }
        self.0.inc(n);
    }
}

/// `reembed`'s progress on the terminal: one bar per table.
#[derive(Default)]
struct Bars {
    current: std::sync::Mutex<Option<ProgressBar>>,
}

impl Bars {
    fn with_current(&self, f: impl FnOnce(&mut Option<ProgressBar>)) {
        f(&mut self.current.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl ReembedProgress for Bars {
    fn table(&self, name: &str, rows: u64) {
        let bar = ProgressBar::new(rows).with_message(name.to_owned());
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        self.with_current(|current| *current = Some(bar));
    }

    fn advanced(&self, rows: u64) {
        self.with_current(|current| {
            if let Some(bar) = current {
                bar.inc(rows);
            }
        });
    }

    fn table_done(&self) {
        self.with_current(|current| {
            if let Some(bar) = current.take() {
                bar.finish();
            }
        });
    }
}

/// `erase`'s progress on the terminal: the peer's messages erased, and the phase.
struct ErasureBar(ProgressBar);

impl ErasureBar {
    fn new(job: &ErasureJob) -> Self {
        let bar = ProgressBar::new(job.messages_total.max(0) as u64);
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let bar = ErasureBar(bar);
        bar.advanced(job);
        bar
    }
}

impl ErasureProgress for ErasureBar {
    fn advanced(&self, job: &ErasureJob) {
        // Messages written while the job runs are erased too: the length follows.
        let erased = job.messages_erased.max(0) as u64;
        if erased > self.0.length().unwrap_or(0) {
            self.0.set_length(erased);
        }
        self.0.set_position(erased);
        self.0
            .set_message(format!("{:?}", job.phase).to_lowercase());
    }
}
