// A small GraphQL client for the tree and search pages. The Authorization value is shared with
// nothing else: GraphiQL keeps its own headers in its header editor.

import type { TypedDocumentString } from './gql/graphql';

const AUTH_KEY = 'honcho-playground:authorization';

export function getAuthorization(): string {
  return localStorage.getItem(AUTH_KEY) ?? '';
}

export function setAuthorization(value: string): void {
  if (value) localStorage.setItem(AUTH_KEY, value);
  else localStorage.removeItem(AUTH_KEY);
}

interface GraphQLError {
  message: string;
  extensions?: { code?: string };
}

/**
 * Runs one operation against /graphql; resolves to `data`, typed by the document (see
 * queries.ts), and rejects with the errors' messages.
 */
export async function gql<TResult, TVariables>(
  query: TypedDocumentString<TResult, TVariables>,
  variables: TVariables,
): Promise<TResult> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const auth = getAuthorization();
  if (auth) headers.authorization = auth;
  const resp = await fetch('/graphql', {
    method: 'POST',
    headers,
    body: JSON.stringify({ query: query.toString(), variables }),
  });
  let body: { data?: TResult; errors?: GraphQLError[] };
  try {
    body = await resp.json();
  } catch {
    throw new Error(`HTTP ${resp.status} from /graphql`);
  }
  if (body.errors?.length) {
    throw new Error(
      body.errors
        .map((e: GraphQLError) => (e.extensions?.code ? `${e.extensions.code}: ${e.message}` : e.message))
        .join('\n'),
    );
  }
  if (body.data === undefined) throw new Error(`HTTP ${resp.status} from /graphql: no data`);
  return body.data;
}
