#!/usr/bin/env node
// Browser test of the playground, end to end: a real server on a fresh database, seeded through
// GraphQL, driven in headless Chromium (Debian's /usr/bin/chromium through playwright-core; no
// browser download). Every request the page makes to another host is blocked and counted, so the
// test also proves the playground works offline.
//
//   node tests/browser.mjs        (make playground-test builds what it needs and runs this)
//
// Environment: DATABASE_URL (a database on the server to create the test database from; default
// postgres://postgres@127.0.0.1:5432/postgres), CARGO_TARGET_DIR or HONCHO_BIN (the server binary,
// default $CARGO_TARGET_DIR/debug/honcho-graphql), CHROMIUM (default /usr/bin/chromium).
// Screenshots go to <repo>/target/playground-screenshots/.
//
// The tree and search checks need Workspace.conclusions/recordDerivedConclusion and
// Workspace.search on the server; on a server without them they are reported as skipped.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const targetDir = process.env.CARGO_TARGET_DIR ?? `${homedir()}/.cache/honcho-graphql/target`;
const bin = process.env.HONCHO_BIN ?? `${targetDir}/debug/honcho-graphql`;
const shots = `${repo}target/playground-screenshots`;
const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const WS = 'demo'; // the examples' default workspace, so a saved example runs as it is
const TIMEOUT = 20_000;

const results = { passed: 0, failed: 0, skipped: 0 };
let serverLog = '';
let page; // the browser tab, once open: a failed check saves a screenshot of it

async function check(name, fn) {
  try {
    await fn();
    results.passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    results.failed++;
    console.log(`not ok - ${name}\n  ${String(e?.stack ?? e).replace(/\n/g, '\n  ')}`);
    const shot = `${shots}/failed-${results.failed}.png`;
    if (await page?.screenshot({ path: shot }).catch(() => null)) console.log(`  screenshot: ${shot}`);
  }
}

