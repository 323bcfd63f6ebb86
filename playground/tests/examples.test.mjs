// Every saved example in playground/examples, and every operation the Reasoning tree and Search
// pages send (the graphql(`…`) documents of src/queries.ts), validates against the committed
// ../schema.graphql (the server's contract; a Rust test keeps it equal to the code). `npm run
// typecheck` goes further for the pages: types generated from the schema, checked by tsc.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { buildSchema, parse, validate, Kind, NoUnusedFragmentsRule, specifiedRules } from 'graphql';

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
    'where: {',
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

// The pages' documents; each operation is checked with every fragment (the generated client
// appends the ones it uses).
const pageSource = readFileSync(new URL('../src/queries.ts', import.meta.url), 'utf8');
const pageDocs = [...pageSource.matchAll(/graphql\(`([^`]*)`\)/g)].map((m) => parse(m[1]));
const fragments = pageDocs.flatMap((d) => d.definitions.filter((x) => x.kind === Kind.FRAGMENT_DEFINITION));
const operations = pageDocs.flatMap((d) => d.definitions.filter((x) => x.kind === Kind.OPERATION_DEFINITION));

test('the pages send the operations this test validates', () => {
  assert.deepEqual(operations.map((o) => o.name.value).sort(), [
    'Conclusions',
    'FindConclusions',
    'ReasoningTree',
    'SearchPeer',
    'SearchSession',
    'SearchWorkspace',
  ]);
});

const withoutUnusedFragments = specifiedRules.filter((r) => r !== NoUnusedFragmentsRule);
for (const op of operations) {
  test(`page query ${op.name.value} validates against schema.graphql`, () => {
    const doc = { kind: Kind.DOCUMENT, definitions: [op, ...fragments] };
    assert.deepEqual(
      validate(schema, doc, withoutUnusedFragments).map((e) => e.message),
      [],
    );
  });
}

/** Fails on any validation error, listing every message. */
function checkValid(doc) {
  assert.deepEqual(
    validate(schema, doc).map((e) => e.message),
    [],
  );
}
