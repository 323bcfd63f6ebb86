import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import { useCallback, useEffect, useState } from 'react';
import { GraphiQL } from 'graphiql';
import { useGraphiQL, useGraphiQLActions } from '@graphiql/react';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { Kind, parse } from 'graphql';
import { EXAMPLES } from './examples.js';

const fetcher = createGraphiQLFetcher({ url: new URL('/graphql', window.location.href).href });

/**
 * The operation facts an execution reads (document, operations, the name to run) for a query that
 * was put in the editor from code. GraphiQL derives them from an edit only after a 100 ms debounce,
 * so a Run pressed sooner would send the new text with the previous tab's operation name.
 */
function operationFacts(query) {
  try {
    const documentAST = parse(query);
    const operations = documentAST.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    return { documentAST, operations, operationName: operations[0]?.name?.value };
  } catch {
    return { documentAST: undefined, operations: [], operationName: undefined };
  }
}

/** Opens an example in a new tab (or switches to the tab that already holds it unchanged). */
function ExamplesPane() {
  const { addTab, changeTab, updateActiveTabValues, setOperationFacts } = useGraphiQLActions();
  const tabs = useGraphiQL((s) => s.tabs);
  const queryEditor = useGraphiQL((s) => s.queryEditor);
  const variableEditor = useGraphiQL((s) => s.variableEditor);
  // GraphiQL creates its editors only once Monaco and its GraphQL worker have loaded, and then
  // fills them with the first tab's query whatever tab is active (a tab added before that would
  // also lose the first tab's text). An example picked that early waits here for the editors.
  const [pending, setPending] = useState(null);
  const ready = Boolean(queryEditor && variableEditor);

  const openNow = useCallback(
    (example) => {
      const facts = operationFacts(example.query);
      const existing = tabs.findIndex((t) => t.query === example.query);
      if (existing >= 0) {
        changeTab(existing);
      } else {
        // addTab empties the editors synchronously; filling them afterwards fills the new tab.
        addTab();
        queryEditor.setValue(example.query);
        variableEditor.setValue(example.variables);
        updateActiveTabValues({ query: example.query, variables: example.variables, operationName: facts.operationName ?? null });
      }
      setOperationFacts(facts);
    },
    [tabs, queryEditor, variableEditor, addTab, changeTab, updateActiveTabValues, setOperationFacts],
  );

  useEffect(() => {
    if (ready && pending) {
      setPending(null);
      openNow(pending);
    }
  }, [ready, pending, openNow]);

  const open = (example) => (ready ? openNow(example) : setPending(example));
  return (
    <div className="examples">
      <div className="graphiql-doc-explorer-title">Examples</div>
      <p className="muted">
        One per feature, from <code>playground/examples/</code>. Run 01 and 02 first: they create the{' '}
        <code>demo</code> workspace the others read.
      </p>
      <ul>
        {EXAMPLES.map((ex) => (
          <li key={ex.name}>
            <button type="button" data-example={ex.name} onClick={() => open(ex)} title={ex.description}>
              <span className="example-file">{ex.file}</span>
              <span>{ex.description}</span>
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}

function ExamplesIcon() {
  return (
    <svg viewBox="0 0 24 24" width="20" height="20" fill="none" stroke="currentColor" strokeWidth="1.5" aria-hidden>
      <path d="M4 5h16M4 10h16M4 15h10M4 20h7" strokeLinecap="round" />
    </svg>
  );
}

const examplesPlugin = { title: 'Examples', icon: ExamplesIcon, content: ExamplesPane };

export default function GraphiQLPage() {
  return (
    <div className="graphiql-page">
      <GraphiQL
        fetcher={fetcher}
        plugins={[examplesPlugin]}
        visiblePlugin={examplesPlugin}
        defaultQuery={EXAMPLES[0]?.query}
        defaultHeaders={'{\n  // "Authorization": "Bearer <key>"\n}'}
        defaultEditorToolsVisibility="headers"
        isHeadersEditorEnabled
        shouldPersistHeaders={false}
      />
    </div>
  );
}
