// TypeScript types for the pages' operations, generated from the server's contract
// (../schema.graphql) with graphql-codegen's client preset: `graphql(...)` in src/*.ts(x) returns
// a typed document whose result and variables types follow the schema, so `tsc --noEmit` (run by
// `make playground-test`) fails when a schema change breaks a page. Generation itself fails on a
// document that does not validate.
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  // SCHEMA_FILE=path checks the pages against another SDL, as tests/examples.test.mjs does.
  schema: process.env.SCHEMA_FILE ?? '../schema.graphql',
  documents: ['src/**/*.{ts,tsx}', '!src/gql/**'],
  ignoreNoDocuments: false,
  generates: {
    'src/gql/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false },
      config: {
        // Documents stay strings (sent as they are by src/api.ts): no graphql-js parser in the bundle.
        documentMode: 'string',
        useTypeImports: true,
        enumsAsTypes: true,
        strictScalars: true,
        scalars: { DateTime: 'string', JSON: 'unknown' },
      },
    },
  },
};

export default config;
