// Runs queries through urql with its persisted-queries exchange (Apollo's APQ protocol, hashes
// sent by GET first) and prints one JSON line: each result's data or error codes, and every HTTP
// request urql made (method, whether it carried the document, status).
// Usage: node persisted.mjs <graphql-url> <query> [<query> …]
//        node persisted.mjs --manifest <query> […]   prints {sha256: document} as urql sends them
//        (what a build step would write for HONCHO_TRUSTED_DOCUMENTS)
import { createHash } from 'node:crypto';
import { Client, createRequest, fetchExchange, stringifyDocument } from '@urql/core';
import { persistedExchange } from '@urql/exchange-persisted';

const [url, ...queries] = process.argv.slice(2);
if (url === '--manifest') {
  const manifest = {};
  for (const query of queries) {
    const document = stringifyDocument(createRequest(query, {}).query);
    manifest[createHash('sha256').update(document).digest('hex')] = document;
  }
  console.log(JSON.stringify(manifest));
  process.exit(0);
}
const requests = [];
const loggingFetch = async (input, init = {}) => {
  const target = new URL(typeof input === 'string' ? input : input.url);
  const method = init.method ?? 'GET';
  const body = typeof init.body === 'string' ? JSON.parse(init.body) : null;
  const withDocument = Boolean(body?.query ?? target.searchParams.get('query'));
  const resp = await fetch(input, init);
  requests.push({ method, withDocument, status: resp.status });
  return resp;
};
const client = new Client({
  url,
  fetch: loggingFetch,
  exchanges: [persistedExchange({ preferGetForPersistedQueries: true }), fetchExchange],
});
const results = [];
for (const query of queries) {
  const result = await client.query(query, {}).toPromise();
  results.push(
    result.error
      ? { errors: result.error.graphQLErrors.map((e) => e.extensions?.code ?? e.message), network: result.error.networkError?.message ?? null }
      : { data: result.data },
  );
}
console.log(JSON.stringify({ results, requests }));
