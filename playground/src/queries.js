// The operations the Reasoning tree and Search pages send; tests/examples.test.mjs validates them
// against schema.graphql like the examples.

const CONCLUSION = `fragment C on Conclusion {
  id content level timesDerived observerId observedId sessionId metadata createdAt
}`;

export const TREE_QUERY = `query ReasoningTree($workspaceId: ID!, $id: ID!, $maxDepth: Int!) {
  workspace(id: $workspaceId) {
    conclusion(id: $id) {
      ...C
      premises: reasoningTree(direction: SOURCES, maxDepth: $maxDepth, maxNodes: 1000) {
        nodes { ...C } edges { from to } truncated
      }
      consequences: reasoningTree(direction: DERIVED, maxDepth: $maxDepth, maxNodes: 1000) {
        nodes { ...C } edges { from to } truncated
      }
    }
  }
}
${CONCLUSION}`;

export const LIST_QUERY = `query Conclusions($workspaceId: ID!) {
  workspace(id: $workspaceId) { conclusions(first: 100) { totalCount nodes { ...C } } }
}
${CONCLUSION}`;

export const SEMANTIC_QUERY = `query FindConclusions($workspaceId: ID!, $query: String!) {
  workspace(id: $workspaceId) { queryConclusions(query: $query, topK: 20) { ...C } }
}
${CONCLUSION}`;

const MESSAGE = `fragment M on Message { id seqInSession peerId sessionId content createdAt }`;
const HITS = `fragment Hits on SearchResult {
  __typename
  ... on SnippetHits { results { ...M } snippets { sessionId matched { id } context { ...M } } }
  ... on MessageHits { results { ...M } }
}`;

/** The search field lives on Workspace, Peer and Session with the same arguments. */
export function searchQuery(scope) {
  const args = 'query: $query, filters: $filters, limit: $limit, includeContext: true, contextWindow: $window';
  const inner = scope === 'workspace' ? `search(${args}) { ...Hits }` : `${scope}(id: $scopeId) { search(${args}) { ...Hits } }`;
  const scopeVar = scope === 'workspace' ? '' : ', $scopeId: ID!';
  return `query Search($workspaceId: ID!${scopeVar}, $query: String!, $filters: JSON, $limit: Int!, $window: Int!) {
  workspace(id: $workspaceId) { ${inner} }
}
${HITS}
${MESSAGE}`;
}

export const SEARCH_SCOPES = ['workspace', 'session', 'peer'];
