import { useEffect, useState } from 'react';

/** Hash routes (`#/tree?workspace=w&id=c`): bookmarkable, and no server routes needed. */
export function useRoute() {
  const read = () => {
    const [path, query = ''] = (window.location.hash.slice(1) || '/').split('?');
    return { path, params: new URLSearchParams(query) };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function navigate(path, params = {}) {
  const query = new URLSearchParams(
    Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ''),
  ).toString();
  window.location.hash = query ? `${path}?${query}` : path;
}
