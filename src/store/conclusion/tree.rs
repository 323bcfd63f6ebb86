//! The reasoning graph that source ids span: one step of it for the `derived` field, and whole
//! trees from one recursive statement.

use sea_orm::{ConnectionTrait, FromQueryResult};

use super::{Conclusion, cols};
use crate::entity::conclusion;
use crate::store::{Store, StoreError, StoreResult, stmt};

/// `maxDepth` of a reasoning tree: 1..=20.
pub const MAX_TREE_DEPTH: i32 = 20;
/// Most nodes one reasoning tree returns, and its default.
pub const MAX_TREE_NODES: i32 = 10_000;
pub const DEFAULT_TREE_NODES: i32 = 2_000;

/// Which way a reasoning tree grows from its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeDirection {
    /// Towards premises: a node's neighbours are the conclusions it cites.
    Sources,
    /// Towards consequences: a node's neighbours are the conclusions citing it.
    Derived,
}

/// One citation: `from` cites `to` (`to` is among `from`'s source ids), whichever way the tree
/// was walked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Edge {
    pub from: String,
    pub to: String,
}

/// The live conclusions reachable from a root within `max_depth` steps, each once.
#[derive(Clone, Debug)]
pub struct ReasoningTree {
    /// The root first, then by depth (distance from the root), then creation time.
    pub nodes: Vec<TreeNode>,
    /// Every citation between two nodes of the tree, grouped by citing node in node order, each
    /// group in the citing node's sourceIds order.
    pub edges: Vec<Edge>,
    /// The tree is not the whole reachable graph: some node at `max_depth` has a live neighbour
    /// outside it (one more level would add nodes), or more than `max_nodes` were reachable.
    /// When false, nodes and edges are the whole reachable graph.
    pub truncated: bool,
}

#[derive(Clone, Debug)]
pub struct TreeNode {
    pub conclusion: Conclusion,
    /// Steps from the root along the shortest path (root = 0).
    pub depth: i32,
}

impl Store {
    /// One page of the live conclusions citing each of the (workspace, id) keys, oldest first, in
    /// one statement (a lateral subquery per key through the GIN index on `source_ids`): at most
    /// `first` per key, after the conclusion `after` (by creation time, then id; an `after` that
    /// is no conclusion of the workspace gives an empty page). Each row comes with the id of the
    /// key it was found for.
    #[tracing::instrument(name = "store.derived_by_source_ids", level = "debug", skip_all)]
    pub async fn derived_by_source_ids(
        &self,
        keys: &[(String, String)],
        first: u64,
        after: Option<&str>,
    ) -> StoreResult<Vec<(String, Conclusion)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let workspaces: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
        let ids: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &format!(
                    "SELECT k.source AS derived_for, {} \
                     FROM unnest($1::text[], $2::text[]) AS k(ws, source) \
                     CROSS JOIN LATERAL ( \
                       SELECT {columns} FROM conclusions \
                       WHERE workspace_name = k.ws AND source_ids && ARRAY[k.source] \
                         AND deleted_at IS NULL \
                         AND ($4::text IS NULL OR (created_at, id) > ( \
                           SELECT a.created_at, a.id FROM conclusions a \
                           WHERE a.workspace_name = k.ws AND a.id = $4)) \
                       ORDER BY created_at, id LIMIT $3) c \
                     ORDER BY c.created_at, c.id",
                    cols("c"),
                    columns = cols(""),
                ),
                [
                    workspaces.into(),
                    ids.into(),
                    (first as i64).into(),
                    after.map(str::to_owned).into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|row| {
                let source: String = row.try_get("", "derived_for")?;
                Ok((source, conclusion::Model::from_query_result(row, "")?))
            })
            .collect()
    }

    /// The live conclusions reachable from `root` in `direction` within `max_depth` (1..20)
    /// steps, at most `max_nodes` (1..10,000) of them, nearest first, with the citations between
    /// them, from ONE recursive statement.
    ///
    /// The walk is breadth-first, one row per level carrying the level's frontier and everything
    /// visited so far: a node is expanded once, at its smallest depth, however many paths
    /// (diamonds) or cycles lead to it, so the work is linear in the tree, never in the number of
    /// paths. Deleted conclusions are neither returned nor walked through. A deleted or unknown
    /// root → NOT_FOUND.
    #[tracing::instrument(name = "store.reasoning_tree", level = "debug", skip_all)]
    pub async fn reasoning_tree(
        &self,
        workspace: &str,
        root: &str,
        direction: TreeDirection,
        max_depth: i32,
        max_nodes: i32,
    ) -> StoreResult<ReasoningTree> {
        if !(1..=MAX_TREE_DEPTH).contains(&max_depth) {
            return Err(StoreError::invalid(format!(
                "maxDepth must be between 1 and {MAX_TREE_DEPTH} (got {max_depth})"
            )));
        }
        if !(1..=MAX_TREE_NODES).contains(&max_nodes) {
            return Err(StoreError::invalid(format!(
                "maxNodes must be between 1 and {MAX_TREE_NODES} (got {max_nodes})"
            )));
        }
        let rows = self
            .reader()
            .query_all_raw(stmt(
                &tree_sql(direction),
                [
                    workspace.into(),
                    root.into(),
                    max_depth.into(),
                    max_nodes.into(),
                ],
            ))
            .await?;
        if rows.is_empty() {
            return Err(StoreError::not_found("conclusion", root));
        }
        let mut nodes = Vec::with_capacity(rows.len());
        let mut edges = Vec::new();
        let mut truncated = false;
        for row in rows {
            let conclusion = Conclusion::from_query_result(&row, "")?;
            let depth: i32 = row.try_get("", "depth")?;
            let cites: Vec<String> = row.try_get("", "cites")?;
            truncated = row.try_get("", "truncated")?;
            edges.extend(cites.into_iter().map(|to| Edge {
                from: conclusion.id.clone(),
                to,
            }));
            nodes.push(TreeNode { conclusion, depth });
        }
        Ok(ReasoningTree {
            nodes,
            edges,
            truncated,
        })
    }
}

