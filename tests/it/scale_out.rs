//! The Citus path of docs/scale-out.md ("From 10M to 1B messages") checked on the SQL the server
//! really runs: every statement of a client's operation that reads or writes a distributed table
//! must pin that table's distribution column (`workspace_name`; `name` on `workspaces`) to one
//! value, so that Citus can route it to one shard. The statements are captured from the store's
//! connection while each operation runs through the GraphQL schema, parsed with `sqlparser`, and
//! every scope (each SELECT, CTE, subquery, INSERT, UPDATE, DELETE) is checked: a distributed
//! table is pinned when a conjunct of its WHERE or join condition equates its key with a constant,
//! a bound value, an outer query's column, or the key of another table pinned in the same scope.
//! What cannot be pinned is listed in `EXCEPTIONS` with the reason, and an exception that no
//! statement needs fails the test too.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

use sea_orm::{ConnectionTrait, DbBackend, Statement as DbStatement};
use serde_json::json;
use sqlparser::ast::{
    BinaryOperator, Expr, FromTable, InTarget, JoinConstraint, JoinOperator, ObjectName,
    ObjectNamePart, Query, SetExpr, Statement, TableFactor, TableObject, TableWithJoins,
    UpdateTableFromKind, Visit, Visitor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::harness::TestApp;

/// Tables that are not distributed on Citus, and why.
const NOT_DISTRIBUTED: &[(&str, &str)] = &[
    (
        "honcho_meta",
        "reference table: the embedding model and dimension, read at start-up",
    ),
    (
        "seaql_migrations",
        "local to the coordinator: the migrator's own bookkeeping",
    ),
];

/// Distributed tables that have no `workspace_name` yet: the Citus schema change adds it (filled
/// from the parent row), so that they co-locate with their parents.
const KEY_TO_ADD: &[&str] = &["conclusion_messages", "deriver_items", "peer_card_sources"];

/// Statements that reach a distributed table without its key today: (operation, or "" for any;
/// table; a fragment of the statement; why, and what would make it single-shard). Each is
/// in the table of multi-shard statements of docs/scale-out.md, with its change.
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[
    (
        "Query.workspaces",
        "workspaces",
        "FROM \"workspaces\"",
        "the admin listing of every workspace: a fan-out to every shard, by design",
    ),
    (
        "",
        "conclusion_messages",
        "",
        "no workspace_name until the schema change (KEY_TO_ADD)",
    ),
    (
        "",
        "deriver_items",
        "",
        "no workspace_name until the schema change (KEY_TO_ADD)",
    ),
    (
        "",
        "peer_card_sources",
        "",
        "no workspace_name until the schema change (KEY_TO_ADD)",
    ),
    (
        "deleteMessage",
        "deriver_units",
        "FROM (SELECT unit_id",
        "units found through deriver_items' unit ids: pinned once deriver_items has the key",
    ),
    (
        "",
        "",
        "AS k(w, ",
        "a dataloader's keys as arrays through unnest: Citus cannot prune a join on them; a \
         request's keys share one workspace, so an added `workspace_name = $1` pins it",
    ),
    (
        "",
        "messages",
        "WITH \"terms\" AS",
        "hybrid search re-reads its hits by id (the final rows, the common-lexeme rescoring): \
         every leg filters on the workspace, but the re-read needs its own `workspace_name =`",
    ),
    (
        "",
        "messages",
        "WHERE \"messages\".\"id\" IN (SELECT",
        "a page of messages: the outer query re-reads the inner page by id; it needs the \
         workspace filter too",
    ),
    (
        "",
        "messages",
        "WITH events AS",
        "the webhook events of a batch read its rows by internal id: needs `workspace_name =`",
    ),
    (
        "createConclusions",
        "conclusions",
        "UPDATE conclusions t SET embedding",
        "the embeddings of new conclusions written by id from unnest: needs `workspace_name =`",
    ),
    (
        "",
        "messages",
        "FROM session_summaries s JOIN messages m ON m.id = s.message_id",
        "a summary's last message joined by internal id: needs \
         `m.workspace_name = s.workspace_name`",
    ),
    (
        "",
        "conclusions",
        "JOIN peer_card_sources s ON s.entry_id = e.id",
        "a card entry's sources joined by conclusion id: needs \
         `c.workspace_name = e.workspace_name` (and peer_card_sources its key)",
    ),
    (
        "reasoningTree",
        "conclusions",
        "WITH RECURSIVE bfs",
        "each step of the walk joins the frontier's ids from unnest: needs \
         `cur.workspace_name = r.workspace_name` in the recursive term",
    ),
];

/// The operations checked, in order: (name, GraphQL document). `{m1}` and `{c1}` are replaced by
/// a message's and a conclusion's id from the set-up.
const OPERATIONS: &[(&str, &str)] = &[
    (
        "Query.workspaces",
        r#"{ workspaces { totalCount nodes { id } } }"#,
    ),
    ("Workspace", r#"{ workspace(id: "ws") { id metadata } }"#),
    (
        "Workspace.peer",
        r#"{ workspace(id: "ws") { peer(id: "alice") { id metadata } } }"#,
    ),
    (
        "Workspace.peers",
        r#"{ workspace(id: "ws") { peers(first: 10) { totalCount nodes { id } } } }"#,
    ),
    (
        "Workspace.sessions",
        r#"{ workspace(id: "ws") { sessions(first: 10) { totalCount nodes { id peers { peerId peer { id } } } } } }"#,
    ),
    (
        "Workspace.session",
        r#"{ workspace(id: "ws") { session(id: "s1") { id peers { peerId } } } }"#,
    ),
    (
        "Session.messages",
        r#"{ workspace(id: "ws") { session(id: "s1") { messages(first: 50) { totalCount nodes { id content peerId createdAt peer { id } session { id } } } } } }"#,
    ),
    (
        "Session.messages by peer",
        r#"{ workspace(id: "ws") { session(id: "s1") { messages(first: 50, filters: {peer_id: "alice"}) { nodes { id } } } } }"#,
    ),
    (
        "Workspace.message",
        r#"{ workspace(id: "ws") { message(id: "{m1}") { id content peer { id } session { id } context(before: 2, after: 2) { id } } } }"#,
    ),
    (
        "Workspace.messages",
        r#"{ workspace(id: "ws") { messages(first: 20) { totalCount nodes { id } } } }"#,
    ),
    (
        "Peer.messages",
        r#"{ workspace(id: "ws") { peer(id: "alice") { messages(first: 20) { totalCount nodes { id } } sessions { totalCount } } } }"#,
    ),
    (
        "Session.search",
        r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "garden tomatoes", limit: 10) { ... on MessageHits { results { id } } } } } }"#,
    ),
    (
        "Session.search with context",
        r#"{ workspace(id: "ws") { session(id: "s1") { search(query: "garden", includeContext: true, contextWindow: 2) { ... on SnippetHits { results { id } snippets { context { id } } } } } } }"#,
    ),
    (
        "Workspace.search",
        r#"{ workspace(id: "ws") { search(query: "garden tomatoes", limit: 10, includeContext: true, contextWindow: 2) { ... on SnippetHits { results { id } snippets { context { id } } } } } }"#,
    ),
    (
        "Peer.search",
        r#"{ workspace(id: "ws") { peer(id: "alice") { search(query: "garden") { __typename } } } }"#,
    ),
    (
        "Workspace.conclusion",
        r#"{ workspace(id: "ws") { conclusion(id: "{c1}") { id sources { id } observer { id } } } }"#,
    ),
    (
        "reasoningTree",
        r#"{ workspace(id: "ws") { conclusion(id: "{c2}") { reasoningTree(direction: SOURCES, maxDepth: 5) { nodes { id } edges { from to } } } } }"#,
    ),
    (
        "Workspace.conclusions",
        r#"{ workspace(id: "ws") { conclusions(first: 10) { totalCount nodes { id } } } }"#,
    ),
    (
        "Workspace.queryConclusions",
        r#"{ workspace(id: "ws") { queryConclusions(query: "tea") { id } } }"#,
    ),
    (
        "Workspace.deriverStatus",
        r#"{ workspace(id: "ws") { deriverStatus { pending failed dreams { pending } } } }"#,
    ),
    (
        "getOrCreateScope",
        r#"mutation { getOrCreateScope(workspaceId: "ws", id: "sc1") { id } }"#,
    ),
    (
        "addSessionsToScope",
        r#"mutation { addSessionsToScope(workspaceId: "ws", scopeId: "sc1", sessionIds: ["s1", "s2"]) { id } }"#,
    ),
    (
        "Workspace.scopes",
        r#"{ workspace(id: "ws") { scopes { id } scope(id: "sc1") { id sessions { id } status { sessionCount messageCount conclusionCount pendingWorkUnits } } } }"#,
    ),
    (
        "Workspace.search in a scope",
        r#"{ workspace(id: "ws") { search(query: "garden", scope: "sc1") { __typename } } }"#,
    ),
    (
        "removeSessionFromScope",
        r#"mutation { removeSessionFromScope(workspaceId: "ws", scopeId: "sc1", sessionId: "s2") { id } }"#,
    ),
    (
        "Session.summaries and context",
        r#"{ workspace(id: "ws") { session(id: "s1") { summaries { short { content } long { content } } context(tokens: 1000) { summary { content } messages { id } } } } }"#,
    ),
    (
        "Peer.card and representation",
        r#"{ workspace(id: "ws") { peer(id: "alice") { card(target: "bob") { content sourceIds } representation(target: "bob") } } }"#,
    ),
    (
        "Workspace.export",
        r#"{ workspace(id: "ws") { export { path peers sessions messages conclusions } } }"#,
    ),
    (
        "createMessages",
        r#"mutation { createMessages(workspaceId: "ws", sessionId: "s1", messages: [{peerId: "alice", content: "the tomatoes in my garden"}, {peerId: "bob", content: "lovely"}]) { id seqInSession } }"#,
    ),
    (
        "createMessages, new session and peer",
        r#"mutation { createMessages(workspaceId: "ws", sessionId: "s3", messages: [{peerId: "erin", content: "hello"}]) { id } }"#,
    ),
    (
        "getOrCreatePeer",
        r#"mutation { getOrCreatePeer(workspaceId: "ws", id: "frank") { id } }"#,
    ),
    (
        "updatePeer",
        r#"mutation { updatePeer(workspaceId: "ws", id: "alice", metadata: {a: 1}) { id } }"#,
    ),
    (
        "getOrCreateSession",
        r#"mutation { getOrCreateSession(workspaceId: "ws", id: "s4", peers: [{peerId: "alice"}]) { id } }"#,
    ),
    (
        "updateSession",
        r#"mutation { updateSession(workspaceId: "ws", id: "s1", metadata: {a: 1}) { id } }"#,
    ),
    (
        "addPeersToSession",
        r#"mutation { addPeersToSession(workspaceId: "ws", sessionId: "s1", peers: [{peerId: "dave"}]) { id } }"#,
    ),
    (
        "setSessionPeerConfig",
        r#"mutation { setSessionPeerConfig(workspaceId: "ws", sessionId: "s1", peerId: "alice", observeMe: false) { peerId } }"#,
    ),
    (
        "removePeersFromSession",
        r#"mutation { removePeersFromSession(workspaceId: "ws", sessionId: "s1", peerIds: ["dave"]) { id } }"#,
    ),
    (
        "updateMessage",
        r#"mutation { updateMessage(workspaceId: "ws", id: "{m1}", metadata: {a: 1}) { id } }"#,
    ),
    (
        "createConclusions",
        r#"mutation { createConclusions(workspaceId: "ws", conclusions: [{content: "alice grows tomatoes", observerId: "bob", observedId: "alice"}]) { id } }"#,
    ),
    (
        "updateConclusion",
        r#"mutation { updateConclusion(workspaceId: "ws", id: "{c1}", metadata: {a: 1}) { id } }"#,
    ),
    (
        "cloneSession",
        r#"mutation { cloneSession(workspaceId: "ws", id: "s1") { id } }"#,
    ),
    (
        "deleteConclusion",
        r#"mutation { deleteConclusion(workspaceId: "ws", id: "{c1}") }"#,
    ),
    (
        "deleteMessage",
        r#"mutation { deleteMessage(workspaceId: "ws", id: "{m1}") { messages } }"#,
    ),
    (
        "deleteSession",
        r#"mutation { deleteSession(workspaceId: "ws", id: "s4") }"#,
    ),
];

