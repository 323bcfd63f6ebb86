// Runs the npm `graphql-http` audit (the GraphQL-over-HTTP specification's reference suite) against
// a server and prints one JSON line: counts per status and every result that is not ok.
// Usage: node audit.mjs <graphql-url>
import { auditServer } from 'graphql-http';

const [url] = process.argv.slice(2);
const results = await auditServer({ url });
const counts = { ok: 0, notice: 0, warn: 0, error: 0 };
const problems = [];
for (const r of results) {
  counts[r.status] += 1;
  if (r.status !== 'ok') problems.push({ id: r.id, name: r.name, status: r.status, reason: r.reason });
}
console.log(JSON.stringify({ counts, problems }));
