// The saved example operations, playground/examples/*.graphql, bundled at build time. A file may
// have a sibling <name>.variables.json; its leading `#` comment is the description.

const queries = import.meta.glob('../examples/*.graphql', {
  query: '?raw',
  import: 'default',
  eager: true,
});
const variables = import.meta.glob('../examples/*.variables.json', {
  query: '?raw',
  import: 'default',
  eager: true,
});

export const EXAMPLES = Object.keys(queries)
  .sort()
  .map((path) => {
    const query = queries[path];
    const file = path.split('/').pop();
    const name = file.replace(/\.graphql$/, '');
    const description = query
      .split('\n')
      .filter((line) => line.startsWith('#'))
      .map((line) => line.replace(/^#\s?/, ''))
      .join(' ');
    const title = name.replace(/^\d+-/, '').replace(/-/g, ' ');
    return {
      name,
      file,
      title: title[0].toUpperCase() + title.slice(1),
      description,
      query,
      variables: variables[path.replace(/\.graphql$/, '.variables.json')] ?? '',
    };
  });