/// The distribution column of each distributed table, read from the schema: every table with a
/// `workspace_name`, `workspaces` by its `name`, and the tables that get the column.
async fn distributed(app: &TestApp) -> HashMap<String, String> {
    let rows = app
        .store
        .db()
        .query_all_raw(DbStatement::from_string(
            DbBackend::Postgres,
            "SELECT t.table_name, bool_or(c.column_name = 'workspace_name') AS keyed \
             FROM information_schema.tables t \
             JOIN information_schema.columns c USING (table_schema, table_name) \
             WHERE t.table_schema = 'public' AND t.table_type = 'BASE TABLE' GROUP BY t.table_name",
        ))
        .await
        .unwrap();
    let mut keys = HashMap::new();
    let mut unkeyed = BTreeSet::new();
    for r in rows {
        let table: String = r.try_get("", "table_name").unwrap();
        let keyed: bool = r.try_get("", "keyed").unwrap();
        if table == "workspaces" {
            keys.insert(table, "name".to_owned());
        } else if keyed || KEY_TO_ADD.contains(&table.as_str()) {
            keys.insert(table, "workspace_name".to_owned());
        } else {
            unkeyed.insert(table);
        }
    }
    let listed: BTreeSet<String> = NOT_DISTRIBUTED
        .iter()
        .map(|(t, _)| (*t).to_owned())
        .collect();
    assert_eq!(
        unkeyed, listed,
        "a table without workspace_name must be listed in NOT_DISTRIBUTED (reference or local) \
         or KEY_TO_ADD (distributed once it gets the column)"
    );
    keys
}

fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(i) => Some(i.value.to_lowercase()),
        _ => None,
    }
}

/// The relations of one scope: alias → table (lowercase), for every table and derived table.
#[derive(Default)]
struct Scope {
    relations: Vec<(String, Option<String>)>,
    conjuncts: Vec<Expr>,
}

impl Scope {
    fn add_factor(&mut self, f: &TableFactor) {
        match f {
            TableFactor::Table { name, alias, .. } => {
                let table = last_name(name);
                let alias = alias
                    .as_ref()
                    .map(|a| a.name.value.to_lowercase())
                    .or_else(|| table.clone())
                    .unwrap_or_default();
                self.relations.push((alias, table));
            }
            TableFactor::Derived { alias, .. } | TableFactor::UNNEST { alias, .. } => {
                if let Some(a) = alias {
                    self.relations.push((a.name.value.to_lowercase(), None));
                }
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.add(table_with_joins),
            _ => {}
        }
    }

    fn add(&mut self, t: &TableWithJoins) {
        self.add_factor(&t.relation);
        for j in &t.joins {
            self.add_factor(&j.relation);
            let c = match &j.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c) => Some(c),
                _ => None,
            };
            if let Some(JoinConstraint::On(e)) = c {
                self.push_conjuncts(e);
            }
        }
    }

    fn push_conjuncts(&mut self, e: &Expr) {
        match e {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.push_conjuncts(left);
                self.push_conjuncts(right);
            }
            Expr::Nested(inner) => self.push_conjuncts(inner),
            other => self.conjuncts.push(other.clone()),
        }
    }

    /// The distributed tables of this scope that no conjunct pins: (alias, table).
    fn unpinned(&self, keys: &HashMap<String, String>) -> Vec<(String, String)> {
        let distributed: Vec<(String, String, String)> = self
            .relations
            .iter()
            .filter_map(|(alias, table)| {
                let t = table.as_ref()?;
                keys.get(t).map(|k| (alias.clone(), t.clone(), k.clone()))
            })
            .collect();
        if distributed.is_empty() {
            return Vec::new();
        }
        let in_scope: BTreeSet<&str> = self.relations.iter().map(|(a, _)| a.as_str()).collect();
        // Which distributed alias a column reference is the key of, if any.
        let key_of = |e: &Expr| -> Option<String> {
            let e = strip(e);
            let (q, col) = match e {
                Expr::Identifier(i) => (None, i.value.to_lowercase()),
                Expr::CompoundIdentifier(p) if p.len() == 2 => {
                    (Some(p[0].value.to_lowercase()), p[1].value.to_lowercase())
                }
                _ => return None,
            };
            let hits: Vec<&(String, String, String)> = distributed
                .iter()
                .filter(|(a, _, k)| *k == col && q.as_ref().is_none_or(|q| q == a))
                .collect();
            (hits.len() == 1).then(|| hits[0].0.clone())
        };
        // A value the statement fixes: a literal, a bound value, or an outer query's column.
        let fixed = |e: &Expr| -> bool {
            match strip(e) {
                Expr::Value(_) | Expr::TypedString { .. } => true,
                Expr::CompoundIdentifier(p) if p.len() == 2 => {
                    !in_scope.contains(p[0].value.to_lowercase().as_str())
                }
                Expr::Array(a) => {
                    a.elem.len() == 1 && a.elem.iter().all(|x| matches!(strip(x), Expr::Value(_)))
                }
                _ => false,
            }
        };
        let mut pinned: BTreeSet<String> = BTreeSet::new();
        let mut links: Vec<(String, String)> = Vec::new();
        for c in &self.conjuncts {
            match c {
                Expr::BinaryOp {
                    left,
                    op: BinaryOperator::Eq,
                    right,
                } => match (key_of(left), key_of(right)) {
                    (Some(a), Some(b)) => links.push((a, b)),
                    (Some(a), None) if fixed(right) => {
                        pinned.insert(a);
                    }
                    (None, Some(b)) if fixed(left) => {
                        pinned.insert(b);
                    }
                    _ => {}
                },
                Expr::In {
                    expr,
                    target: InTarget::List(list),
                    negated: false,
                    ..
                } if list.len() == 1 && fixed(&list[0]) => {
                    if let Some(a) = key_of(expr) {
                        pinned.insert(a);
                    }
                }
                Expr::AnyOp {
                    left,
                    compare_op: BinaryOperator::Eq,
                    right,
                    ..
                } if fixed(right) => {
                    if let Some(a) = key_of(left) {
                        pinned.insert(a);
                    }
                }
                _ => {}
            }
        }
        // Co-located joins: a key equal to a pinned key is pinned.
        loop {
            let before = pinned.len();
            for (a, b) in &links {
                if pinned.contains(a) || pinned.contains(b) {
                    pinned.insert(a.clone());
                    pinned.insert(b.clone());
                }
            }
            if pinned.len() == before {
                break;
            }
        }
        distributed
            .into_iter()
            .filter(|(a, _, _)| !pinned.contains(a))
            .map(|(a, t, _)| (a, t))
            .collect()
    }
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Cast { expr, .. } | Expr::Nested(expr) => strip(expr),
        other => other,
    }
}

