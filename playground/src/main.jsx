import { StrictMode, Suspense, lazy, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { getAuthorization, setAuthorization } from './api.ts';
import { useRoute } from './route.js';
import './styles.css';

// GraphiQL brings Monaco (several MB): load it only on its page.
const GraphiQLPage = lazy(() => import('./GraphiQLPage.jsx'));
const TreePage = lazy(() => import('./TreePage.tsx'));
const SearchPage = lazy(() => import('./SearchPage.tsx'));

const PAGES = [
  { path: '/', title: 'GraphiQL', Component: GraphiQLPage },
  { path: '/tree', title: 'Reasoning tree', Component: TreePage },
  { path: '/search', title: 'Search', Component: SearchPage },
];

function AuthField() {
  const [value, setValue] = useState(getAuthorization);
  return (
    <label className="auth" title="Sent by the Reasoning tree and Search pages; GraphiQL has its own header editor">
      Authorization
      <input
        value={value}
        placeholder="Bearer … (optional)"
        onChange={(e) => {
          setValue(e.target.value);
          setAuthorization(e.target.value.trim());
        }}
      />
    </label>
  );
}

function App() {
  const { path, params } = useRoute();
  const page = PAGES.find((p) => p.path === path) ?? PAGES[0];
  return (
    <div className="app">
      <header className="topbar">
        <strong>honcho-graphql</strong>
        <nav>
          {PAGES.map((p) => (
            <a key={p.path} href={`#${p.path}`} className={p === page ? 'active' : undefined}>
              {p.title}
            </a>
          ))}
        </nav>
        {page.path !== '/' && <AuthField />}
      </header>
      <main className="page">
        <Suspense fallback={<p className="muted pad">Loading…</p>}>
          <page.Component params={params} />
        </Suspense>
      </main>
    </div>
  );
}

createRoot(document.getElementById('root')).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
