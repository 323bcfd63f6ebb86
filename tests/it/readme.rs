//! The README's and the docs' commands, run as a newcomer would run them: every ```sh block under
//! bash (with the server's address swapped for a test server's, the `honcho-graphql` binary on
//! PATH, and `make` only checked to name real targets, since `make test` is what runs this), then
//! every ```graphql block against the data the blocks before it created. A block that fails, or
//! prints anything but a GraphQL response without errors, fails the test.

use honcho_graphql::auth::KeySpec;
use serde_json::{Value, json};

use crate::harness::{ServerProcess, TestApp, bearer};

/// Every document with runnable blocks, in the order a reader meets them: the README first (its
/// first query writes the data the others read).
const DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../README.md")),
    ("docs/graphql.md", include_str!("../../docs/graphql.md")),
    ("docs/search.md", include_str!("../../docs/search.md")),
    ("docs/frontend.md", include_str!("../../docs/frontend.md")),
    ("docs/security.md", include_str!("../../docs/security.md")),
    ("docs/deriver.md", include_str!("../../docs/deriver.md")),
    ("docs/summaries.md", include_str!("../../docs/summaries.md")),
    ("docs/scopes.md", include_str!("../../docs/scopes.md")),
];
const README: &str = DOCS[0].1;
const ADDRESS: &str = "http://127.0.0.1:8000";

/// The fenced blocks of one language, in order, with the line each starts on.
fn blocks(markdown: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            match current.take() {
                Some(block) => out.push(block),
                None if info.trim() == lang => current = Some((i + 1, String::new())),
                None => current = Some((usize::MAX, String::new())),
            }
            continue;
        }
        if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    out.retain(|(line, _)| *line != usize::MAX);
    out
}

/// The `graphql` blocks that are operations; a block of SDL (`type …`) shows the schema and is not
/// sent.
fn operations(markdown: &str) -> Vec<(usize, String)> {
    let mut out = blocks(markdown, "graphql");
    out.retain(|(_, text)| !text.trim_start().starts_with("type "));
    out
}

#[test]
fn the_readme_has_the_blocks_this_test_runs() {
    assert!(blocks(README, "sh").len() >= 2);
    assert!(!operations(README).is_empty());
    let curl = &blocks(README, "sh")[1].1;
    assert!(curl.contains(ADDRESS), "{curl}");
}

/// A document added to docs/ with `sh` or `graphql` blocks must be run by this test too.
#[test]
fn every_doc_with_runnable_blocks_is_run() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut docs: Vec<String> = std::fs::read_dir(format!("{root}/docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.extend(["README.md".to_owned(), "UPGRADING.md".to_owned()]);
    for doc in docs {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).unwrap();
        let runnable = !blocks(&text, "sh").is_empty() || !operations(&text).is_empty();
        let listed = DOCS.iter().any(|(name, _)| *name == doc);
        assert!(
            !runnable || listed,
            "{doc} has sh or graphql blocks: add it to DOCS"
        );
    }
}

#[tokio::test]
async fn every_command_and_query_in_the_readme_runs() {
    let app = TestApp::new().await;
    // The README's commands run with auth off (as `make run` does); createKey needs it on.
    let open = ServerProcess::start(&app._db, &[("HONCHO_AUTH_SECRET", "")]).await;
    let guarded = ServerProcess::start(&app._db, &[]).await;

    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_honcho-graphql"));
    let shims = std::env::temp_dir().join(format!("honcho-readme-{}", nanoid::nanoid!()));
    std::fs::create_dir_all(&shims).unwrap();
    std::os::unix::fs::symlink(bin, shims.join("honcho-graphql")).unwrap();
    let repo = env!("CARGO_MANIFEST_DIR");
    // `make run` and `make test` cannot run inside `make test`: the shim checks that each target
    // the README names is a rule of the Makefile (variables like `X=1` pass).
    std::fs::write(
        shims.join("make"),
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *=*) ;; *) grep -q \"^$a:\" '{repo}/Makefile' || {{ echo \"no make target $a\" >&2; exit 1; }};; esac; done\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        shims.join("make"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let sh = DOCS
        .iter()
        .flat_map(|(doc, text)| blocks(text, "sh").into_iter().map(move |b| (*doc, b)));
    for (doc, (line, block)) in sh {
        let script = block.replace(ADDRESS, &format!("http://{}", open.addr));
        let out = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .env("PATH", &path)
            .env_remove("HONCHO_AUTH_SECRET")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{doc}:{line} failed: {}\n{script}",
            String::from_utf8_lossy(&out.stderr)
        );
        if script.contains("curl") {
            assert!(stdout.starts_with('{'), "{doc}:{line} printed {stdout}");
        }
        for printed in stdout.lines().filter(|l| l.starts_with('{')) {
            let body: Value = serde_json::from_str(printed).expect("JSON output");
            assert!(
                body.get("errors").is_none() && body.get("data").is_some(),
                "{doc}:{line} answered {body}"
            );
        }
    }
    std::fs::remove_dir_all(&shims).unwrap();

    let admin = bearer(KeySpec {
        admin: true,
        ..KeySpec::default()
    });
    let http = honcho_graphql::outbound::client();
    let graphql = DOCS
        .iter()
        .flat_map(|(doc, text)| operations(text).into_iter().map(move |b| (*doc, b)));
    for (doc, (line, query)) in graphql {
        let (server, authorization) = match query.contains("createKey") {
            true => (&guarded, Some(admin.as_str())),
            false => (&open, None),
        };
        let mut req = http
            .post(server.url("/graphql"))
            .json(&json!({"query": query}));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let body: Value = req.send().await.unwrap().json().await.unwrap();
        assert!(body.get("errors").is_none(), "{doc}:{line} answered {body}");
        // The first query reads what the curl above it wrote.
        if query.contains("messages(filters") {
            let messages = &body["data"]["workspace"]["session"]["messages"];
            assert_eq!(messages["totalCount"], 2, "{doc}:{line}: {body}");
        }
    }
}