/// The live neighbours (`n`) of the conclusions whose ids are in the array `frontier`, as a
/// FROM clause and its conditions.
fn neighbours(direction: TreeDirection, frontier: &str) -> (String, String) {
    let live = "n.workspace_name = $1 AND n.deleted_at IS NULL";
    match direction {
        // A node's premises: unnest its source ids and look each up by primary key.
        TreeDirection::Sources => (
            format!(
                "unnest({frontier}) AS f(id) \
                 JOIN conclusions cur ON cur.id = f.id \
                 CROSS JOIN LATERAL unnest(cur.source_ids) AS s(id) \
                 JOIN conclusions n ON n.id = s.id"
            ),
            live.to_owned(),
        ),
        // A node's consequences: rows whose source ids overlap the frontier (GIN index).
        TreeDirection::Derived => (
            "conclusions n".to_owned(),
            format!("n.source_ids && {frontier} AND {live}"),
        ),
    }
}

/// The reasoning-tree statement; parameters: $1 workspace, $2 root id, $3 max depth, $4 max
/// nodes.
///
/// `bfs` has one row per level: `frontier` holds the nodes first reached at that depth and
/// `visited` every node reached so far; the next frontier is the frontier's live neighbours not
/// yet visited (a hash anti-join against `visited`), looked up through the primary key (sources)
/// or the GIN index on `source_ids` (derived). The walk stops when a level adds nothing, so
/// cycles end; when more than $4 nodes are reached, so a wide graph costs at most one level past
/// the cap; and otherwise one level past $3: that probe level is not returned, it only says
/// whether $3 cut the tree (`truncated`), and computing it like every other level keeps the plan
/// on the indexes. The first $4 nodes in the returned order are kept. Each returned node carries
/// `cites`: its source ids that are tree nodes, in sourceIds order (the edges).
fn tree_sql(direction: TreeDirection) -> String {
    let (from, cond) = neighbours(direction, "b.frontier");
    format!(
        "WITH RECURSIVE bfs(depth, frontier, visited) AS ( \
           SELECT 0, ARRAY[r.id], ARRAY[r.id] FROM conclusions r \
           WHERE r.workspace_name = $1 AND r.id = $2 AND r.deleted_at IS NULL \
         UNION ALL \
           SELECT b.depth + 1, nxt.ids, b.visited || nxt.ids \
           FROM bfs b CROSS JOIN LATERAL ( \
             SELECT array_agg(DISTINCT n.id) AS ids FROM {from} \
             LEFT JOIN unnest(b.visited) AS v(id) ON v.id = n.id \
             WHERE {cond} AND v.id IS NULL \
           ) nxt \
           WHERE b.depth <= $3 AND cardinality(b.visited) <= $4 AND nxt.ids IS NOT NULL \
         ), \
         reached AS ( \
           SELECT u.id, b.depth FROM bfs b CROSS JOIN LATERAL unnest(b.frontier) AS u(id) \
           WHERE b.depth <= $3 \
         ), \
         tree AS ( \
           SELECT r.id, r.depth FROM reached r JOIN conclusions c ON c.id = r.id \
           ORDER BY r.depth, c.created_at, c.id LIMIT $4 \
         ), \
         cites AS ( \
           SELECT c.id, array_agg(s.id ORDER BY s.ord) AS ids \
           FROM tree t JOIN conclusions c ON c.id = t.id \
           CROSS JOIN LATERAL unnest(c.source_ids) WITH ORDINALITY AS s(id, ord) \
           JOIN tree t2 ON t2.id = s.id \
           GROUP BY c.id \
         ), \
         beyond AS (SELECT EXISTS (SELECT 1 FROM bfs WHERE depth > $3) \
           OR (SELECT count(*) FROM reached) > $4 AS truncated) \
         SELECT {cols}, t.depth, COALESCE(ci.ids, '{{}}'::text[]) AS cites, beyond.truncated \
         FROM tree t JOIN conclusions c ON c.id = t.id \
         LEFT JOIN cites ci ON ci.id = t.id \
         CROSS JOIN beyond \
         ORDER BY t.depth, c.created_at, c.id",
        cols = cols("c"),
    )
}
