#!/usr/bin/env python3
"""CPU per request: /health's latency while anonymous clients send documents of many repeated
fields (by default the load that once pushed /health's p50 to 573 ms: 64 documents of 19,000 `id`
each, 57 kB, 16 at a time).

Usage: bench/cpu_per_request.py [URL] [--documents 64] [--concurrency 16] [--fields 19000]
                                   [--seconds 10]
URL is the server's base (default http://127.0.0.1:8000); run it against a server with auth on:
the load's documents carry no key. The documents are sent again until --seconds have passed (one
pass at least), so that /health is probed often enough under a load the server refuses quickly.
Standard library only. Prints /health's latency alone, then under the load, and what the load's requests
answered.
"""

import argparse
import http.client
import json
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor


def post(host, port, body):
    conn = http.client.HTTPConnection(host, port, timeout=120)
    started = time.perf_counter()
    conn.request("POST", "/graphql", body, {"content-type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    took = time.perf_counter() - started
    conn.close()
    try:
        code = json.loads(data)["errors"][0]["extensions"].get("limit") or json.loads(data)[
            "errors"
        ][0]["extensions"]["code"]
    except (KeyError, IndexError, ValueError, TypeError):
        code = "data"
    return resp.status, code, took


def probe(host, port, stop, out, every=0.01):
    """GET /health on a fresh connection every `every` seconds until `stop` is set."""
    while not stop.is_set():
        conn = http.client.HTTPConnection(host, port, timeout=120)
        started = time.perf_counter()
        conn.request("GET", "/health")
        conn.getresponse().read()
        out.append(time.perf_counter() - started)
        conn.close()
        time.sleep(every)


def summary(name, samples):
    ms = sorted(s * 1000 for s in samples)
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    print(
        f"{name:28} n={len(ms):4}  p50 {p(0.5):7.1f} ms  p99 {p(0.99):7.1f} ms  "
        f"max {ms[-1]:7.1f} ms"
    )


def main():
    args = argparse.ArgumentParser()
    args.add_argument("url", nargs="?", default="http://127.0.0.1:8000")
    args.add_argument("--documents", type=int, default=64)
    args.add_argument("--concurrency", type=int, default=16)
    args.add_argument("--fields", type=int, default=19_000)
    args.add_argument("--seconds", type=float, default=10)
    a = args.parse_args()
    url = urllib.parse.urlparse(a.url)
    host, port = url.hostname, url.port or 80

    # Each document differs (an operation name), so no cache of parsed documents helps.
    bodies = [
        json.dumps(
            {"query": f"query Q{i} {{ workspace(id: \"w\") {{ {' '.join(['id'] * a.fields)} }} }}"}
        ).encode()
        for i in range(a.documents)
    ]
    print(f"{a.documents} documents of {len(bodies[0]):,} bytes, {a.concurrency} at a time")

    quiet = []
    stop = threading.Event()
    t = threading.Thread(target=probe, args=(host, port, stop, quiet))
    t.start()
    time.sleep(2)
    stop.set()
    t.join()
    summary("/health alone", quiet)

    loaded = []
    stop = threading.Event()
    t = threading.Thread(target=probe, args=(host, port, stop, loaded))
    t.start()
    started = time.perf_counter()
    answers = []
    with ThreadPoolExecutor(a.concurrency) as pool:
        while not answers or time.perf_counter() - started < a.seconds:
            answers += pool.map(lambda b: post(host, port, b), bodies)
    wall = time.perf_counter() - started
    stop.set()
    t.join()
    summary("/health under the load", loaded)
    summary("the load's requests", [took for _, _, took in answers])
    seen = {}
    for status, code, _ in answers:
        seen[(status, code)] = seen.get((status, code), 0) + 1
    print(f"load: {len(answers)} requests in {wall:.2f} s; answers (status, code or limit): {seen}")


if __name__ == "__main__":
    main()
