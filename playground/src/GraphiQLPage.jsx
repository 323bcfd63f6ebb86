import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import { GraphiQL } from 'graphiql';
import { useGraphiQL, useGraphiQLActions } from '@graphiql/react';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { EXAMPLES } from './examples.js';

const fetcher = createGraphiQLFetcher({ url: new URL('/graphql', window.location.href).href });

/** Opens an example in a new tab (or switches to the tab that already holds it unchanged). */
function ExamplesPane() {
  const { addTab, changeTab, updateActiveTabValues } = useGraphiQLActions();
  const tabs = useGraphiQL((s) => s.tabs);
  const queryEditor = useGraphiQL((s) => s.queryEditor);
  const variableEditor = useGraphiQL((s) => s.variableEditor);
  const open = (example) => {
    const existing = tabs.findIndex((t) => t.query === example.query);
    if (existing >= 0) return changeTab(existing);
    addTab();
    // Setting the editors updates the new (active) tab's stored values too. The operation name is
    // cleared: a name left from the tab GraphiQL was on would run as "Unknown operation".
    queryEditor?.setValue(example.query);
    variableEditor?.setValue(example.variables);
    updateActiveTabValues({ query: example.query, variables: example.variables, operationName: null });
  };
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