/// Every query of a statement, at any depth (CTEs, subqueries, INSERT … SELECT).
#[derive(Default)]
struct Queries(Vec<Query>);

impl Visitor for Queries {
    type Break = ();
    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        self.0.push(q.clone());
        ControlFlow::Continue(())
    }
}

/// The tables of `sql` it reads or writes without pinning their key: (table, why).
fn check(sql: &str, keys: &HashMap<String, String>) -> Result<Vec<(String, String)>, String> {
    // pgvector's operators are unknown to the parser; which operator orders the rows does not
    // matter here.
    let mut text = sql.to_owned();
    for op in ["<~>", "<=>", "<#>", "<+>", "<%>"] {
        text = text.replace(op, " + ");
    }
    // Nor are the weaker row locks; the strength of a lock does not matter here either.
    text = text
        .replace("FOR KEY SHARE", "FOR SHARE")
        .replace("FOR NO KEY UPDATE", "FOR UPDATE");
    let statements = Parser::parse_sql(&PostgreSqlDialect {}, &text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for s in &statements {
        check_statement(s, keys, &mut out);
        let mut queries = Queries::default();
        let _ = s.visit(&mut queries);
        for q in &queries.0 {
            check_set_expr(&q.body, keys, &mut out);
        }
    }
    Ok(out)
}

fn check_set_expr(body: &SetExpr, keys: &HashMap<String, String>, out: &mut Vec<(String, String)>) {
    match body {
        SetExpr::Select(s) => {
            let mut scope = Scope::default();
            for t in &s.from {
                scope.add(t);
            }
            if let Some(w) = &s.selection {
                scope.push_conjuncts(w);
            }
            for (alias, table) in scope.unpinned(keys) {
                out.push((table, format!("SELECT reads {alias} without its key")));
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            check_set_expr(left, keys, out);
            check_set_expr(right, keys, out);
        }
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => {
            check_statement(s, keys, out)
        }
        _ => {}
    }
}

fn check_statement(s: &Statement, keys: &HashMap<String, String>, out: &mut Vec<(String, String)>) {
    match s {
        Statement::Insert(ins) => {
            let TableObject::TableName(name) = &ins.table else {
                return;
            };
            let Some(table) = last_name(name) else { return };
            if let Some(key) = keys.get(&table) {
                let has = ins
                    .columns
                    .iter()
                    .any(|c| last_name(c).as_deref() == Some(key.as_str()));
                if !has {
                    out.push((table, format!("INSERT without {key}")));
                }
            }
        }
        Statement::Update(u) => {
            let mut scope = Scope::default();
            scope.add(&u.table);
            if let Some(UpdateTableFromKind::BeforeSet(f) | UpdateTableFromKind::AfterSet(f)) =
                &u.from
            {
                for t in f {
                    scope.add(t);
                }
            }
            if let Some(w) = &u.selection {
                scope.push_conjuncts(w);
            }
            for (alias, table) in scope.unpinned(keys) {
                out.push((table, format!("UPDATE of {alias} without its key")));
            }
        }
        Statement::Delete(d) => {
            let mut scope = Scope::default();
            let (FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f)) = &d.from;
            for t in f.iter().chain(d.using.iter().flatten()) {
                scope.add(t);
            }
            if let Some(w) = &d.selection {
                scope.push_conjuncts(w);
            }
            for (alias, table) in scope.unpinned(keys) {
                out.push((table, format!("DELETE from {alias} without its key")));
            }
        }
        _ => {}
    }
}

#[test]
fn the_checker_tells_pinned_statements_from_fan_outs() {
    let keys: HashMap<String, String> = [
        ("messages", "workspace_name"),
        ("sessions", "workspace_name"),
        ("workspaces", "name"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    let bad = |sql: &str| check(sql, &keys).unwrap();
    assert!(bad("SELECT * FROM messages WHERE workspace_name = $1 AND id = $2").is_empty());
    assert!(
        bad(
            "SELECT * FROM messages m JOIN sessions s ON s.workspace_name = m.workspace_name \
                 AND s.name = m.session_name WHERE m.workspace_name = 'w'"
        )
        .is_empty()
    );
    assert!(bad("SELECT * FROM workspaces WHERE name = 'w'").is_empty());
    assert!(
        bad(
            "SELECT * FROM messages m WHERE m.workspace_name = 'w' AND EXISTS \
                 (SELECT 1 FROM sessions s WHERE s.workspace_name = m.workspace_name)"
        )
        .is_empty()
    );
    assert!(bad("INSERT INTO messages (workspace_name, content) VALUES ('w', 'x')").is_empty());
    assert_eq!(bad("SELECT * FROM messages WHERE id = 3").len(), 1);
    assert_eq!(
        bad("SELECT * FROM messages WHERE workspace_name = 'a' OR id = 3").len(),
        1
    );
    assert_eq!(
        bad("SELECT * FROM messages WHERE workspace_name = ANY(ARRAY['a', 'b'])").len(),
        1
    );
    assert_eq!(
        bad(
            "SELECT * FROM messages m JOIN sessions s ON s.name = m.session_name \
             WHERE m.workspace_name = 'w'"
        ),
        vec![(
            "sessions".to_owned(),
            "SELECT reads s without its key".to_owned()
        )]
    );
    assert_eq!(
        bad("UPDATE messages SET content = 'x' WHERE id = 1").len(),
        1
    );
    assert_eq!(bad("DELETE FROM sessions WHERE name = 's'").len(), 1);
    assert_eq!(bad("INSERT INTO sessions (name) VALUES ('s')").len(), 1);
    assert_eq!(bad("SELECT 1 FROM (SELECT * FROM messages) x").len(), 1);
}

#[tokio::test]
async fn every_statement_of_a_workspace_operation_filters_on_the_workspace() {
    let app = TestApp::with_embedder().await;
    let write = |s: &str, p: &str, c: &str| {
        format!(
            "mutation {{ createMessages(workspaceId: \"ws\", sessionId: \"{s}\", messages: \
             [{{peerId: \"{p}\", content: \"{c}\"}}]) {{ id }} }}"
        )
    };
    let d = app
        .ok(
            &write("s1", "alice", "my garden is full of tomatoes"),
            json!({}),
        )
        .await;
    let m1 = d["createMessages"][0]["id"].as_str().unwrap().to_owned();
    app.ok(&write("s1", "bob", "I prefer tea in the garden"), json!({}))
        .await;
    app.ok(&write("s2", "carol", "the garden party"), json!({}))
        .await;
    app.ok(
        "mutation { createMessages(workspaceId: \"other\", sessionId: \"x\", messages: [{peerId: \"zed\", content: \"far away\"}]) { id } }",
        json!({}),
    )
    .await;
    let d = app
        .ok(
            r#"mutation { createConclusions(workspaceId: "ws", conclusions: [{content: "bob likes tea", observerId: "alice", observedId: "bob", sessionId: "s1"}]) { id } }"#,
            json!({}),
        )
        .await;
    let c1 = d["createConclusions"][0]["id"].as_str().unwrap().to_owned();
    let d = app
        .ok(
            &format!(
                r#"mutation {{ recordDerivedConclusion(workspaceId: "ws", input: {{content: "bob is calm", observerId: "alice", observedId: "bob", level: DEDUCTIVE, sourceIds: ["{c1}"]}}) {{ id }} }}"#
            ),
            json!({}),
        )
        .await;
    let c2 = d["recordDerivedConclusion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let keys = distributed(&app).await;
    app.take_sql();

    let mut found: Vec<(String, String, String, String)> = Vec::new();
    let mut used: BTreeMap<usize, usize> = BTreeMap::new();
    let mut statements = 0;
    for (op, doc) in OPERATIONS {
        let doc = doc
            .replace("{m1}", &m1)
            .replace("{c1}", &c1)
            .replace("{c2}", &c2);
        app.ok(&doc, json!({})).await;
        for sql in app.take_sql() {
            statements += 1;
            let problems = match check(&sql, &keys) {
                Ok(p) => p,
                Err(e) => {
                    let touches = keys.keys().any(|t| sql.contains(t.as_str()));
                    assert!(
                        !touches,
                        "{op}: cannot parse a statement on a distributed table ({e}): {sql}"
                    );
                    continue;
                }
            };
            for (table, why) in problems {
                match EXCEPTIONS.iter().position(|(o, t, frag, _)| {
                    (o.is_empty() || *o == *op)
                        && (t.is_empty() || *t == table)
                        && sql.contains(frag)
                }) {
                    Some(i) => *used.entry(i).or_default() += 1,
                    None => found.push(((*op).to_owned(), table, why, sql.clone())),
                }
            }
        }
    }
    assert!(
        statements > OPERATIONS.len(),
        "the statements were captured"
    );
    let report: Vec<String> = found
        .iter()
        .map(|(op, table, why, sql)| {
            // Vectors inlined as literals make a statement kilobytes long.
            let short: String = sql.chars().take(400).collect();
            format!("{op}: {table}: {why}\n    {short}")
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} statements reach a distributed table without its key:\n{}",
        report.len(),
        report.join("\n")
    );
    for (i, (op, table, _, _)) in EXCEPTIONS.iter().enumerate() {
        assert!(
            used.contains_key(&i),
            "the exception for {op} on {table} is no longer needed: remove it"
        );
    }
}
