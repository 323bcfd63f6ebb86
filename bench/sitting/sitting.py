#!/usr/bin/env python3
"""The sitting: one workload, the same against Honcho v3 and against this server.

What one run does, in order:
  1. creates a workspace, two peers (alice, bob) and a session holding both, over REST;
  2. ingests --messages messages of the corpus (corpus.py) in batches of --batch, alice and bob
     taking turns, one request per batch, each batch timed: the medians of the first ten and of
     the last ten batches say whether a batch slows as the session fills (under 20 batches, the
     first and the second half are compared);
  3. with --db: for Honcho, waits until its background embedding has no pending row (its ingest
     rate is given with and without that wait); for ours, counts messages left without a vector;
     then runs ANALYZE on the server's database (PostgreSQL's autovacuum may be off, and a new
     table without statistics gets plans that make Honcho's search seconds long);
  4. times four reads, over each API of --reads, --warmup untimed calls and then --calls timed
     calls each, one after the other on one kept-open connection:
       search    the session's search, --limit results, a two-word query (--queries of them, in turn)
       by_peer   a page of --page messages of one peer (alice and bob in turn), with its total
       by_time   a page of --page messages created at or after the middle message's created_at
       get       one message by id (ids drawn from the ingested ones)
  5. prints the figures and writes them, with the run's settings, to --out (JSON).

REST routes (Honcho's v3, which this server serves too):
  POST /v3/workspaces/{w}/sessions/{s}/messages         {"messages": [{"peer_id", "content"}, ...]}
  POST /v3/workspaces/{w}/sessions/{s}/search           {"query": q, "limit": 10}
  POST /v3/workspaces/{w}/sessions/{s}/messages/list?page=1&size=50   {"filters": {...}}
  GET  /v3/workspaces/{w}/sessions/{s}/messages/{id}
GraphQL (ours only): the same reads as queries on /graphql (GRAPHQL_* below), and
createMessages for --ingest-api graphql.

The JSON also holds, for each read and API, one request to replay at the server with wrk
(alternate.py --wrk does it; bench/sitting/wrk_read.lua).

Needs httpx (requirements.txt); --db needs psql on PATH.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from urllib.parse import quote

import httpx

import corpus

PEERS = ("alice", "bob")
READS = ("search", "by_peer", "by_time", "get")

GRAPHQL_SEARCH = """query Search($w: ID!, $s: ID!, $q: String!, $limit: Int!) {
  workspace(id: $w) { session(id: $s) { search(query: $q, limit: $limit) {
    ... on MessageHits { results { id content peerId sessionId workspaceId metadata createdAt tokenCount } }
  } } }
}"""

GRAPHQL_PAGE = """query Page($w: ID!, $s: ID!, $filters: JSON, $first: Int!) {
  workspace(id: $w) { session(id: $s) { messages(filters: $filters, first: $first) {
    totalCount nodes { id content peerId sessionId workspaceId metadata createdAt tokenCount }
  } } }
}"""

GRAPHQL_GET = """query Get($w: ID!, $id: ID!) {
  workspace(id: $w) { message(id: $id) {
    id content peerId sessionId workspaceId metadata createdAt tokenCount
  } }
}"""

GRAPHQL_CREATE = """mutation Create($w: ID!, $s: ID!, $messages: [MessageInput!]!) {
  createMessages(workspaceId: $w, sessionId: $s, messages: $messages) { id createdAt }
}"""


class Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless it has none or its help already says it."""

    def _get_help_string(self, action):
        if action.default in (None, "", False, []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Failed(Exception):
    pass


def ms_summary(seconds: list[float]) -> dict:
    """p50/p95/p99 by linear interpolation between the closest ranks, and the rest, in ms."""
    ms = [s * 1000.0 for s in seconds]
    if len(ms) == 1:
        cuts = ms * 99
    else:
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
    return {
        "calls": len(ms),
        "p50_ms": round(cuts[49], 3),
        "p95_ms": round(cuts[94], 3),
        "p99_ms": round(cuts[98], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
    }


def load_average() -> list[float] | None:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def psql(dsn: str, sql: str) -> str:
    done = subprocess.run(["psql", dsn, "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise Failed(f"psql {sql!r}: {done.stderr.strip()}")
    return done.stdout.strip()


class Server:
    """One kept-open connection to the server under test, and its routes."""

    def __init__(self, url: str, workspace: str, session: str, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.workspace = workspace
        self.session = session
        self.http = httpx.Client(timeout=timeout, headers={"content-type": "application/json"})
        w, s = quote(workspace, safe=""), quote(session, safe="")
        self.ws_path = f"/v3/workspaces/{w}"
        self.session_path = f"{self.ws_path}/sessions/{s}"

    def close(self) -> None:
        self.http.close()

    @staticmethod
    def ok(response: httpx.Response, what: str) -> httpx.Response:
        if response.status_code >= 300:
            raise Failed(f"{what}: HTTP {response.status_code}: {response.text[:400]}")
        return response

    def send(self, method: str, path: str, body=None) -> httpx.Response:
        return self.http.request(method, self.url + path, json=body)

    def graphql_data(self, response: httpx.Response, what: str) -> dict:
        payload = self.ok(response, what).json()
        if payload.get("errors"):
            raise Failed(f"{what}: {json.dumps(payload['errors'])[:400]}")
        return payload["data"]

    def set_up(self) -> None:
        self.ok(self.send("POST", "/v3/workspaces", {"id": self.workspace}), "create workspace")
        for peer in PEERS:
            self.ok(self.send("POST", f"{self.ws_path}/peers", {"id": peer}), f"create peer {peer}")
        members = {peer: {} for peer in PEERS}
        self.ok(self.send("POST", f"{self.ws_path}/sessions", {"id": self.session, "peers": members}),
                "create session")

    def create_batch(self, api: str, batch: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Sends one batch of (peer, content); returns each message's (id, created_at)."""
        if api == "rest":
            body = {"messages": [{"peer_id": p, "content": c} for p, c in batch]}
            made = self.ok(self.send("POST", f"{self.session_path}/messages", body), "create messages").json()
            return [(m["id"], m["created_at"]) for m in made]
        variables = {"w": self.workspace, "s": self.session,
                     "messages": [{"peerId": p, "content": c} for p, c in batch]}
        data = self.graphql_data(self.send("POST", "/graphql", {"query": GRAPHQL_CREATE, "variables": variables}),
                                 "createMessages")
        return [(m["id"], m["createdAt"]) for m in data["createMessages"]]


def read_requests(server: Server, api: str, read: str, queries, ids, gte, page: int, limit: int):
    """The read's i-th request as (method, path, body), and a check of its answer that returns
    how many messages it held (and the total, for pages)."""
    w, s = server.workspace, server.session
    if api == "rest":
        page_path = f"{server.session_path}/messages/list?page=1&size={page}"
        if read == "search":
            request = lambda i: ("POST", f"{server.session_path}/search", {"query": queries[i % len(queries)], "limit": limit})
            check = lambda body: {"results": len(body)}
        elif read == "by_peer":
            request = lambda i: ("POST", page_path, {"filters": {"peer_id": PEERS[i % 2]}})
            check = lambda body: {"items": len(body["items"]), "total": body.get("total")}
        elif read == "by_time":
            request = lambda i: ("POST", page_path, {"filters": {"created_at": {"gte": gte}}})
            check = lambda body: {"items": len(body["items"]), "total": body.get("total")}
        else:
            request = lambda i: ("GET", f"{server.session_path}/messages/{quote(ids[i % len(ids)], safe='')}", None)
            check = lambda body: {"found": int(body["id"] in ids)}
        return request, check

    def gql(query: str, variables: dict):
        return ("POST", "/graphql", {"query": query, "variables": variables})

    if read == "search":
        request = lambda i: gql(GRAPHQL_SEARCH, {"w": w, "s": s, "q": queries[i % len(queries)], "limit": limit})
        check = lambda data: {"results": len(data["workspace"]["session"]["search"]["results"])}
    elif read == "by_peer":
        request = lambda i: gql(GRAPHQL_PAGE, {"w": w, "s": s, "first": page, "filters": {"peer_id": PEERS[i % 2]}})
        check = lambda data: {"items": len(data["workspace"]["session"]["messages"]["nodes"]),
                              "total": data["workspace"]["session"]["messages"]["totalCount"]}
    elif read == "by_time":
        request = lambda i: gql(GRAPHQL_PAGE, {"w": w, "s": s, "first": page, "filters": {"created_at": {"gte": gte}}})
        check = lambda data: {"items": len(data["workspace"]["session"]["messages"]["nodes"]),
                              "total": data["workspace"]["session"]["messages"]["totalCount"]}
    else:
        request = lambda i: gql(GRAPHQL_GET, {"w": w, "id": ids[i % len(ids)]})
        check = lambda data: {"found": int((data["workspace"]["message"] or {}).get("id") in ids)}
    return request, check


def time_read(server: Server, api: str, read: str, request, check, warmup: int, calls: int) -> dict:
    what = f"{api} {read}"

    def answer(response: httpx.Response):
        if api == "graphql":
            return server.graphql_data(response, what)
        return server.ok(response, what).json()

    for i in range(warmup):
        answer(server.send(*request(i)))
    seconds, shape = [], None
    for i in range(warmup, warmup + calls):
        method, path, body = request(i)
        start = time.perf_counter()
        response = server.send(method, path, body)
        seconds.append(time.perf_counter() - start)
        shape = check(answer(response))
    result = ms_summary(seconds)
    result["last_answer"] = shape
    return result


def pending_honcho_embeddings(dsn: str) -> int:
    return int(psql(dsn, "SELECT count(*) FROM message_embeddings WHERE sync_state = 'pending'"))


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Run the sitting's workload (ingest, then four timed reads) against Honcho v3 "
                    "or this server, print the figures and write them as JSON.",
        epilog="Example: python sitting.py --target ours --url http://127.0.0.1:18600 "
               "--messages 1000 --calls 50 --reads rest,graphql --db postgresql://postgres@127.0.0.1/sitting_ours",
        formatter_class=Help)
    ap.add_argument("--target", choices=("honcho", "ours"), required=True,
                    help="which server --url is: Honcho takes only REST, and its embeddings are "
                         "waited for after ingest when --db is given")
    ap.add_argument("--url", default=None,
                    help="the server's base URL (default http://127.0.0.1:8000 for honcho, "
                         "http://127.0.0.1:18600 for ours)")
    ap.add_argument("--messages", type=int, default=10_000, help="messages to ingest")
    ap.add_argument("--batch", type=int, default=100, help="messages per create request")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls before each read's timed ones")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per read and API")
    ap.add_argument("--seed", type=int, default=42, help="seed of the corpus and the queries")
    ap.add_argument("--queries", type=int, default=64, help="distinct two-word queries, used in turn")
    ap.add_argument("--page", type=int, default=50, help="page size of the two list reads")
    ap.add_argument("--limit", type=int, default=10, help="results per search")
    ap.add_argument("--ingest-api", choices=("rest", "graphql"), default="rest",
                    help="API the batches are created through (graphql: ours only)")
    ap.add_argument("--reads", default="rest",
                    help="comma-separated APIs to time the reads over: rest, graphql (ours only)")
    ap.add_argument("--workspace", default=None, help="workspace id (default sitting-<unix time>)")
    ap.add_argument("--session", default="sitting-session", help="session id")
    ap.add_argument("--db", default=os.environ.get("SITTING_DB", ""),
                    help="psql connection string of the server's database (env SITTING_DB): wait "
                         "for Honcho's pending embeddings, then ANALYZE, before the reads")
    ap.add_argument("--no-analyze", action="store_true", help="with --db, skip the ANALYZE")
    ap.add_argument("--drain-timeout", type=float, default=900.0,
                    help="longest wait for Honcho's pending embeddings, in seconds")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to sleep between ingest (and ANALYZE) and the reads")
    ap.add_argument("--timeout", type=float, default=120.0, help="HTTP timeout of one call, in seconds")
    ap.add_argument("--label", default=None, help="free text kept in the JSON (default: the target)")
    ap.add_argument("--out", default=None, help="JSON file to write (default sitting-<target>.json; '-': none)")
    ap.add_argument("--quiet", action="store_true", help="print only the summary lines, not the JSON")
    args = ap.parse_args(argv)
    args.reads = [a.strip() for a in args.reads.split(",") if a.strip()]
    for api in args.reads:
        if api not in ("rest", "graphql"):
            ap.error(f"--reads: unknown API {api!r}")
    if args.target == "honcho" and ("graphql" in args.reads or args.ingest_api == "graphql"):
        ap.error("Honcho serves no GraphQL: use --reads rest and --ingest-api rest")
    if args.messages < args.batch or args.batch < 1:
        ap.error("--messages must be at least one --batch")
    if args.calls < 1 or args.warmup < 0:
        ap.error("--calls must be at least 1 and --warmup at least 0")
    if args.db and not shutil.which("psql"):
        ap.error("--db needs psql on PATH")
    args.url = args.url or ("http://127.0.0.1:8000" if args.target == "honcho" else "http://127.0.0.1:18600")
    args.out = args.out or f"sitting-{args.target}.json"
    return args


def run(args: argparse.Namespace) -> dict:
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load_at_start = load_average()
    workspace = args.workspace or f"sitting-{int(time.time())}"
    server = Server(args.url, workspace, args.session, args.timeout)
    try:
        server.set_up()

        texts = corpus.messages(args.seed, args.messages)
        batch_seconds, ids, created = [], [], []
        ingest_start = time.perf_counter()
        for first in range(0, len(texts), args.batch):
            batch = [(PEERS[(first + j) % 2], text) for j, text in enumerate(texts[first:first + args.batch])]
            start = time.perf_counter()
            made = server.create_batch(args.ingest_api, batch)
            batch_seconds.append(time.perf_counter() - start)
            if len(made) != len(batch):
                raise Failed(f"a batch of {len(batch)} answered {len(made)} messages")
            ids += [m[0] for m in made]
            created += [m[1] for m in made]
        ingest_seconds = time.perf_counter() - ingest_start

        # The first and the last ten batches; under 20 batches, the first and the second half.
        window = max(1, min(10, len(batch_seconds) // 2))
        first_ten = statistics.median(batch_seconds[:window]) * 1000
        last_ten = statistics.median(batch_seconds[-window:]) * 1000
        ingest = {
            "api": args.ingest_api,
            "seconds": round(ingest_seconds, 3),
            "msgs_per_s": round(len(texts) / ingest_seconds, 1),
            "batches": len(batch_seconds),
            "batch": ms_summary(batch_seconds),
            "first_batch_ms": round(batch_seconds[0] * 1000, 3),
            "growth_window_batches": window,
            "first10_p50_ms": round(first_ten, 3),
            "last10_p50_ms": round(last_ten, 3),
            "growth_last10_over_first10": round(last_ten / first_ten, 3),
        }

        if args.db:
            wait_start = time.perf_counter()
            if args.target == "honcho":
                pending = pending_honcho_embeddings(args.db)
                while pending and time.perf_counter() - wait_start < args.drain_timeout:
                    time.sleep(0.5)
                    pending = pending_honcho_embeddings(args.db)
                waited = time.perf_counter() - wait_start
                ingest["pending_embeddings_after_wait"] = pending
                ingest["embedding_wait_s"] = round(waited, 3)
                ingest["msgs_per_s_with_embedding"] = round(len(texts) / (ingest_seconds + waited), 1)
            else:
                ingest["messages_without_vector"] = int(psql(
                    args.db, "SELECT count(*) FROM messages WHERE embedding IS NULL"))
            if not args.no_analyze:
                analyze_start = time.perf_counter()
                psql(args.db, "ANALYZE")
                ingest["analyze_s"] = round(time.perf_counter() - analyze_start, 3)
        if args.settle > 0:
            time.sleep(args.settle)

        queries = corpus.queries(args.seed, args.queries)
        picker = corpus.SplitMix64(args.seed ^ 0x1D5)
        get_ids = [ids[picker.below(len(ids))] for _ in range(args.warmup + args.calls)]
        gte = created[len(created) // 2]

        reads, replay = {}, {}
        for api in args.reads:
            reads[api], replay[api] = {}, {}
            for read in READS:
                request, check = read_requests(server, api, read, queries, get_ids, gte, args.page, args.limit)
                reads[api][read] = time_read(server, api, read, request, check, args.warmup, args.calls)
                method, path, body = request(0)
                replay[api][read] = {"method": method, "path": path,
                                     "body": None if body is None else json.dumps(body, separators=(",", ":"))}
    finally:
        server.close()

    return {
        "kind": "sitting run",
        "target": args.target,
        "label": args.label or args.target,
        "url": args.url,
        "workspace": workspace,
        "session": args.session,
        "settings": {k: getattr(args, k) for k in
                     ("messages", "batch", "warmup", "calls", "seed", "queries", "page", "limit",
                      "ingest_api", "reads", "settle")},
        "analyzed": bool(args.db) and not args.no_analyze,
        "ingest": ingest,
        "reads": reads,
        "replay": replay,
        "queries_first": queries[:4],
        "created_at_gte": gte,
        "host": {"cpus": os.cpu_count(), "load_start": load_at_start, "load_end": load_average(),
                 "python": platform.python_version(), "httpx": httpx.__version__,
                 "client": "sequential, one kept-open connection"},
        "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def print_summary(result: dict) -> None:
    ingest = result["ingest"]
    line = (f"[{result['label']}] ingest {result['settings']['messages']} messages: {ingest['msgs_per_s']} msg/s, "
            f"batch p50 first {ingest['growth_window_batches']} {ingest['first10_p50_ms']} ms -> "
            f"last {ingest['growth_window_batches']} {ingest['last10_p50_ms']} ms "
            f"(x{ingest['growth_last10_over_first10']})")
    if "msgs_per_s_with_embedding" in ingest:
        line += f"; with its background embedding {ingest['msgs_per_s_with_embedding']} msg/s"
    print(line)
    for api, reads in result["reads"].items():
        for read, r in reads.items():
            print(f"[{result['label']}] {api:7} {read:8} p50 {r['p50_ms']:9.3f} ms  p95 {r['p95_ms']:9.3f} ms  "
                  f"{r['last_answer']}")


def main() -> None:
    args = parse_args()
    try:
        result = run(args)
    except (Failed, httpx.HTTPError) as e:
        sys.exit(f"sitting: {e}")
    if not args.quiet:
        print(json.dumps(result, indent=2))
    print_summary(result)
    if args.out != "-":
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
