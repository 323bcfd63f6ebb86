//! The dependency rules of docs/architecture.md, read from the source: the top-level modules of
//! src/ (`src/x.rs`, `src/x/`) import one another without a cycle, the layers point one way
//! (APIs → access → store → entity), and no module imports the composition root (`lib.rs`,
//! `config.rs`, `start.rs`), which imports them.
//!
//! A module's imports are the `crate::x` paths of its files, `use crate::{x, y::{…}}` groups
//! included (nested, over several lines), outside comments and literals. A name that is no module
//! is one of the crate root's: a re-export of lib.rs (`pub use access::auth;`) counts as its
//! module, anything else as the root itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The crate root's node: lib.rs, which declares and assembles every module.
const ROOT: &str = "lib";

/// Each module and the modules it imports, with a file where it does.
#[derive(Debug, Default)]
struct Graph {
    imports: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    /// The graph of `files` (paths relative to src/, and their text).
    fn of(files: &[(String, String)]) -> Graph {
        let owner = |path: &str| -> String {
            let first = path.split('/').next().unwrap_or(path);
            first.strip_suffix(".rs").unwrap_or(first).to_owned()
        };
        let mut modules: BTreeSet<String> = files
            .iter()
            .map(|(p, _)| owner(p))
            .filter(|m| m != "lib" && m != "main")
            .collect();
        let reexports: BTreeMap<String, String> = files
            .iter()
            .filter(|(p, _)| p == "lib.rs")
            .flat_map(|(_, text)| reexports(text))
            .collect();
        let mut graph = Graph::default();
        // The root declares every module: an import of the root closes a cycle.
        for m in &modules {
            graph.add(ROOT, m, "lib.rs");
        }
        for (path, text) in files {
            let from = owner(path);
            if from == "lib" || from == "main" {
                continue;
            }
            for name in crate_paths(text) {
                let to = if modules.contains(&name) {
                    name
                } else {
                    reexports.get(&name).cloned().unwrap_or(ROOT.into())
                };
                if to != from {
                    graph.add(&from, &to, path);
                }
            }
        }
        modules.insert(ROOT.into());
        for m in modules {
            graph.imports.entry(m).or_default();
        }
        graph
    }

    fn add(&mut self, from: &str, to: &str, file: &str) {
        self.imports
            .entry(from.to_owned())
            .or_default()
            .entry(to.to_owned())
            .or_insert_with(|| file.to_owned());
    }

    fn imports(&self, from: &str) -> impl Iterator<Item = (&str, &str)> {
        self.imports
            .get(from)
            .into_iter()
            .flatten()
            .map(|(to, file)| (to.as_str(), file.as_str()))
    }

    /// A cycle, as the path around it with the file of each step
    /// (`access → start (src/access/auth.rs) → …`), if there is one.
    fn cycle(&self) -> Option<String> {
        #[derive(Clone, Copy, PartialEq)]
        enum Seen {
            Open,
            Done,
        }
        fn visit<'a>(
            g: &'a Graph,
            m: &'a str,
            seen: &mut BTreeMap<&'a str, Seen>,
            path: &mut Vec<(&'a str, &'a str)>,
        ) -> Option<String> {
            seen.insert(m, Seen::Open);
            for (to, file) in g.imports(m) {
                path.push((to, file));
                match seen.get(to) {
                    Some(Seen::Open) => {
                        let start = path.iter().position(|(n, _)| *n == to).map_or(0, |i| i + 1);
                        let steps: Vec<String> = path[start..]
                            .iter()
                            .map(|(n, f)| format!("{n} (src/{f})"))
                            .collect();
                        return Some(format!("{to} → {}", steps.join(" → ")));
                    }
                    Some(Seen::Done) => {}
                    None => {
                        if let Some(cycle) = visit(g, to, seen, path) {
                            return Some(cycle);
                        }
                    }
                }
                path.pop();
            }
            seen.insert(m, Seen::Done);
            None
        }
        let mut seen = BTreeMap::new();
        for m in self.imports.keys() {
            if !seen.contains_key(m.as_str()) {
                let mut path = vec![(m.as_str(), "")];
                if let Some(cycle) = visit(self, m, &mut seen, &mut path) {
                    return Some(cycle);
                }
            }
        }
        None
    }

    /// The imports of `from` that are in `forbidden`, each with its file.
    fn forbidden(&self, from: &str, forbidden: &[&str]) -> Vec<String> {
        self.imports(from)
            .filter(|(to, _)| forbidden.contains(to))
            .map(|(to, file)| format!("{from} → {to} (src/{file})"))
            .collect()
    }
}

/// `pub use a::b;` of lib.rs: `b` is module `a`'s.
fn reexports(lib: &str) -> Vec<(String, String)> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub use ")?.strip_suffix(';'))
        .filter_map(|path| {
            let (module, rest) = path.split_once("::")?;
            let name = rest.rsplit("::").next()?;
            Some((name.trim().to_owned(), module.trim().to_owned()))
        })
        .collect()
}

/// The first segment of every path that starts at `crate::`, outside comments and literals.
fn crate_paths(text: &str) -> Vec<String> {
    let code: Vec<char> = code_only(text).chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let at_crate = code[i..].starts_with(&['c', 'r', 'a', 't', 'e'])
            && (i == 0 || !ident(code[i - 1]))
            && !code.get(i + 5).copied().is_some_and(ident);
        if !at_crate {
            i += 1;
            continue;
        }
        let mut j = skip_space(&code, i + 5);
        if !code[j..].starts_with(&[':', ':']) {
            i = j;
            continue;
        }
        j = skip_space(&code, j + 2);
        if code.get(j) == Some(&'{') {
            j = group(&code, j, &mut names);
        } else {
            let (name, end) = read_ident(&code, j);
            names.extend(name);
            j = end;
        }
        i = j.max(i + 1);
    }
    names.retain(|n| n != "self");
    names
}

