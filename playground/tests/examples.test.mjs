// Every saved example in playground/examples, and every operation the Reasoning tree and Search
// pages send (src/queries.js), validates against the committed ../schema.graphql (the server's
// contract; a Rust test keeps it equal to the code).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { buildSchema, parse, validate, Kind } from 'graphql';
import { LIST_QUERY, SEARCH_SCOPES, SEMANTIC_QUERY, TREE_QUERY, searchQuery } from '../src/queries.js';

const examplesDir = new URL('../examples/', import.meta.url);
// SCHEMA_FILE=path checks against another SDL (e.g. a branch's schema.graphql before it merges).
const schemaFile = new URL(process.env.SCHEMA_FILE ?? '../../schema.graphql', import.meta.url);
const schema = buildSchema(readFileSync(schemaFile, 'utf8'));
const files = readdirSync(examplesDir)
  .filter((f) => f.endsWith('.graphql'))
  .sort();

test('there are examples for every feature the playground shows', () => {
  const all = files.map((f) => readFileSync(new URL(f, examplesDir), 'utf8')).join('\n');
  for (const needle of [
    'getOrCreateWorkspace',
    'createMessages',
    'seqInSession: {',
    'includeContext: true',
    'search(query: $query, limit',
    'createConclusions',
    'metadata: {topic',
    'updateConclusion',
    'recordDerivedConclusion',
    'reasoningTree(direction: SOURCES',
    'reasoningTree(direction: DERIVED',
  ]) {
    assert.ok(all.includes(needle), `no example uses ${needle}`);
  }
});

for (const file of files) {
  test(`examples/${file} validates against schema.graphql`, () => {
    const source = readFileSync(new URL(file, examplesDir), 'utf8');
    const doc = parse(source);
    const ops = doc.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    assert.ok(ops.length > 0, 'no operation');
    for (const op of ops) assert.ok(op.name, 'every operation has a name (GraphiQL shows it)');
    assert.ok(source.startsWith('#'), 'starts with a # comment saying what it shows');

    const varsFile = new URL(file.replace(/\.graphql$/, '.variables.json'), examplesDir);
    if (existsSync(varsFile)) {
      const vars = JSON.parse(readFileSync(varsFile, 'utf8'));
      const declared = new Set(ops.flatMap((op) => op.variableDefinitions.map((v) => v.variable.name.value)));
      for (const key of Object.keys(vars)) assert.ok(declared.has(key), `variables file sets undeclared $${key}`);
    }

    checkValid(doc);
  });
}

const PAGE_QUERIES = {
  'tree: ReasoningTree': TREE_QUERY,
  'tree: Conclusions': LIST_QUERY,
  'tree: FindConclusions': SEMANTIC_QUERY,
  ...Object.fromEntries(SEARCH_SCOPES.map((scope) => [`search: ${scope}`, searchQuery(scope)])),
};
for (const [name, source] of Object.entries(PAGE_QUERIES)) {
  test(`page query ${name} validates against schema.graphql`, () => checkValid(parse(source)));
}

/** Fails on any validation error, listing every message. */
function checkValid(doc) {
  assert.deepEqual(
    validate(schema, doc).map((e) => e.message),
    [],
  );
}