function skip(name, why) {
  results.skipped++;
  console.log(`ok - ${name} # SKIP ${why}`);
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

const psql = (sql) => execFileSync('psql', [adminUrl, '-XAtqc', sql], { encoding: 'utf8' });

async function waitReady(base, server) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`server exited with ${server.exitCode}:\n${serverLog}`);
    try {
      if ((await fetch(`${base}/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server not ready after 60 s:\n${serverLog}`);
}

function graphql(base) {
  return async (query, variables = {}) => {
    const resp = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    const body = await resp.json();
    if (body.errors) throw new Error(`GraphQL errors: ${JSON.stringify(body.errors)}`);
    return body.data;
  };
}

/** The seeded data: two sessions of messages and a 3-level conclusion tree. */
async function seed(gql, features) {
  const chat = [
    ['alice', 'I moved to a village by the sea last spring'],
    ['bob', 'How is the house coming along?'],
    ['alice', 'Slowly. The roof is done, the windows are next'],
    ['bob', 'What colour will the door be?'],
    ['alice', 'I painted the front door turquoise yesterday'],
    ['bob', 'Bold choice! Send a photo'],
    ['alice', 'Tomorrow, when the light is better'],
  ];
  await gql(
    `mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id } }`,
    { w: WS, s: 'chat-1', m: chat.map(([peerId, content]) => ({ peerId, content })) },
  );
  await gql(
    `mutation($w: ID!, $s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: $w, sessionId: $s, messages: $m) { id } }`,
    {
      w: WS,
      s: 'garden',
      m: [
        { peerId: 'carol', content: 'The hydrangeas came out blue this year' },
        { peerId: 'alice', content: 'Mine are almost turquoise, it is the soil' },
      ],
    },
  );
  if (!features.conclusions) return null;
  const base = { observerId: 'bob', observedId: 'alice', sessionId: 'chat-1' };
  const { createConclusions: explicit } = await gql(
    `mutation($w: ID!, $c: [ConclusionInput!]!) { createConclusions(workspaceId: $w, conclusions: $c) { id } }`,
    {
      w: WS,
      c: [
        { ...base, content: 'Alice lives in a village by the sea', metadata: { topic: 'home' } },
        { ...base, content: 'Alice is renovating her house herself', metadata: { topic: 'home' } },
      ],
    },
  );
  const derive = async (content, level, sourceIds) =>
    (
      await gql(
        `mutation($w: ID!, $i: DerivedConclusionInput!) { recordDerivedConclusion(workspaceId: $w, input: $i) { id } }`,
        { w: WS, i: { ...base, content, level, sourceIds } },
      )
    ).recordDerivedConclusion.id;
  const deductive = await derive('Alice is restoring a seaside house', 'DEDUCTIVE', explicit.map((c) => c.id));
  // Deriving it twice bumps timesDerived: the label shows ×2.
  const inductiveArgs = ['Alice enjoys hands-on coastal projects', 'INDUCTIVE', [deductive]];
  const inductive = await derive(...inductiveArgs);
  await derive(...inductiveArgs);
  return { explicit: explicit.map((c) => c.id), deductive, inductive };
}

/** Replaces the content of the Monaco editor inside `selector` with one line of text. */
async function typeInto(selector, text) {
  await page.locator(`${selector} .monaco-editor`).last().click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.insertText(text);
  // Monaco auto-closes brackets and quotes as they are typed: drop what it added after the cursor.
  await page.keyboard.press('Shift+End');
  await page.keyboard.press('Delete');
}

/** The text of a Monaco editor: its rendered lines (enough for a short response), with runs of
 * white space (indentation, soft wraps) made one space. */
const editorText = (page, selector) =>
  page
    .locator(`${selector} .view-lines`)
    .first()
    .evaluate((el) => el.innerText.replace(/[\s\u00a0]+/g, ' '));

async function main() {
  mkdirSync(shots, { recursive: true });
  // A skipped or failed check must not leave an earlier run's screenshot looking current.
  for (const f of readdirSync(shots)) if (f.endsWith('.png')) rmSync(`${shots}/${f}`);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // A second web app on another port: `localhost` is its allowed origin (HONCHO_CORS_ORIGINS),
  // the same page under `127.0.0.1` a foreign one.
  const appPort = await freePort();
  const allowedApp = `http://localhost:${appPort}`;
  const foreignApp = `http://127.0.0.1:${appPort}`;
  const app = createHttpServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>another app</title><p>another app');
  });
  await new Promise((r) => app.listen(appPort, '127.0.0.1', r));
  const db = `honcho_playground_${process.pid}_${Date.now()}`;
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${db}`;
  psql(`CREATE DATABASE ${db}`);
  let server;
  let browser;
  try {
    server = spawn(bin, ['serve'], {
      env: {
        ...process.env,
        DATABASE_URL: dbUrl.href,
        HONCHO_LISTEN: `127.0.0.1:${port}`,
        HONCHO_EMBEDDER: 'none',
        HONCHO_DB_POOL: '5',
        HONCHO_CORS_ORIGINS: allowedApp,
        RUST_LOG: 'warn',
      },
      // From another directory, without HONCHO_PLAYGROUND_DIR: the binary serves its own playground.
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    server.stdout.on('data', (d) => (serverLog += d));
    server.stderr.on('data', (d) => (serverLog += d));
    await waitReady(base, server);
    const index = await (await fetch(`${base}/`)).text();
    if (!index.includes('id="root"')) {
      throw new Error(`${bin} does not serve the playground at / (built from another tree?):\n${index}`);
    }
    const gql = graphql(base);

    const introspect = await gql(`{ w: __type(name: "Workspace") { fields { name } } }`);
    const fields = new Set(introspect.w.fields.map((f) => f.name));
    const features = {
      conclusions: fields.has('conclusions') && fields.has('conclusion'),
      search: fields.has('search'),
    };
    const tree = await seed(gql, features);

    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
    const external = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      const local = [base, allowedApp, foreignApp].includes(url.origin);
      if (local || url.protocol === 'data:' || url.protocol === 'blob:') return route.continue();
      external.push(url.href);
      return route.abort();
    });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));

    await check('GraphiQL loads at / with the docs explorer and the schema', async () => {
      await page.goto(`${base}/`);
      await page.locator('.graphiql-container').waitFor();
      await page.getByRole('button', { name: /documentation explorer/i }).click();
      await page.locator('.graphiql-doc-explorer').getByText('QueryRoot').first().waitFor();
    });

    await check('GraphiQL opens the saved seqInSession-range example from the Examples picker and runs it', async () => {
      await page.getByRole('button', { name: /examples/i }).first().click();
      await page.locator('[data-example="03-seq-range"]').click();
      const tab = page.locator('.graphiql-tab', { hasText: 'SeqRange' });
      await tab.waitFor();
      const seqText = page.locator('.graphiql-query-editor').getByText('seqInSession: {gte: 2').first();
      await seqText.waitFor().catch(async (e) => {
        const shown = await editorText(page, '.graphiql-query-editor').catch(() => '?');
        const tabs = await page.locator('.graphiql-tab').allInnerTexts();
        throw new Error(`${e.message}\n  tabs: ${JSON.stringify(tabs)}\n  editor shows: ${shown.slice(0, 300)}`);
      });
      await page.locator('.graphiql-execute-button').click();
      await page.locator('.graphiql-response').getByText('"totalCount": 3').waitFor();
      const text = await editorText(page, '.graphiql-response');
      assert(text.includes('How is the house coming along?'), `seq 2 missing in:\n${text}`);
    });

    let sentAuthorization;
    await check('GraphiQL runs a typed query with a header from the header editor; the result pane shows the data', async () => {
      await page.getByRole('button', { name: /new tab/i }).click();
      await typeInto(
        '.graphiql-query-editor',
        `query Latest { workspace(id: "${WS}") { session(id: "chat-1") { messages(last: 3) { totalCount nodes { seqInSession peerId content } } } } }`,
      );
      await page.getByRole('button', { name: /^headers$/i }).click();
      await typeInto('.graphiql-editor-tool', '{"Authorization": "Bearer playground-test"}');
      page.on('request', (req) => {
        if (req.url().endsWith('/graphql') && req.postData()?.includes('Latest')) {
          sentAuthorization = req.headers().authorization;
        }
      });
      await page.getByRole('button', { name: /prettify/i }).click();
      await page.locator('.graphiql-query-editor').getByText('query Latest {').waitFor();
      await page.locator('.graphiql-execute-button').click();
      await page.locator('.graphiql-response').getByText('"totalCount": 7').waitFor();
      const text = await editorText(page, '.graphiql-response');
      for (const seq of [5, 6, 7]) assert(text.includes(`"seqInSession": ${seq}`), `no seqInSession ${seq} in:\n${text}`);
      assert(text.includes('I painted the front door turquoise yesterday'), `seq 5 content missing in:\n${text}`);
      assert(sentAuthorization === 'Bearer playground-test', `Authorization sent: ${sentAuthorization}`);
      await page.screenshot({ path: `${shots}/graphiql.png` });
    });

    if (!features.conclusions) {
      skip('reasoning tree: 3 levels drawn, re-root on click', 'server has no Workspace.conclusions yet');
    } else {
      await check('Reasoning tree draws the 3-level tree (4 nodes, 3 edges) and re-roots on click', async () => {
        await page.goto(`${base}/#/tree?workspace=${WS}`);
        await page.locator(`.conclusion-list [data-id="${tree.deductive}"]`).click();
        const nodes = page.locator('.react-flow__node');
        const edges = page.locator('.react-flow__edge');
        await page.locator('.tree-node.root').getByText('Alice is restoring a seaside house').waitFor();
        await waitCount(nodes, 4);
        await waitCount(edges, 3);
        for (const level of ['EXPLICIT', 'DEDUCTIVE', 'INDUCTIVE']) {
          assert((await page.locator(`.tree-node[data-level="${level}"]`).count()) > 0, `no ${level} node`);
        }
        const colours = await page
          .locator('.tree-node')
          .evaluateAll((els) => [...new Set(els.map((el) => getComputedStyle(el).borderTopColor))]);
        assert(colours.length === 3, `levels not coloured apart: ${colours}`);
        const inductive = page.locator(`.react-flow__node[data-id="${tree.inductive}"]`);
        assert((await inductive.textContent()).includes('×2'), 'timesDerived ×2 not shown on the inductive node');
        await page.screenshot({ path: `${shots}/reasoning-tree.png` });

        await inductive.click();
        await page.waitForURL(new RegExp(`id=${tree.inductive}`));
        await page.locator('.tree-node.root').getByText('Alice enjoys hands-on coastal projects').waitFor();
        await waitCount(nodes, 4);
        await waitCount(edges, 3);
        await page.screenshot({ path: `${shots}/reasoning-tree-rerooted.png` });
      });
    }

    if (!features.search) {
      skip('search: snippets as threads, match highlighted', 'server has no Workspace.search yet');
    } else {
      await check('Search shows snippets as threads with the match highlighted and seqInSession', async () => {
        await page.goto(`${base}/#/search?workspace=${WS}&q=turquoise&window=2`);
        const thread = page.locator('.thread[data-session="chat-1"]');
        await thread.waitFor();
        const hit = thread.locator('.msg.matched');
        await hit.locator('mark', { hasText: /turquoise/i }).first().waitFor();
        assert((await hit.count()) === 1, `${await hit.count()} matched messages in chat-1`);
        assert((await hit.getAttribute('data-seq')) === '5', `match at seq ${await hit.getAttribute('data-seq')}`);
        const seqs = await thread.locator('.msg').evaluateAll((els) => els.map((el) => Number(el.dataset.seq)));
        assert(JSON.stringify(seqs) === '[3,4,5,6,7]', `context seqs ${seqs}`);
        assert((await hit.locator('.seq').textContent()) === '#5', 'seqInSession not shown');
        await page.locator('.thread[data-session="garden"] .msg.matched mark').first().waitFor();
        await page.screenshot({ path: `${shots}/search.png`, fullPage: true });
      });
    }

    await check('CORS: an allowed origin calls /graphql with credentials and reads x-request-id; a foreign one cannot', async () => {
      // Page-side code: a JSON POST with an Authorization header (so the browser preflights it)
      // and credentials, then a WebSocket; reports what the page could see.
      const probe = async ([api, ws]) => {
        const out = {};
        try {
          const resp = await fetch(`${api}/graphql`, {
            method: 'POST',
            credentials: 'include',
            headers: { 'content-type': 'application/json', authorization: 'Bearer none' },
            body: JSON.stringify({ query: '{ __typename }' }),
          });
          out.status = resp.status;
          out.requestId = resp.headers.get('x-request-id');
          out.body = await resp.json();
        } catch (e) {
          out.fetchError = String(e);
        }
        out.ws = await new Promise((resolve) => {
          const socket = new WebSocket(`${ws}/graphql/ws`, 'graphql-transport-ws');
          socket.onopen = () => {
            socket.close();
            resolve('open');
          };
          socket.onerror = () => resolve('refused');
        });
        return out;
      };
      const other = await context.newPage();
      try {
        const args = [base, base.replace('http:', 'ws:')];
        await other.goto(`${allowedApp}/`);
        const allowed = await other.evaluate(probe, args);
        assert(allowed.status === 200, `allowed origin: ${JSON.stringify(allowed)}`);
        assert(allowed.body?.data?.__typename === 'QueryRoot', `allowed origin body: ${JSON.stringify(allowed)}`);
        assert(/^[0-9a-f-]{36}$/.test(allowed.requestId ?? ''), `x-request-id not exposed: ${JSON.stringify(allowed)}`);
        assert(allowed.ws === 'open', `allowed origin's WebSocket: ${allowed.ws}`);

        await other.goto(`${foreignApp}/`);
        const foreign = await other.evaluate(probe, args);
        assert(foreign.fetchError && foreign.status === undefined, `foreign origin read: ${JSON.stringify(foreign)}`);
        assert(foreign.ws === 'refused', `foreign origin's WebSocket: ${foreign.ws}`);
      } finally {
        await other.close();
      }
    });

    await check('the page made no request to another host and threw no error', async () => {
      assert(external.length === 0, `requests to other hosts: ${external.join(', ')}`);
      assert(pageErrors.length === 0, `page errors: ${pageErrors.join('\n')}`);
    });
  } finally {
    app.close();
    await browser?.close();
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((r) => server.once('exit', r));
    }
    psql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  }
  if (results.failed) console.log(`\nserver log:\n${serverLog}`);
  console.log(`screenshots: ${shots}`);
  console.log(`${results.passed} passed, ${results.failed} failed, ${results.skipped} skipped`);
  process.exit(results.failed ? 1 : 0);
}

async function waitCount(locator, n) {
  const deadline = Date.now() + TIMEOUT;
  let count;
  while (Date.now() < deadline) {
    count = await locator.count();
    if (count === n) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`expected ${n} of ${locator}, found ${count}`);
}

main().catch((e) => {
  console.error(e);
  console.log(`${results.passed} passed, ${results.failed + 1} failed, ${results.skipped} skipped`);
  process.exit(1);
});
