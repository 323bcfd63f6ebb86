import { useCallback, useEffect, useMemo, useState } from 'react';
import {
  Background,
  Controls,
  Handle,
  MarkerType,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
} from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import dagre from '@dagrejs/dagre';
import type { Edge, Node, NodeProps } from '@xyflow/react';
import { gql } from './api.ts';
import type { ConclusionFieldsFragment as Conclusion, ReasoningTreeQuery } from './gql/graphql';
import { LevelLegend, levelColor } from './levels.jsx';
import { LIST_QUERY, SEMANTIC_QUERY, TREE_QUERY } from './queries.ts';
import { navigate } from './route.js';

type Walk = NonNullable<NonNullable<ReasoningTreeQuery['workspace']>['conclusion']>['premises'];
interface Graph {
  nodes: Conclusion[];
  edges: { source: string; target: string }[];
}
interface Tree {
  root: Conclusion;
  graph: Graph;
  truncated: boolean;
}
type ConclusionNodeData = { conclusion: Conclusion; isRoot: boolean };

const NODE_W = 250;
const NODE_H = 86;
const EDGE_COLOR = '#64748b';

/** Both trees of the root merged into one graph; edges point from premise to conclusion. */
function mergeTrees(root: Conclusion, trees: Walk[]): Graph {
  const nodes = new Map<string, Conclusion>([[root.id, root]]);
  const edges = new Map<string, { source: string; target: string }>();
  for (const tree of trees) {
    for (const n of tree.nodes) nodes.set(n.id, n);
    // `from` cites `to`: draw the premise (`to`) above what was derived from it (`from`).
    for (const e of tree.edges) edges.set(`${e.to}->${e.from}`, { source: e.to, target: e.from });
  }
  return { nodes: [...nodes.values()], edges: [...edges.values()] };
}

function layout(graph: Graph, rootId: string): { nodes: Node<ConclusionNodeData>[]; edges: Edge[] } {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 30, ranksep: 70 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.id, { width: NODE_W, height: NODE_H });
  for (const e of graph.edges) g.setEdge(e.source, e.target);
  dagre.layout(g);
  const nodes = graph.nodes.map((c) => {
    const { x, y } = g.node(c.id);
    return {
      id: c.id,
      type: 'conclusion',
      position: { x: x - NODE_W / 2, y: y - NODE_H / 2 },
      data: { conclusion: c, isRoot: c.id === rootId },
    };
  });
  const edges = graph.edges.map((e) => ({
    id: `${e.source}->${e.target}`,
    source: e.source,
    target: e.target,
    style: { stroke: EDGE_COLOR, strokeWidth: 1.5 },
    markerEnd: { type: MarkerType.ArrowClosed, color: EDGE_COLOR },
  }));
  return { nodes, edges };
}

function ConclusionNode({ data: { conclusion: c, isRoot } }: NodeProps<Node<ConclusionNodeData>>) {
  return (
    <div
      className={`tree-node${isRoot ? ' root' : ''}`}
      style={{ borderColor: levelColor(c.level), width: NODE_W, height: NODE_H }}
      data-level={c.level}
      title={`${c.content}\n\n${c.level} · derived ${c.timesDerived}× · ${c.id}\nclick to re-root`}
    >
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <div className="tree-node-head">
        <span className="level-badge" style={{ background: levelColor(c.level) }}>
          {c.level.toLowerCase()}
        </span>
        <span className="times" title="timesDerived">×{c.timesDerived}</span>
      </div>
      <div className="tree-node-content">{c.content}</div>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  );
}

const nodeTypes = { conclusion: ConclusionNode };