fn skip_space(code: &[char], mut i: usize) -> usize {
    while code.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

fn read_ident(code: &[char], start: usize) -> (Option<String>, usize) {
    let mut end = start;
    while code
        .get(end)
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
    {
        end += 1;
    }
    let name = (end > start).then(|| code[start..end].iter().collect());
    (name, end)
}

/// The first segment of each item of the group that opens at `open` (`{a, b::{c, d}, e}`: a, b,
/// e); returns where the group ends.
fn group(code: &[char], open: usize, names: &mut Vec<String>) -> usize {
    let (mut i, mut depth, mut item_start) = (open + 1, 0, true);
    while let Some(&c) = code.get(i) {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i + 1,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if c.is_whitespace() => {}
            _ if item_start => {
                item_start = false;
                let (name, end) = read_ident(code, i);
                names.extend(name);
                i = end.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// `text` with its comments and the insides of its string and character literals blanked.
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if rest.starts_with(&['/', '/']) {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < s.len() {
                if s[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    i += 2;
                } else if s[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if s[i] == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2]))))
            && matches!(s.get(i + 1), Some('"' | '#'))
        {
            // A raw string: r"…", r#"…"#, br"…".
            let hashes = s[i + 1..].iter().take_while(|c| **c == '#').count();
            if s.get(i + 1 + hashes) != Some(&'"') {
                out.push(s[i]);
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            i += 2 + hashes;
            while i < s.len() && !s[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if s[i] == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if s[i] == '\'' && s.get(i + 1) == Some(&'\\') {
            // An escaped character ('\n', '\'', '\u{…}').
            i += 3;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if s[i] == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            // Code, or a lifetime's quote.
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// Every .rs file under src/, by its path relative to src/.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, src: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out
}

fn graph() -> Graph {
    Graph::of(&sources())
}

#[test]
fn top_level_modules_form_no_cycle() {
    let g = graph();
    // The scan sees what is there: a few imports every reader of src/ knows.
    for (from, to) in [
        ("graphql", "access"),
        ("access", "store"),
        ("store", "entity"),
    ] {
        assert!(
            g.imports(from).any(|(m, _)| m == to),
            "{from} → {to} not found: {g:#?}"
        );
    }
    if let Some(cycle) = g.cycle() {
        panic!("the top-level modules import one another in a cycle: {cycle}");
    }
}

#[test]
fn layers_point_one_way_from_the_apis_to_the_entities() {
    let g = graph();
    let apis = ["graphql", "rest", "mcp", "http"];
    let mut wrong = Vec::new();
    // entity is the bottom: it imports nothing of the crate.
    wrong.extend(
        g.imports("entity")
            .map(|(to, f)| format!("entity → {to} (src/{f})")),
    );
    // store knows nothing of who asks: only the entities, the embedder and retried requests.
    wrong.extend(
        g.imports("store")
            .filter(|(to, _)| !["entity", "embed", "retry"].contains(to))
            .map(|(to, f)| format!("store → {to} (src/{f})")),
    );
    wrong.extend(g.forbidden("access", &apis));
    // The APIs are siblings; MCP borrows REST's shapes, neither knows GraphQL.
    wrong.extend(g.forbidden("graphql", &["rest", "mcp", "http"]));
    wrong.extend(g.forbidden("rest", &["graphql", "mcp", "http"]));
    wrong.extend(g.forbidden("mcp", &["graphql", "http"]));
    assert!(wrong.is_empty(), "imports against the layers: {wrong:#?}");
}

#[test]
fn no_module_imports_the_composition_root() {
    let g = graph();
    let root = [ROOT, "config", "start"];
    let wrong: Vec<String> = g
        .imports
        .keys()
        .filter(|m| !root.contains(&m.as_str()))
        .flat_map(|m| g.forbidden(m, &root))
        .collect();
    assert!(
        wrong.is_empty(),
        "modules own their flags and errors; the root imports them, not the reverse: {wrong:#?}"
    );
}

#[test]
fn a_planted_cycle_is_found_with_its_path() {
    let file = |path: &str, text: &str| (path.to_owned(), text.to_owned());
    let mut files = vec![
        file(
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n",
        ),
        file(
            "a.rs",
            "// use crate::c;\nconst S: &str = \"crate::c\";\nconst R: &str = r#\"crate::c\"#;\n\
             const Q: char = '\"'; fn f<'x>() {}\nuse crate::{\n    self,\n    b::{x, y::{z}},\n};",
        ),
        file("b/mod.rs", "pub mod inner;"),
        file("b/inner.rs", "fn f() { crate :: Thing::new(); }"),
        file(
            "c.rs",
            "/* crate::a /* nested */ crate::a */ pub struct Thing;",
        ),
    ];
    let g = Graph::of(&files);
    assert_eq!(g.cycle(), None, "{g:#?}");
    assert_eq!(g.imports("a").map(|(m, _)| m).collect::<Vec<_>>(), ["b"]);
    assert_eq!(g.imports("b").map(|(m, _)| m).collect::<Vec<_>>(), ["c"]);

    files.push(file("c/more.rs", "use crate::{a::One, b};"));
    assert_eq!(
        Graph::of(&files).cycle().as_deref(),
        Some("a → b (src/a.rs) → c (src/b/inner.rs) → a (src/c/more.rs)")
    );

    let into_root = vec![
        file("lib.rs", "pub mod a;"),
        file("a.rs", "use crate::serve;"),
    ];
    assert_eq!(
        Graph::of(&into_root).cycle().as_deref(),
        Some("a → lib (src/a.rs) → a (src/lib.rs)")
    );
}
