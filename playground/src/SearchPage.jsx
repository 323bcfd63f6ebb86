import { Fragment, useEffect, useState } from 'react';
import { gql } from './api.js';
import { searchQuery } from './queries.js';
import { navigate } from './route.js';

/** Wraps the query's words in <mark> (case-insensitive; full text also matches stems). */
function Highlight({ text, query }) {
  const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [])];
  if (!words.length) return text;
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const parts = text.split(new RegExp(`(${escaped.join('|')})`, 'giu'));
  return parts.map((part, i) => (i % 2 ? <mark key={i}>{part}</mark> : <Fragment key={i}>{part}</Fragment>));
}

function Thread({ snippet, query }) {
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

export default function SearchPage({ params }) {
  const [form, setForm] = useState(() => ({
    workspaceId: params.get('workspace') ?? 'demo',
    scope: params.get('scope') ?? 'workspace',
    scopeId: params.get('scopeId') ?? '',
    query: params.get('q') ?? '',
    window: Number(params.get('window') ?? 2),
    limit: Number(params.get('limit') ?? 10),
    filters: params.get('filters') ?? '',
  }));
  const [result, setResult] = useState(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });

  const run = async (f) => {
    setError('');
    setBusy(true);
    try {
      const filters = f.filters.trim() ? JSON.parse(f.filters) : null;
      const data = await gql(searchQuery(f.scope), {
        workspaceId: f.workspaceId,
        scopeId: f.scope === 'workspace' ? undefined : f.scopeId,
        query: f.query,
        filters,
        limit: Number(f.limit),
        window: Number(f.window),
      });
      const ws = data.workspace;
      const hits = f.scope === 'workspace' ? ws?.search : ws?.[f.scope]?.search;
      if (!ws) throw new Error(`No workspace ${f.workspaceId}.`);
      if (!hits) throw new Error(`No ${f.scope} ${f.scopeId} in workspace ${f.workspaceId}.`);
      setResult({ ...hits, query: f.query });
    } catch (e) {
      setResult(null);
      setError(e.message);
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
            {result.snippets && ` in ${result.snippets.length} snippet${result.snippets.length === 1 ? '' : 's'}`},
            best first; matches are highlighted, #n is the message's seqInSession.
          </p>
          {result.snippets?.map((s, i) => (
            <Thread key={`${s.sessionId}-${i}`} snippet={s} query={result.query} />
          ))}
          {!result.snippets && (
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