function TreeGraph({ workspaceId, tree }: { workspaceId: string; tree: Tree }) {
  const { fitView } = useReactFlow();
  const { nodes, edges } = useMemo(() => layout(tree.graph, tree.root.id), [tree]);
  useEffect(() => {
    const t = setTimeout(() => fitView({ padding: 0.2, maxZoom: 1.2 }), 50);
    return () => clearTimeout(t);
  }, [nodes, fitView]);
  return (
    <div className="tree-canvas" data-nodes={nodes.length} data-edges={edges.length}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        nodesDraggable={false}
        nodesConnectable={false}
        onNodeClick={(_, node) => navigate('/tree', { workspace: workspaceId, id: node.id })}
        fitView
        proOptions={{ hideAttribution: true }}
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}

function ConclusionList({ workspaceId, selected }: { workspaceId: string; selected: string }) {
  const [items, setItems] = useState<Conclusion[] | null>(null);
  const [total, setTotal] = useState(0);
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const load = useCallback(
    async (query: string) => {
      setError('');
      try {
        if (query) {
          const data = await gql(SEMANTIC_QUERY, { workspaceId, query });
          const found = data.workspace?.queryConclusions ?? [];
          setItems(found);
          setTotal(found.length);
        } else {
          const data = await gql(LIST_QUERY, { workspaceId });
          setItems(data.workspace?.conclusions.nodes ?? []);
          setTotal(data.workspace?.conclusions.totalCount ?? 0);
        }
      } catch (e) {
        setItems([]);
        setError(e instanceof Error ? e.message : String(e));
      }
    },
    [workspaceId],
  );
  useEffect(() => {
    if (workspaceId) load('');
  }, [workspaceId, load]);
  return (
    <section className="conclusion-picker">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          load(text.trim());
        }}
      >
        <input
          id="tree-find"
          value={text}
          placeholder="find by meaning (queryConclusions)…"
          onChange={(e) => setText(e.target.value)}
        />
      </form>
      {error && <pre className="error">{error}</pre>}
      {items && (
        <p className="muted">
          {text ? `${items.length} closest` : `${items.length} of ${total}`} conclusions
        </p>
      )}
      <ul className="conclusion-list">
        {items?.map((c) => (
          <li key={c.id}>
            <button
              type="button"
              className={c.id === selected ? 'selected' : undefined}
              data-id={c.id}
              onClick={() => navigate('/tree', { workspace: workspaceId, id: c.id })}
            >
              <i style={{ background: levelColor(c.level) }} />
              <span>{c.content}</span>
              <small>×{c.timesDerived}</small>
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

export default function TreePage({ params }: { params: URLSearchParams }) {
  const workspaceId = params.get('workspace') ?? 'demo';
  const id = params.get('id') ?? '';
  const maxDepth = Number(params.get('depth') ?? 5);
  const [workspaceInput, setWorkspaceInput] = useState(workspaceId);
  const [idInput, setIdInput] = useState(id);
  const [tree, setTree] = useState<Tree | null>(null);
  const [error, setError] = useState('');
  useEffect(() => setWorkspaceInput(workspaceId), [workspaceId]);
  useEffect(() => setIdInput(id), [id]);
  useEffect(() => {
    let live = true;
    setError('');
    if (!id) {
      setTree(null);
      return undefined;
    }
    gql(TREE_QUERY, { workspaceId, id, maxDepth })
      .then((data) => {
        if (!live) return;
        const root = data.workspace?.conclusion;
        if (!root) {
          setTree(null);
          setError(`No conclusion ${id} in workspace ${workspaceId}.`);
          return;
        }
        const { premises, consequences } = root;
        setTree({
          root,
          graph: mergeTrees(root, [premises, consequences]),
          truncated: premises.truncated || consequences.truncated,
        });
      })
      .catch((e: unknown) => {
        if (!live) return;
        setTree(null);
        setError(e instanceof Error ? e.message : String(e));
      });
    return () => {
      live = false;
    };
  }, [workspaceId, id, maxDepth]);

  return (
    <div className="tree-page">
      <aside className="sidebar">
        <form
          className="stack"
          onSubmit={(e) => {
            e.preventDefault();
            navigate('/tree', { workspace: workspaceInput.trim(), id: idInput.trim(), depth: params.get('depth') });
          }}
        >
          <label>
            Workspace
            <input id="tree-workspace" value={workspaceInput} onChange={(e) => setWorkspaceInput(e.target.value)} />
          </label>
          <label>
            Conclusion id
            <input id="tree-id" value={idInput} placeholder="pick one below" onChange={(e) => setIdInput(e.target.value)} />
          </label>
          <label>
            Depth each way
            <select
              value={maxDepth}
              onChange={(e) => navigate('/tree', { workspace: workspaceId, id, depth: e.target.value })}
            >
              {[1, 2, 3, 5, 8, 12, 20].map((d) => (
                <option key={d}>{d}</option>
              ))}
            </select>
          </label>
          <button type="submit">Show tree</button>
        </form>
        {tree && (
          <section className="root-details">
            <h3>Root</h3>
            <p>{tree.root.content}</p>
            <dl>
              <dt>level</dt>
              <dd>{tree.root.level.toLowerCase()}</dd>
              <dt>timesDerived</dt>
              <dd>{tree.root.timesDerived}</dd>
              <dt>observer → observed</dt>
              <dd>
                {tree.root.observerId} → {tree.root.observedId}
              </dd>
              <dt>session</dt>
              <dd>{tree.root.sessionId ?? '—'}</dd>
              <dt>metadata</dt>
              <dd>
                <code>{JSON.stringify(tree.root.metadata)}</code>
              </dd>
            </dl>
          </section>
        )}
        <ConclusionList workspaceId={workspaceId} selected={id} />
      </aside>
      <section className="tree-main">
        <div className="tree-toolbar">
          <LevelLegend />
          {tree && (
            <span className="muted" id="tree-stats">
              {tree.graph.nodes.length} conclusions, {tree.graph.edges.length} citations
              {tree.truncated && ' · truncated: raise the depth to see more'}
            </span>
          )}
        </div>
        {error && <pre className="error">{error}</pre>}
        {tree ? (
          <ReactFlowProvider>
            <TreeGraph workspaceId={workspaceId} tree={tree} />
          </ReactFlowProvider>
        ) : (
          !error && (
            <p className="muted pad">
              Pick a conclusion: its premises are drawn above it, what was derived from it below. Click a node to
              re-root the tree there.
            </p>
          )
        )}
      </section>
    </div>
  );
}
