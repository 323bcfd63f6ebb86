// A small GraphQL client for the tree and search pages. The Authorization value is shared with
// nothing else: GraphiQL keeps its own headers in its header editor.

const AUTH_KEY = 'honcho-playground:authorization';

export function getAuthorization() {
  return localStorage.getItem(AUTH_KEY) ?? '';
}

export function setAuthorization(value) {
  if (value) localStorage.setItem(AUTH_KEY, value);
  else localStorage.removeItem(AUTH_KEY);
}

/** Runs one operation against /graphql; resolves to `data`, rejects with the errors' messages. */
export async function gql(query, variables = {}) {
  const headers = { 'content-type': 'application/json' };
  const auth = getAuthorization();
  if (auth) headers.authorization = auth;
  const resp = await fetch('/graphql', {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables }),
  });
  let body;
  try {
    body = await resp.json();
  } catch {
    throw new Error(`HTTP ${resp.status} from /graphql`);
  }
  if (body.errors?.length) {
    throw new Error(
      body.errors
        .map((e) => (e.extensions?.code ? `${e.extensions.code}: ${e.message}` : e.message))
        .join('\n'),
    );
  }
  return body.data;
}
