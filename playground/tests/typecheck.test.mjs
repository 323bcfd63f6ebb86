// `npm run typecheck` is what makes a schema change that breaks a page fail in `make
// playground-test`: this pins its first half. A schema without a field a page reads stops
// generation (graphql-codegen validates the documents and writes nothing), naming the field.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const playground = new URL('..', import.meta.url).pathname;
const schema = readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8');

test('renaming a field a page reads fails generation, naming the field', () => {
  const start = schema.indexOf('type Conclusion {');
  const end = schema.indexOf('\n}', start);
  const body = schema.slice(start, end).replace('\ttimesDerived: Int!', '\tderivedTimes: Int!');
  assert.ok(body.includes('derivedTimes'), 'Conclusion.timesDerived not found in schema.graphql');
  const file = join(mkdtempSync(join(tmpdir(), 'honcho-schema-')), 'schema.graphql');
  writeFileSync(file, schema.slice(0, start) + body + schema.slice(end));

  const run = spawnSync('npx', ['graphql-codegen', '--config', 'codegen.ts'], {
    cwd: playground,
    env: { ...process.env, SCHEMA_FILE: file },
    encoding: 'utf8',
  });
  assert.notEqual(run.status, 0, 'generation succeeded against the broken schema');
  assert.match(run.stdout + run.stderr, /Cannot query field "timesDerived" on type "Conclusion"/);
});
