//! Every test gets its own database, cloned from a template migrated once per test process, on the
//! PostgreSQL named by DATABASE_URL (default: the local server, trust auth).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_graphql::{Request, Variables};
use honcho_graphql::auth::{Auth, KeySpec};
use honcho_graphql::embed::{EmbedConfig, Embedder, EmbedderKind};
use honcho_graphql::graphql::{self, AppSchema, Limits};
use honcho_graphql::http::HttpOptions;
use honcho_graphql::store::Store;
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement, Values};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

static TEMPLATE: OnceCell<String> = OnceCell::const_new();
static MINILM: std::sync::OnceLock<Arc<dyn Embedder>> = std::sync::OnceLock::new();

/// The real all-MiniLM-L6-v2, loaded once per test process (it runs on its own thread, so every
/// test's runtime can use it).
pub fn minilm() -> Arc<dyn Embedder> {
    MINILM
        .get_or_init(|| {
            let mut cfg = EmbedConfig::from_env().expect("embedder configuration");
            cfg.kind = EmbedderKind::MiniLm;
            honcho_graphql::embed::build(&cfg)
                .expect("load all-MiniLM-L6-v2 (run `make setup` first)")
                .expect("minilm is an embedder")
        })
        .clone()
}
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// `postgres://user@host:port` and the query string, without a database name.
pub fn server_url() -> (String, String) {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (url, query) = match url.split_once('?') {
        Some((u, q)) => (u.to_owned(), format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let base = match url[after_scheme..].find('/') {
        Some(i) => url[..after_scheme + i].to_owned(),
        None => url,
    };
    (base, query)
}

pub fn database_url(name: &str) -> String {
    let (base, query) = server_url();
    format!("{base}/{name}{query}")
}

pub async fn admin() -> DatabaseConnection {
    Database::connect(database_url("postgres"))
        .await
        .expect("connect to the PostgreSQL server (set DATABASE_URL)")
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Drops databases left behind by test processes that are gone (a panic skips cleanup).
async fn sweep_stale(admin: &DatabaseConnection) {
    let rows = admin
        .query_all_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT datname FROM pg_database WHERE datname LIKE 'honcho_t%'",
        ))
        .await
        .expect("list databases");
    for row in rows {
        let name: String = row.try_get("", "datname").unwrap();
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && !pid_alive(pid)
        {
            let _ = admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await;
        }
    }
}

async fn template() -> String {
    TEMPLATE
        .get_or_init(|| async {
            let admin = admin().await;
            sweep_stale(&admin).await;
            let name = format!("honcho_tpl_{}", std::process::id());
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await
                .unwrap();
            admin
                .execute_unprepared(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            let db = Database::connect(database_url(&name)).await.unwrap();
            Migrator::up(&db, None).await.expect("migrate the template");
            db.close().await.unwrap();
            admin.close().await.unwrap();
            name
        })
        .await
        .clone()
}

/// Runs the `honcho-graphql` binary with `args` against `database_url`, with these extra
/// variables, to its end.
pub fn run_binary(args: &[&str], database_url: &str, env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_honcho-graphql"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .envs(env.iter().copied())
        .output()
        .expect("run honcho-graphql")
}

/// A fresh, empty database (not migrated), for migration tests. Dropped with the guard.
pub async fn blank_database() -> DbGuard {
    let name = format!(
        "honcho_tb_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let admin = admin().await;
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    admin.close().await.unwrap();
    DbGuard { name }
}

/// Drops its database when the test ends, pass or fail.
pub struct DbGuard {
    pub name: String,
}

impl DbGuard {
    pub fn url(&self) -> String {
        database_url(&self.name)
    }
}

impl Drop for DbGuard {
    fn drop(&mut self) {
        run_from_drop(
            database_url("postgres"),
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// Runs `sql` on `url`, ignoring failures, from a `drop`: drop runs outside any async context we
/// may block, so this uses a short-lived runtime on a thread of its own.
pub fn run_from_drop(url: String, sql: String) {
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            if let Ok(db) = Database::connect(url).await {
                let _ = db.execute_unprepared(&sql).await;
                let _ = db.close().await;
            }
        });
    })
    .join();
}

/// A test that cannot run here (a tool or service is missing) says so and passes, except under
/// `CI=true`, where it fails: CI must run every test.
pub fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("cannot run under CI=true: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

/// The secret of [`TestApp::with_auth`] servers.
pub const SECRET: &str = "integration-test-secret";

pub fn auth() -> Auth {
    Auth::with_secret(SECRET).unwrap()
}

/// The `id`s of a list of objects.
pub fn ids_of(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The conclusion of `list` whose content is `content`.
pub fn find_by_content<'a>(list: &'a [Value], content: &str) -> &'a Value {
    list.iter()
        .find(|c| c["content"] == content)
        .unwrap_or_else(|| panic!("no conclusion {content:?} in {list:#?}"))
}

/// `Bearer <a key for spec>`, signed with [`SECRET`].
pub fn bearer(spec: KeySpec) -> String {
    format!("Bearer {}", auth().mint(&spec).expect("mint a test key"))
}

pub struct TestApp {
    pub store: Store,
    pub schema: AppSchema,
    statements: Arc<AtomicUsize>,
    /// SQL (values inlined) of the statements run since the last `take_sql`.
    sql: Arc<std::sync::Mutex<Vec<String>>>,
    pub _db: DbGuard,
}

impl TestApp {
    /// A server with the real MiniLM embedder.
    pub async fn with_embedder() -> Self {
        Self::embedding_with(minilm()).await
    }

    /// A server whose store embeds with `embedder`.
    pub async fn embedding_with(embedder: Arc<dyn Embedder>) -> Self {
        let mut app = Self::new().await;
        app.store = app.store.clone().with_embedder(Some(embedder));
        app.schema = graphql::build_schema(app.store.clone(), &Limits::default());
        app
    }

    /// This server (its store and embedder) with chats answered by the LLM of `cfg`.
    pub fn with_llm(mut self, cfg: &honcho_graphql::llm::LlmArgs) -> Self {
        let llm = honcho_graphql::llm::build(cfg).unwrap().unwrap();
        self.schema = graphql::build_schema_with(
            self.store.clone(),
            &Limits::default(),
            Auth::disabled(),
            None,
            Some(honcho_graphql::dialectic::Dialectic::new(llm)),
        );
        self
    }

    /// A server with auth on, keys signed with [`SECRET`]; run requests with [`Self::exec_as`].
    pub async fn with_auth() -> Self {
        Self::new().await.auth_on()
    }

    /// This server (its store and embedder) with auth on.
    pub fn auth_on(mut self) -> Self {
        self.schema =
            graphql::build_schema_with_auth(self.store.clone(), &Limits::default(), auth());
        self
    }

    /// Runs a request with this `Authorization` header value (None: no header), as the HTTP
    /// handler does.
    pub async fn exec_as(&self, authorization: Option<&str>, query: &str, vars: Value) -> Value {
        let caller = graphql::authenticate(&self.schema, authorization);
        let req = Request::new(query)
            .variables(Variables::from_json(vars))
            .data(caller);
        serde_json::to_value(graphql::execute(&self.schema, req).await).unwrap()
    }

    pub async fn new() -> Self {
        let template = template().await;
        let name = format!(
            "honcho_t_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let admin = admin().await;
        let mut attempt = 0;
        loop {
            // Two clones of one template at the same instant can collide; retry briefly.
            match admin
                .execute_unprepared(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
                .await
            {
                Ok(_) => break,
                Err(e) if attempt < 20 => {
                    attempt += 1;
                    let _ = e;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("create test database: {e}"),
            }
        }
        admin.close().await.unwrap();
        let guard = DbGuard { name };
        let mut conn = Database::connect(guard.url()).await.unwrap();
        let statements = Arc::new(AtomicUsize::new(0));
        let counter = statements.clone();
        let sql = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = sql.clone();
        conn.set_metric_callback(move |info| {
            counter.fetch_add(1, Ordering::SeqCst);
            log.lock().unwrap().push(info.statement.to_string());
        });
        let store = Store::new(conn);
        let schema = graphql::build_schema(store.clone(), &Limits::default());
        TestApp {
            store,
            schema,
            statements,
            sql,
            _db: guard,
        }
    }

    /// This app with its store queueing messages for the deriver.
    pub fn deriving(mut self) -> Self {
        self.store = self.store.clone().with_derivation(true);
        self.schema = graphql::build_schema(self.store.clone(), &Limits::default());
        self
    }

    /// Writes `messages` (`MessageInput`s) to `session` of `workspace`; their public ids.
    pub async fn create_messages(
        &self,
        workspace: &str,
        session: &str,
        messages: impl IntoIterator<Item = Value>,
    ) -> Vec<String> {
        let m: Vec<Value> = messages.into_iter().collect();
        let d = self
            .ok(
                "mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: $w, \
                 sessionId: $s, messages: $m) { id } }",
                json!({"w": workspace, "s": session, "m": m}),
            )
            .await;
        ids_of(&d["createMessages"])
    }

    /// Creates `conclusions` (`ConclusionInput`s) in `workspace`; their ids.
    pub async fn create_conclusions(
        &self,
        workspace: &str,
        conclusions: impl IntoIterator<Item = Value>,
    ) -> Vec<String> {
        let c: Vec<Value> = conclusions.into_iter().collect();
        let d = self
            .ok(
                "mutation($w: ID!, $c: [ConclusionInput!]!) { createConclusions(workspaceId: $w, \
                 conclusions: $c) { id } }",
                json!({"w": workspace, "c": c}),
            )
            .await;
        ids_of(&d["createConclusions"])
    }

    /// Runs a GraphQL request and returns the whole response as JSON (`data`, `errors`).
    pub async fn exec(&self, query: &str, vars: Value) -> Value {
        let req = Request::new(query).variables(Variables::from_json(vars));
        serde_json::to_value(graphql::execute(&self.schema, req).await).unwrap()
    }

    /// Runs a request that must succeed; returns `data`.
    pub async fn ok(&self, query: &str, vars: Value) -> Value {
        let resp = self.exec(query, vars).await;
        assert!(
            resp.get("errors").is_none(),
            "unexpected errors: {}",
            serde_json::to_string_pretty(&resp).unwrap()
        );
        resp["data"].clone()
    }

    /// Runs a request that must fail; returns (extensions.code, message) of the first error.
    pub async fn err(&self, query: &str, vars: Value) -> (String, String) {
        let resp = self.exec(query, vars).await;
        let err = resp
            .get("errors")
            .and_then(|e| e.get(0))
            .unwrap_or_else(|| panic!("expected an error, got {resp}"));
        (
            err["extensions"]["code"].as_str().unwrap_or("").to_owned(),
            err["message"].as_str().unwrap_or("").to_owned(),
        )
    }

    /// SQL statements run through the store since the last call.
    pub fn take_statements(&self) -> usize {
        self.statements.swap(0, Ordering::SeqCst)
    }

    /// SQL of the statements run through the store since the last call.
    pub fn take_sql(&self) -> Vec<String> {
        std::mem::take(&mut *self.sql.lock().unwrap())
    }

    pub async fn sql_i64(&self, sql: &str) -> i64 {
        self.sql_one(sql).await
    }

    /// The first column of the one row `sql` returns.
    pub async fn sql_one<T: sea_orm::TryGetable>(&self, sql: &str) -> T {
        let row = self
            .store
            .db()
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                sql,
            ))
            .await
            .unwrap()
            .unwrap();
        row.try_get_by_index::<T>(0).unwrap()
    }
}

/// The real server binary, serving one test database on a free port, killed when dropped. Tests
/// that must see the process survive (a stack overflow or an allocation failure aborts it, which
/// no in-process test can observe) talk to it over HTTP.
pub struct ServerProcess {
    child: std::sync::Mutex<std::process::Child>,
    pub addr: std::net::SocketAddr,
    http: reqwest::Client,
}

impl ServerProcess {
    /// Serves `db` with auth on (keys from [`bearer`]), no embedder, and these extra variables
    /// (an empty value unsets one: `("HONCHO_AUTH_SECRET", "")` turns auth off).
    pub async fn start(db: &DbGuard, env: &[(&str, &str)]) -> ServerProcess {
        Self::start_in(db, env, std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).await
    }

    /// As [`Self::start`], with this working directory.
    pub async fn start_in(
        db: &DbGuard,
        env: &[(&str, &str)],
        cwd: &std::path::Path,
    ) -> ServerProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_honcho-graphql"));
        command
            .current_dir(cwd)
            .arg("serve")
            .env("DATABASE_URL", db.url())
            .env("HONCHO_LISTEN", addr.to_string())
            .env("HONCHO_EMBEDDER", "none")
            .env("HONCHO_AUTH_SECRET", SECRET)
            .env("HONCHO_DB_POOL", "4")
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null());
        for (key, value) in env {
            match value.is_empty() {
                true => command.env_remove(key),
                false => command.env(key, value),
            };
        }
        let child = command.spawn().expect("start the server binary");
        let server = ServerProcess {
            child: std::sync::Mutex::new(child),
            addr,
            http: honcho_graphql::outbound::client(),
        };
        let started = std::time::Instant::now();
        while !server.healthy().await {
            assert!(server.alive(), "the server exited on start");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the server did not start"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// The process has not exited.
    pub fn alive(&self) -> bool {
        let mut child = self.child.lock().unwrap();
        matches!(child.try_wait(), Ok(None))
    }

    pub async fn healthy(&self) -> bool {
        let resp = self.http.get(self.url("/health")).send().await;
        resp.is_ok_and(|r| r.status() == 200)
    }

    /// GETs `path`; its body as text.
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self.http.get(self.url(path)).send().await;
        resp.expect("the server answers").text().await.unwrap()
    }

    /// GETs `path`; its body as JSON (Null when it is not).
    pub async fn get_json(&self, path: &str) -> Value {
        serde_json::from_str(&self.get_text(path).await).unwrap_or(Value::Null)
    }

    /// POSTs a raw body to `/graphql`; the status and the body as JSON (Null when it is not).
    pub async fn post(
        &self,
        body: impl Into<reqwest::Body>,
        authorization: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(self.url("/graphql"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.expect("the server answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A router served on a free loopback port until this is dropped.
pub struct Served {
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub async fn start(router: axum::Router) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Served { addr, task }
    }

    /// `path` on this server, e.g. `url("/graphql")`; `url("")` is the base URL.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A test app's router served on a free port, and a client for it.
pub struct AppServer {
    pub app: TestApp,
    /// `http://127.0.0.1:<port>`, to which a route's path is appended.
    pub base: String,
    pub client: reqwest::Client,
    _server: Served,
}

impl AppServer {
    /// The router with a body limit of 1 MiB (`HONCHO_MAX_BODY_BYTES`).
    pub async fn start(app: TestApp) -> AppServer {
        Self::with_body_limit(app, 1 << 20).await
    }

    pub async fn with_body_limit(app: TestApp, max_body_bytes: usize) -> AppServer {
        let options = HttpOptions {
            max_body_bytes,
            ..HttpOptions::default()
        };
        Self::with_options(app, options).await
    }

    pub async fn with_options(app: TestApp, options: HttpOptions) -> AppServer {
        let router =
            honcho_graphql::http::router_with(app.schema.clone(), app.store.clone(), options);
        let server = Served::start(router).await;
        AppServer {
            app,
            base: server.url(""),
            client: honcho_graphql::outbound::client(),
            _server: server,
        }
    }
}

/// The body of a GET of `url`, as text (`/metrics`, a page).
pub async fn get_text(url: &str) -> String {
    let resp = honcho_graphql::outbound::client()
        .get(url)
        .send()
        .await
        .unwrap();
    resp.text().await.unwrap()
}

/// The JSON body of a GET of `url`.
pub async fn get_json(url: &str) -> Value {
    let text = get_text(url).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
}

/// The body of a POST of `body` as JSON to `url`, as text.
pub async fn post_text(url: &str, body: &Value) -> String {
    let resp = honcho_graphql::outbound::client()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    resp.text().await.unwrap()
}

/// The JSON answer to a POST of `body` as JSON to `url` (a GraphQL request to `/graphql`).
pub async fn post_json(url: &str, body: &Value) -> Value {
    let text = post_text(url, body).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {url}: {e}: {text}"))
}

/// The `content` of each item of a JSON list (messages, conclusions).
pub fn contents(list: &Value) -> Vec<&str> {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    items
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect()
}

/// A fresh app whose session `s` of workspace `W1` holds five messages by `alice`.
pub async fn seeded_w1() -> TestApp {
    let app = TestApp::new().await;
    let m: Vec<Value> = (0..5)
        .map(|i| serde_json::json!({"peerId": "alice", "content": format!("message {i}")}))
        .collect();
    app.ok(
        "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"W1\", sessionId: \"s\", messages: $m) { id } }",
        serde_json::json!({ "m": m }),
    )
    .await;
    app
}

/// Session `s` of workspace `ws` with `n` messages by `alice`, "message 1" to "message n".
pub async fn session_of(app: &TestApp, n: usize) {
    for chunk in (1..=n).collect::<Vec<_>>().chunks(100) {
        let messages: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"peerId": "alice", "content": format!("message {i}")}))
            .collect();
        app.ok(
            "mutation($m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: \"s\", messages: $m) { id } }",
            json!({"m": messages}),
        )
        .await;
    }
}

/// PostgreSQL's plan for `sql` with `values` bound, one line per plan row.
pub async fn explain<C: ConnectionTrait>(db: &C, sql: &str, values: Values) -> String {
    explain_with(db, "", sql, values).await
}

/// `EXPLAIN (<options>)` of the statement, e.g. `ANALYZE, COSTS OFF, TIMING OFF` to see which
/// nodes ran (`never executed`).
pub async fn explain_with<C: ConnectionTrait>(
    db: &C,
    options: &str,
    sql: &str,
    values: Values,
) -> String {
    let options = if options.is_empty() {
        String::new()
    } else {
        format!("({options}) ")
    };
    db.query_all_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        format!("EXPLAIN {options}{sql}"),
        values,
    ))
    .await
    .expect("EXPLAIN")
    .into_iter()
    .map(|r| r.try_get_by_index::<String>(0).expect("a plan line"))
    .collect::<Vec<_>>()
    .join("\n")
}

/// A `multipart/form-data` upload of `text` as the file `notes.txt` (`text/plain`) by `alice`, as
/// a browser's `FormData` sends it: the content type (with its boundary) and the body.
pub fn upload_form(text: &str) -> (String, String) {
    let b = "HonchoFormBoundary7MA4YWxk";
    let body = format!(
        "--{b}\r\nContent-Disposition: form-data; name=\"peer_id\"\r\n\r\nalice\r\n\
         --{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\
         Content-Type: text/plain\r\n\r\n{text}\r\n--{b}--\r\n"
    );
    (format!("multipart/form-data; boundary={b}"), body)
}
