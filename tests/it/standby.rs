//! One streaming standby of the test cluster for the whole test run (scripts/standby.sh): made on
//! first use, shared by the replica tests one at a time (they stop it and pause its replay), and
//! removed by the script's reaper when this process exits, however it exits.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use honcho_graphql::store::Lsn;
use honcho_graphql::store::replicas::wal_position;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use tokio::sync::{Mutex, MutexGuard, OnceCell};

use crate::harness;

static STANDBY: OnceCell<Result<Standby, String>> = OnceCell::const_new();
/// Held by each test that uses the standby: they change its state (stopped, replay paused).
static TURN: Mutex<()> = Mutex::const_new(());

pub struct Standby {
    dir: String,
    port: u16,
}

/// The test's turn at the standby.
pub struct Turn {
    pub standby: &'static Standby,
    _turn: MutexGuard<'static, ()>,
}

/// The standby and the turn to use it; None (after [`harness::skip`]) when this machine cannot
/// make one.
pub async fn standby() -> Option<Turn> {
    let made = STANDBY
        .get_or_init(|| async { tokio::task::spawn_blocking(Standby::make).await.unwrap() })
        .await;
    match made {
        Ok(standby) => {
            let turn = TURN.lock().await;
            // A test that failed half-way may have left it stopped or paused.
            standby.resume();
            standby.resume_replay().await;
            Some(Turn {
                standby,
                _turn: turn,
            })
        }
        Err(reason) => {
            harness::skip(reason);
            None
        }
    }
}

fn script() -> String {
    format!("{}/scripts/standby.sh", env!("CARGO_MANIFEST_DIR"))
}

impl Standby {
    fn make() -> Result<Standby, String> {
        let (base, _) = harness::server_url();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let out = Command::new(script())
            .args([
                "start",
                &base,
                &port.to_string(),
                &std::process::id().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running scripts/standby.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/standby.sh could not make a standby of {base} ({}; its reason is above)",
                out.status
            ));
        }
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Standby { dir, port })
    }

    /// The standby's copy of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    fn run(&self, what: &str) -> bool {
        Command::new(script())
            .args([what, &self.dir])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Fast shutdown: its sessions are cut, new ones refused.
    pub fn stop(&self) {
        assert!(self.run("stop"), "stop the standby");
    }

    /// Starts it again (nothing when it runs).
    pub fn resume(&self) {
        if self.admin_blocking().is_none() {
            assert!(self.run("resume"), "start the standby again");
        }
    }

    fn admin_blocking(&self) -> Option<()> {
        std::net::TcpStream::connect(("127.0.0.1", self.port))
            .ok()
            .map(|_| ())
    }

    async fn admin(&self) -> DatabaseConnection {
        Database::connect(self.url("postgres"))
            .await
            .expect("connect to the standby")
    }

    async fn exec(&self, sql: &str) {
        let admin = self.admin().await;
        admin
            .execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        admin.close().await.ok();
    }

    /// Replay stops where it is: the standby answers with what it has.
    pub async fn pause_replay(&self) -> ReplayPaused<'_> {
        self.exec("SELECT pg_wal_replay_pause()").await;
        ReplayPaused { standby: self }
    }

    pub async fn resume_replay(&self) {
        self.exec("SELECT pg_wal_replay_resume()").await;
    }

    pub async fn replayed(&self) -> Lsn {
        let admin = self.admin().await;
        let lsn = wal_position(&admin, "pg_last_wal_replay_lsn()")
            .await
            .unwrap();
        admin.close().await.ok();
        lsn
    }

    /// Waits until the standby has replayed what the primary had written when this was called
    /// (e.g. a test database just created).
    pub async fn catch_up(&self) {
        let target = primary_lsn().await;
        let started = Instant::now();
        while self.replayed().await < target {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the standby did not replay {target} in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Resumes replay when dropped (a failed assertion included).
pub struct ReplayPaused<'a> {
    standby: &'a Standby,
}

impl Drop for ReplayPaused<'_> {
    fn drop(&mut self) {
        harness::run_from_drop(
            self.standby.url("postgres"),
            "SELECT pg_wal_replay_resume()".into(),
        );
    }
}

/// The primary's WAL position now (asked on a connection of its own, which the app's statement
/// count does not see).
pub async fn primary_lsn() -> Lsn {
    let admin = harness::admin().await;
    let lsn = wal_position(&admin, "pg_current_wal_insert_lsn()")
        .await
        .unwrap();
    admin.close().await.ok();
    lsn
}
