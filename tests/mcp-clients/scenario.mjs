// What client.mjs does once connected, the same for both SDKs (client.py does the same steps in
// Python, from the same scenario.json): list what the server offers, record a conversation,
// search it with context, a peer card, a conclusion's reasoning tree, the resources and the
// prompt, and a refused call.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

/** The tools the server lists (docs/mcp.md, "Tools") and the conversation recorded. */
const { tools: TOOLS, turns: TURNS } = JSON.parse(
  readFileSync(new URL("./scenario.json", import.meta.url), "utf8"),
);

/** A call that must succeed: its structured content. */
async function ok(api, name, args) {
  const r = await api.call(name, args);
  assert.equal(r.isError, false, `${name}: ${r.text}`);
  assert.equal(typeof r.text, "string", `${name}: no text content`);
  return r.structured;
}

export async function scenario(api, ws, log) {
  assert.deepEqual((await api.listTools()).sort(), TOOLS);
  const templates = await api.listTemplates();
  assert.equal(templates.length, 3, templates.join(", "));
  assert.ok(Array.isArray(await api.listResources()));
  assert.deepEqual(await api.listPrompts(), ["use_memory"]);
  log(`listed ${TOOLS.length} tools, ${templates.length} resource templates, 1 prompt`);

  await ok(api, "create_session", { workspace_id: ws, session_id: "s1" });
  const added = await ok(api, "add_messages_to_session", {
    workspace_id: ws,
    session_id: "s1",
    messages: TURNS,
  });
  assert.deepEqual(
    added.messages.map((m) => m.seq_in_session),
    [1, 2, 3, 4, 5],
  );

  const found = await ok(api, "search", {
    workspace_id: ws,
    session_id: "s1",
    query: "kayak",
    message_limit: 1,
    include_context: true,
    context_window: 1,
  });
  assert.equal(found.messages[0].seq_in_session, 3, JSON.stringify(found));
  assert.deepEqual(
    found.snippets[0].context.map((m) => m.seq_in_session),
    [2, 3, 4],
  );
  log("search with include_context: the match and its window");

  const card = ["Owns a kayak", "Lives by a river"];
  await ok(api, "set_peer_card", { workspace_id: ws, peer_id: "alice", peer_card: card });
  const got = await ok(api, "get_peer_card", { workspace_id: ws, peer_id: "alice" });
  assert.deepEqual(got.peer_card, card);

  const made = await ok(api, "create_conclusions", {
    workspace_id: ws,
    peer_id: "bob",
    target_peer_id: "alice",
    conclusions: ["alice owns a kayak"],
  });
  const id = made.conclusions[0].id;
  const tree = await ok(api, "reasoning_tree", { workspace_id: ws, conclusion_id: id });
  assert.deepEqual(
    tree.nodes.map((n) => [n.depth, n.id]),
    [[0, id]],
  );
  log("peer card and reasoning tree");

  const cardText = await api.read(`honcho://workspaces/${ws}/peers/alice/card`);
  assert.match(cardText, /Owns a kayak/);
  const transcript = await api.read(`honcho://workspaces/${ws}/sessions/s1/transcript`);
  assert.match(transcript, /#3\] alice: I am taking my kayak down the river/);
  const guide = await api.prompt("use_memory", { peer_id: "alice", workspace_id: ws });
  assert.match(guide, /`alice`/);
  log("resources and prompt");

  // Another workspace is out of the key's reach: a tool error, not a protocol error.
  const refused = await api.call("list_sessions", { workspace_id: `${ws}-other` });
  assert.equal(refused.isError, true, refused.text);
  assert.equal(refused.structured.code, "FORBIDDEN");
  log("refused call: FORBIDDEN");
}

/** Connecting without a key over HTTP fails with the server's 401. */
export async function unauthorized(connect, log) {
  await assert.rejects(connect, (e) => {
    assert.match(`${e?.code ?? ""} ${e}`, /401|[Uu]nauthori[sz]/, `${e}`);
    return true;
  });
  log("no key: 401");
}
