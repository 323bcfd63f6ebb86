// The MCP server driven by the official TypeScript SDK, as an agent's host would use it. Run by
// tests/it/mcp_clients.rs:
//
//   node client.mjs <sdk> <transport>
//
// sdk: `v1` (@modelcontextprotocol/sdk, initialize) or `v2` (@modelcontextprotocol/client, pinned
// to 2026-07-28: server/discover, then a self-contained request each). transport: `http` (MCP_URL
// and MCP_KEY) or `stdio` (HONCHO_BIN is started as `honcho-graphql mcp`, with this process's
// environment: DATABASE_URL, HONCHO_API_KEY, ...). MCP_WORKSPACE is the workspace to work in.
// Prints `protocol <revision>` once connected and `OK` last when every step did what it should.

import { scenario, unauthorized } from "./scenario.mjs";

const [sdk, transport] = process.argv.slice(2);
const workspace = process.env.MCP_WORKSPACE;
const info = { name: `honcho-graphql-it-${sdk}`, version: "1.0.0" };

/** The SDK's client class and transports, and the client's options for the revision we want. */
async function load() {
  if (sdk === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    return { Client, StreamableHTTPClientTransport, StdioClientTransport, options: {} };
  }
  if (sdk === "v2") {
    const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
    const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
    const options = { versionNegotiation: { mode: { pin: "2026-07-28" } } };
    return { Client, StreamableHTTPClientTransport, StdioClientTransport, options };
  }
  throw new Error(`unknown sdk ${sdk}`);
}

const sdkApi = await load();

/** A transport to the server; `key` is sent over HTTP (none: no Authorization header). */
function open(key) {
  if (transport === "http") {
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    return new sdkApi.StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
      requestInit: { headers },
    });
  }
  if (transport === "stdio") {
    // The SDK passes the child only a few safe variables unless told otherwise.
    return new sdkApi.StdioClientTransport({
      command: process.env.HONCHO_BIN,
      args: ["mcp"],
      env: { ...process.env },
      stderr: "inherit",
    });
  }
  throw new Error(`unknown transport ${transport}`);
}

/** Connects; the client and the revision it settled on. */
async function connect(key) {
  const t = open(key);
  // v1 has no getter for the revision initialize settled on; it hands it to the transport.
  let settled;
  const hand = t.setProtocolVersion?.bind(t);
  t.setProtocolVersion = (v) => {
    settled = v;
    hand?.(v);
  };
  const client = new sdkApi.Client(info, sdkApi.options);
  await client.connect(t);
  const revision = client.getNegotiatedProtocolVersion?.() ?? settled;
  return { client, revision };
}

const { client, revision } = await connect(process.env.MCP_KEY);
console.log(`protocol ${revision}`);

// The scenario speaks to the SDK through these few calls, which both SDKs share.
const api = {
  listTools: async () => (await client.listTools()).tools.map((t) => t.name),
  listTemplates: async () =>
    (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
  listResources: async () => (await client.listResources()).resources,
  listPrompts: async () => (await client.listPrompts()).prompts.map((p) => p.name),
  call: async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    return { isError: r.isError === true, structured: r.structuredContent, text: r.content?.[0]?.text };
  },
  read: async (uri) => (await client.readResource({ uri })).contents.map((c) => c.text).join("\n"),
  prompt: async (name, args) =>
    (await client.getPrompt({ name, arguments: args })).messages.map((m) => m.content.text).join("\n"),
};

await scenario(api, workspace, (line) => console.log(line));
await client.close();

if (transport === "http") {
  await unauthorized(() => connect(undefined), (line) => console.log(line));
}
console.log("OK");
process.exit(0);
