//! Workload 11: what admitting a document costs the server before anything runs. For each
//! playground example and each of the documents the limits were made for, the time of parsing
//! alone against the time of the whole admission (the byte scan, parsing, the cost tally and the
//! limit checks, as `graphql::admit` does them), on this process's CPU, no database involved.

use std::path::Path;
use std::time::{Duration, Instant};

use async_graphql::Variables;
use honcho_graphql::graphql::{Limits, cost, limits};

/// One document's figures: medians of many runs, in microseconds.
pub struct AdmissionResult {
    pub name: String,
    pub bytes: usize,
    pub parse_us: f64,
    pub admit_us: f64,
    /// What the admission answers: the cost, or the limit that refuses the document.
    pub verdict: String,
}

/// The examples every client sees first, and the documents that once ran for seconds.
fn documents() -> anyhow::Result<Vec<(String, String, Variables)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../playground/examples");
    let mut docs = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "graphql"))
        .collect();
    paths.sort();
    for path in paths {
        let query = std::fs::read_to_string(&path)?;
        let vars = path.with_extension("variables.json");
        let vars = match std::fs::read_to_string(&vars) {
            Ok(text) => Variables::from_json(serde_json::from_str(&text)?),
            Err(_) => Variables::default(),
        };
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        docs.push((name, query, vars));
    }
    let aliases =
        |n: usize, field: &dyn Fn(usize) -> String| (0..n).map(field).collect::<Vec<_>>().join(" ");
    let nested = "messages(first: 100) { nodes { session { messages(first: 100) { nodes { id content } } } } }";
    let attacks = [
        (
            "attack: 5,000 search aliases",
            format!(
                "{{ workspace(id: \"W1\") {{ {} }} }}",
                aliases(5_000, &|i| format!(
                    "s{i}: search(query: \"x\") {{ __typename }}"
                ))
            ),
        ),
        (
            "attack: 3 nested 100x100 pages",
            format!(
                "{{ workspace(id: \"W1\") {{ session(id: \"s\") {{ a: {nested} b: {nested} c: {nested} }} }} }}"
            ),
        ),
        (
            "attack: 200,000 __typename aliases",
            format!(
                "{{ {} }}",
                aliases(200_000, &|i| format!("t{i}: __typename"))
            ),
        ),
    ];
    for (name, query) in attacks {
        docs.push((name.to_owned(), query, Variables::default()));
    }
    Ok(docs)
}

/// The median in microseconds.
fn median_us(xs: Vec<Duration>) -> f64 {
    crate::common::median(xs.iter().map(|d| d.as_secs_f64() * 1e6).collect())
}

/// Runs each document until about 200 ms or 2,000 runs have passed, parse and admission
/// alternating so both see the same machine.
pub fn run() -> anyhow::Result<Vec<AdmissionResult>> {
    let limits = Limits::default();
    let mut results = Vec::new();
    for (name, query, vars) in documents()? {
        let (mut parse, mut admit) = (Vec::new(), Vec::new());
        let mut verdict = String::new();
        let started = Instant::now();
        while parse.len() < 2_000
            && (parse.len() < 5 || started.elapsed() < Duration::from_millis(200))
        {
            let t = Instant::now();
            let _ = async_graphql::parser::parse_query(&query);
            parse.push(t.elapsed());

            let t = Instant::now();
            let outcome =
                limits::scan(&query, &limits).and_then(
                    |()| match async_graphql::parser::parse_query(&query) {
                        Ok(doc) => {
                            let tally = cost::tally(&doc, None, &vars);
                            limits::check(&tally, &limits).map(|()| tally.cost)
                        }
                        Err(_) => Ok(0),
                    },
                );
            admit.push(t.elapsed());
            verdict = match outcome {
                Ok(cost) => format!("cost {cost}"),
                Err(exceeded) => format!("refused: {}", exceeded.into_error().message),
            };
        }
        results.push(AdmissionResult {
            name,
            bytes: query.len(),
            parse_us: median_us(parse),
            admit_us: median_us(admit),
            verdict,
        });
    }
    Ok(results)
}

/// The table printed and written to the report.
pub fn table(results: &[AdmissionResult]) -> String {
    let mut out = String::from(
        "| document | bytes | parse alone µs | admission µs | added by scan + tally + checks | verdict |\n|---|---|---|---|---|---|\n",
    );
    for r in results {
        let verdict: String = r.verdict.chars().take(60).collect();
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:+.1} µs ({:+.0}%) | {} |\n",
            r.name,
            r.bytes,
            r.parse_us,
            r.admit_us,
            r.admit_us - r.parse_us,
            (r.admit_us / r.parse_us - 1.0) * 100.0,
            verdict
        ));
    }
    out
}
