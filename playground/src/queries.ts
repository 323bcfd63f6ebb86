// The operations the Reasoning tree and Search pages send. `graphql()` is generated from
// ../schema.graphql (npm run codegen, see codegen.ts): each call returns the document typed with
// its result and variables, so the pages' use of the data is type-checked (npm run typecheck).

import { graphql } from './gql';

graphql(`
  fragment ConclusionFields on Conclusion {
    id
    content
    level
    timesDerived
    observerId
    observedId
    sessionId
    metadata
    createdAt
  }
`);

export const TREE_QUERY = graphql(`
  query ReasoningTree($workspaceId: ID!, $id: ID!, $maxDepth: Int!) {
    workspace(id: $workspaceId) {
      conclusion(id: $id) {
        ...ConclusionFields
        premises: reasoningTree(direction: SOURCES, maxDepth: $maxDepth, maxNodes: 1000) {
          nodes {
            ...ConclusionFields
          }
          edges {
            from
            to
          }
          truncated
        }
        consequences: reasoningTree(direction: DERIVED, maxDepth: $maxDepth, maxNodes: 1000) {
          nodes {
            ...ConclusionFields
          }
          edges {
            from
            to
          }
          truncated
        }
      }
    }
  }
`);

export const LIST_QUERY = graphql(`
  query Conclusions($workspaceId: ID!) {
    workspace(id: $workspaceId) {
      conclusions(first: 100) {
        totalCount
        nodes {
          ...ConclusionFields
        }
      }
    }
  }
`);

export const SEMANTIC_QUERY = graphql(`
  query FindConclusions($workspaceId: ID!, $query: String!) {
    workspace(id: $workspaceId) {
      queryConclusions(query: $query, topK: 20) {
        ...ConclusionFields
      }
    }
  }
`);

graphql(`
  fragment MessageFields on Message {
    id
    seqInSession
    peerId
    sessionId
    content
    createdAt
  }
`);

graphql(`
  fragment Hits on SearchResult {
    __typename
    ... on SnippetHits {
      results {
        ...MessageFields
      }
      snippets {
        sessionId
        matched {
          id
        }
        context {
          ...MessageFields
        }
      }
    }
    ... on MessageHits {
      results {
        ...MessageFields
      }
    }
  }
`);

// The search field lives on Workspace, Peer and Session with the same arguments; one static
// document per scope (generated types need static documents; one document with @include on all
// three would be costed as three searches).
export const SEARCH_QUERIES = {
  workspace: graphql(`
    query SearchWorkspace($workspaceId: ID!, $query: String!, $filters: JSON, $limit: Int!, $window: Int!) {
      workspace(id: $workspaceId) {
        search(query: $query, filters: $filters, limit: $limit, includeContext: true, contextWindow: $window) { ...Hits }
      }
    }
  `),
  session: graphql(`
    query SearchSession($workspaceId: ID!, $scopeId: ID!, $query: String!, $filters: JSON, $limit: Int!, $window: Int!) {
      workspace(id: $workspaceId) {
        session(id: $scopeId) { search(query: $query, filters: $filters, limit: $limit, includeContext: true, contextWindow: $window) { ...Hits } }
      }
    }
  `),
  peer: graphql(`
    query SearchPeer($workspaceId: ID!, $scopeId: ID!, $query: String!, $filters: JSON, $limit: Int!, $window: Int!) {
      workspace(id: $workspaceId) {
        peer(id: $scopeId) { search(query: $query, filters: $filters, limit: $limit, includeContext: true, contextWindow: $window) { ...Hits } }
      }
    }
  `),
};

export type SearchScope = keyof typeof SEARCH_QUERIES;
