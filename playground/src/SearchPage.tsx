import { Fragment, useEffect, useState, type ChangeEvent } from 'react';
import { gql } from './api.ts';
import type { HitsFragment } from './gql/graphql';
import { SEARCH_QUERIES, type SearchScope } from './queries.ts';
import { navigate } from './route.js';

type Snippet = Extract<HitsFragment, { __typename: 'SnippetHits' }>['snippets'][number];

interface Form {
  workspaceId: string;
  scope: SearchScope;
  scopeId: string;
  query: string;
  window: number;
  limit: number;
  filters: string;
}

/** Wraps the query's words in <mark> (case-insensitive; full text also matches stems). */
function Highlight({ text, query }: { text: string; query: string }) {
  const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [])];
  if (!words.length) return text;
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const parts = text.split(new RegExp(`(${escaped.join('|')})`, 'giu'));
  return parts.map((part, i) => (i % 2 ? <mark key={i}>{part}</mark> : <Fragment key={i}>{part}</Fragment>));
}

function Thread({ snippet, query }: { snippet: Snippet; query: string }) {
  const matched = new Set(snippet.matched.map((m) => m.id));
  return (
    <article className="thread" data-session={snippet.sessionId}>
      <header>
        Session <strong>{snippet.sessionId}</strong> · {matched.size} match{matched.size === 1 ? '' : 'es'} in{' '}
        {snippet.context.length} messages
      </header>
      <ol>
        {snippet.context.map((m, i) => {
          const gap = i > 0 && m.seqInSession > snippet.context[i - 1].seqInSession + 1;
          const hit = matched.has(m.id);
          return (
            <Fragment key={m.id}>
              {gap && <li className="gap">⋯</li>}
              <li className={`msg${hit ? ' matched' : ''}`} data-seq={m.seqInSession} data-id={m.id}>
                <span className="seq" title="seqInSession">
                  #{m.seqInSession}
                </span>
                <span className="peer">{m.peerId}</span>
                <span className="content">{hit ? <Highlight text={m.content} query={query} /> : m.content}</span>
              </li>
            </Fragment>
          );
        })}
      </ol>
    </article>
  );
}

/** The page's search for one scope: the typed document for that scope, its hits or null. */
async function search(f: Form): Promise<HitsFragment | null> {
  const vars = {
    workspaceId: f.workspaceId,
    query: f.query,
    filters: f.filters.trim() ? JSON.parse(f.filters) : null,
    limit: Number(f.limit),
    window: Number(f.window),
  };
  switch (f.scope) {
    case 'workspace': {
      const data = await gql(SEARCH_QUERIES.workspace, vars);
      if (!data.workspace) throw new Error(`No workspace ${f.workspaceId}.`);
      return data.workspace.search;
    }
    case 'session': {
      const data = await gql(SEARCH_QUERIES.session, { ...vars, scopeId: f.scopeId });
      if (!data.workspace) throw new Error(`No workspace ${f.workspaceId}.`);
      return data.workspace.session?.search ?? null;
    }
    case 'peer': {
      const data = await gql(SEARCH_QUERIES.peer, { ...vars, scopeId: f.scopeId });
      if (!data.workspace) throw new Error(`No workspace ${f.workspaceId}.`);
      return data.workspace.peer?.search ?? null;
    }
  }
}

const SCOPES: readonly string[] = Object.keys(SEARCH_QUERIES);

export default function SearchPage({ params }: { params: URLSearchParams }) {
  const [form, setForm] = useState<Form>(() => ({
    workspaceId: params.get('workspace') ?? 'demo',
    scope: (SCOPES.includes(params.get('scope') ?? '') ? params.get('scope') : 'workspace') as SearchScope,
    scopeId: params.get('scopeId') ?? '',
    query: params.get('q') ?? '',
    window: Number(params.get('window') ?? 2),
    limit: Number(params.get('limit') ?? 10),
    filters: params.get('filters') ?? '',
  }));
  const [result, setResult] = useState<(HitsFragment & { query: string }) | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const set = (key: keyof Form) => (e: ChangeEvent<HTMLInputElement | HTMLSelectElement>) =>
    setForm({ ...form, [key]: e.target.value });

  const run = async (f: Form) => {
    setError('');
    setBusy(true);
    try {
      const hits = await search(f);
      if (!hits) throw new Error(`No ${f.scope} ${f.scopeId} in workspace ${f.workspaceId}.`);
      setResult({ ...hits, query: f.query });
    } catch (e) {
      setResult(null);
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  // A bookmarked search (#/search?q=…) runs on load.
  useEffect(() => {
    if (form.query) run(form);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  return (
    <div className="search-page">
      <form
        className="search-form"
        onSubmit={(e) => {
          e.preventDefault();
          navigate('/search', {
            workspace: form.workspaceId,
            scope: form.scope === 'workspace' ? undefined : form.scope,
            scopeId: form.scope === 'workspace' ? undefined : form.scopeId,
            q: form.query,
            window: form.window,
            limit: form.limit,
            filters: form.filters.trim() || undefined,
          });
          run(form);
        }}
      >
        <label>
          Workspace
          <input id="search-workspace" value={form.workspaceId} onChange={set('workspaceId')} />
        </label>
        <label>
          In
          <select value={form.scope} onChange={set('scope')}>
            <option value="workspace">whole workspace</option>
            <option value="session">session</option>
            <option value="peer">peer</option>
          </select>
        </label>
        {form.scope !== 'workspace' && (
          <label>
            {form.scope} id
            <input value={form.scopeId} onChange={set('scopeId')} required />
          </label>
        )}
        <label className="grow">
          Query
          <input id="search-query" value={form.query} onChange={set('query')} required placeholder="what to look for" />
        </label>
        <label>
          Context
          <input type="number" min="0" max="10" value={form.window} onChange={set('window')} />
        </label>
        <label>
          Limit
          <input type="number" min="1" max="100" value={form.limit} onChange={set('limit')} />
        </label>
        <label className="grow">
          Filters (JSON)
          <input value={form.filters} onChange={set('filters')} placeholder='{"peerId": "alice"}' />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Searching…' : 'Search'}
        </button>
      </form>
      {error && <pre className="error">{error}</pre>}
      {result && (
        <section className="results" data-kind={result.__typename}>
          <p className="muted">
            {result.results.length} matching message{result.results.length === 1 ? '' : 's'}
            {result.__typename === 'SnippetHits' &&
              ` in ${result.snippets.length} snippet${result.snippets.length === 1 ? '' : 's'}`}
            ,
            best first; matches are highlighted, #n is the message's seqInSession.
          </p>
          {result.__typename === 'SnippetHits' &&
            result.snippets.map((s, i) => <Thread key={`${s.sessionId}-${i}`} snippet={s} query={result.query} />)}
          {result.__typename === 'MessageHits' && (
            <ol className="thread">
              {result.results.map((m) => (
                <li key={m.id} className="msg matched">
                  <span className="seq">#{m.seqInSession}</span>
                  <span className="peer">{m.peerId}</span>
                  <span className="content">
                    <Highlight text={m.content} query={result.query} />
                  </span>
                </li>
              ))}
            </ol>
          )}
        </section>
      )}
    </div>
  );
}
