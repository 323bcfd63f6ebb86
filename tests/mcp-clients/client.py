"""The MCP server driven by the official Python SDK (`mcp` on PyPI). Run by tests/it/mcp_clients.rs:

    python client.py <mode> <transport>

mode: `auto` (the SDK's default: server/discover, so 2026-07-28 with this server) or `legacy`
(initialize). transport: `http` (MCP_URL and MCP_KEY) or `stdio` (HONCHO_BIN is started as
`honcho-graphql mcp` with this process's environment: DATABASE_URL, HONCHO_API_KEY, ...).
MCP_WORKSPACE is the workspace to work in. The steps are those of scenario.mjs, with its
scenario.json. Prints `protocol <revision>` once connected and `OK` last when every step did
what it should.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

# The tools the server lists (docs/mcp.md, "Tools") and the conversation recorded.
SCENARIO = json.loads((Path(__file__).parent / "scenario.json").read_text())
TOOLS = sorted(SCENARIO["tools"])

# The HTTP statuses the server answered, for the 401 check: the SDK reports a 401 by the JSON-RPC
# error in its body.
STATUSES: list[int] = []


async def record(response: httpx2.Response) -> None:
    STATUSES.append(response.status_code)


def client(mode: str, transport: str, key: str | None) -> Client:
    if transport == "http":
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        timeout = httpx2.Timeout(30, read=300)
        http = httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [record]})
        server = streamable_http_client(os.environ["MCP_URL"], http_client=http)
    elif transport == "stdio":
        server = StdioServerParameters(command=os.environ["HONCHO_BIN"], args=["mcp"], env=dict(os.environ))
    else:
        raise SystemExit(f"unknown transport {transport}")
    return Client(server, mode=mode)


async def ok(c: Client, name: str, args: dict) -> dict:
    """A call that must succeed: its structured content."""
    r = await c.call_tool(name, args)
    text = r.content[0].text if r.content else None
    assert not r.is_error, f"{name}: {text}"
    assert isinstance(text, str), f"{name}: no text content"
    return r.structured_content


async def read(c: Client, uri: str) -> str:
    return "\n".join(getattr(x, "text", "") for x in (await c.read_resource(uri)).contents)


async def scenario(c: Client, ws: str) -> None:
    assert sorted(t.name for t in (await c.list_tools()).tools) == TOOLS
    templates = (await c.list_resource_templates()).resource_templates
    assert len(templates) == 3, templates
    assert isinstance((await c.list_resources()).resources, list)
    assert [p.name for p in (await c.list_prompts()).prompts] == ["use_memory"]
    print(f"listed {len(TOOLS)} tools, {len(templates)} resource templates, 1 prompt")

    await ok(c, "create_session", {"workspace_id": ws, "session_id": "s1"})
    turns = SCENARIO["turns"]
    added = await ok(c, "add_messages_to_session", {"workspace_id": ws, "session_id": "s1", "messages": turns})
    assert [m["seq_in_session"] for m in added["messages"]] == [1, 2, 3, 4, 5]

    found = await ok(
        c,
        "search",
        {
            "workspace_id": ws,
            "session_id": "s1",
            "query": "kayak",
            "message_limit": 1,
            "include_context": True,
            "context_window": 1,
        },
    )
    assert found["messages"][0]["seq_in_session"] == 3, found
    assert [m["seq_in_session"] for m in found["snippets"][0]["context"]] == [2, 3, 4]
    print("search with include_context: the match and its window")

    card = ["Owns a kayak", "Lives by a river"]
    await ok(c, "set_peer_card", {"workspace_id": ws, "peer_id": "alice", "peer_card": card})
    assert (await ok(c, "get_peer_card", {"workspace_id": ws, "peer_id": "alice"}))["peer_card"] == card

    made = await ok(
        c,
        "create_conclusions",
        {"workspace_id": ws, "peer_id": "bob", "target_peer_id": "alice", "conclusions": ["alice owns a kayak"]},
    )
    cid = made["conclusions"][0]["id"]
    tree = await ok(c, "reasoning_tree", {"workspace_id": ws, "conclusion_id": cid})
    assert [(n["depth"], n["id"]) for n in tree["nodes"]] == [(0, cid)], tree
    print("peer card and reasoning tree")

    assert "Owns a kayak" in await read(c, f"honcho://workspaces/{ws}/peers/alice/card")
    transcript = await read(c, f"honcho://workspaces/{ws}/sessions/s1/transcript")
    assert "#3] alice: I am taking my kayak down the river" in transcript, transcript
    guide = await c.get_prompt("use_memory", {"peer_id": "alice", "workspace_id": ws})
    assert "`alice`" in "\n".join(m.content.text for m in guide.messages)
    print("resources and prompt")

    # Another workspace is out of the key's reach: a tool error, not a protocol error.
    refused = await c.call_tool("list_sessions", {"workspace_id": f"{ws}-other"})
    assert refused.is_error and refused.structured_content["code"] == "FORBIDDEN", refused
    print("refused call: FORBIDDEN")


async def unauthorized(mode: str) -> None:
    """Connecting without a key over HTTP fails with the server's 401."""
    STATUSES.clear()
    try:
        async with client(mode, "http", None):
            pass
    except Exception as e:  # the SDK raises inside task groups: look through them
        text = " ".join(repr(x) for x in flatten(e))
        assert "UNAUTHENTICATED" in text, text
        assert STATUSES and set(STATUSES) == {401}, STATUSES
        print("no key: 401")
        return
    raise AssertionError("connected without a key")


def flatten(e: BaseException) -> list[BaseException]:
    inner = getattr(e, "exceptions", None)
    if inner:
        return [x for sub in inner for x in flatten(sub)]
    return [e, *([e.__cause__] if e.__cause__ else [])]


async def main() -> None:
    mode, transport = sys.argv[1:3]
    async with client(mode, transport, os.environ.get("MCP_KEY")) as c:
        print(f"protocol {c.protocol_version}")
        await scenario(c, os.environ["MCP_WORKSPACE"])
    if transport == "http":
        await unauthorized(mode)
    print("OK")


asyncio.run(main())
