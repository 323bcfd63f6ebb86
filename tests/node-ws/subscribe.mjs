// Subscribes to messageCreated with the npm `graphql-ws` client (graphql-transport-ws protocol)
// and prints each result as one JSON line on stdout; exits 0 after <count> results.
// Usage: node subscribe.mjs <ws-url> <workspaceId> <sessionId> <count>
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, workspaceId, sessionId, countArg] = process.argv.slice(2);
const count = Number(countArg);
const fail = (what, err) => {
  console.error(`${what}: ${err instanceof Error ? err.message : JSON.stringify(err)}`);
  process.exit(1);
};
const timer = setTimeout(() => fail('timeout', 'no events within 30 s'), 30_000);

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  lazy: false,
  retryAttempts: 0,
  connectionParams: { client: 'npm graphql-ws' },
  onNonLazyError: (err) => fail('connection', err),
});

let seen = 0;
client.subscribe(
  {
    query: `subscription($w: ID!, $s: ID) {
      messageCreated(workspaceId: $w, sessionId: $s) { id content seqInSession peer { id } }
    }`,
    variables: { w: workspaceId, s: sessionId },
  },
  {
    next: (result) => {
      console.log(JSON.stringify(result));
      seen += 1;
      if (seen === count) {
        clearTimeout(timer);
        client.dispose();
        process.exit(0);
      }
    },
    error: (err) => fail('subscription', err),
    complete: () => fail('complete', `after ${seen} of ${count} results`),
  },
);
