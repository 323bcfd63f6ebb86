#!/usr/bin/env python3
"""An OpenAI-compatible embeddings endpoint for the sitting, so both servers embed alike.

    POST /v1/embeddings (or /embeddings)
        {"model": ..., "input": "text" | ["text", ...] | [token, ...] | [[token, ...], ...],
         "encoding_format": "float" | "base64", "dimensions": n}
    GET  /health    {"status": "ok", "dims": ..., "requests": ..., "texts": ...}
    GET  /v1/models

A text's vector is a bag of words: every lower-cased word ([a-z0-9']+) has a fixed vector of
independent standard normal numbers (drawn by numpy's PCG64 from a seed that is the first 8 bytes
of BLAKE2b(dims, word)), and the text's vector is the sum of its words' vectors scaled to length
one. So the same text gives the same vector on every run and machine, and texts that share words
are near each other, which is what a search needs to rank something. Token-id inputs are read as
words `t<id>`. The length is the request's `dimensions`, else `--dims`.

Replies are written with TCP_NODELAY. Without it, a reply whose head and body leave in two
writes waits for the client's delayed ACK on a kept-open connection (about 40 ms on Linux), a cost
no real embedding service has, which the server that keeps its connection open would pay on every
search and the one that opens a new connection would not.

Needs numpy (bench/sitting/requirements.txt). Usage:
    python embed_stub.py [--host 127.0.0.1] [--port 8900] [--dims 1536]
"""

import argparse
import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

WORD = re.compile(r"[a-z0-9']+")


class Vocabulary:
    """Word vectors, made on first use and kept (the sitting's corpus has a few hundred words)."""

    def __init__(self, limit: int = 500_000) -> None:
        self.vectors: dict[tuple[int, str], np.ndarray] = {}
        self.limit = limit
        self.lock = threading.Lock()

    def vector(self, word: str, dims: int) -> np.ndarray:
        key = (dims, word)
        found = self.vectors.get(key)
        if found is not None:
            return found
        digest = hashlib.blake2b(f"{dims}\x00{word}".encode(), digest_size=8).digest()
        made = np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big"))).standard_normal(dims)
        with self.lock:
            if len(self.vectors) < self.limit:
                self.vectors[key] = made
        return made

    def embed(self, text: str, dims: int) -> np.ndarray:
        words = WORD.findall(text.lower()) or ["<nothing>"]
        total = np.zeros(dims)
        for w in words:
            total += self.vector(w, dims)
        length = float(np.linalg.norm(total))
        return (total / (length or 1.0)).astype("<f4")


def texts_of(value) -> list[str] | None:
    """The request's inputs as texts; None when the shape is not one the API takes."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
        return [" ".join(f"t{t}" for t in value)]
    if isinstance(value, list) and value:
        out = []
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, list) and all(isinstance(t, int) for t in item):
                out.append(" ".join(f"t{t}" for t in item))
            else:
                return None
        return out
    return None


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY on every accepted connection
    vocabulary = Vocabulary()
    default_dims = 1536
    counts = {"requests": 0, "texts": 0}

    def log_message(self, *args) -> None:
        pass

    def reply(self, status: int, payload) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status: int, message: str) -> None:
        self.reply(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path in ("", "/health"):
            self.reply(200, {"status": "ok", "dims": self.default_dims, **self.counts})
        elif path in ("/v1/models", "/models"):
            self.reply(200, {"object": "list", "data": [{"id": "stub-bag-of-words", "object": "model"}]})
        else:
            self.error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            self.error(404, f"no route {self.path}")
            return
        try:
            request = json.loads(raw or b"{}")
        except ValueError as e:
            self.error(400, f"the body is not JSON: {e}")
            return
        texts = texts_of(request.get("input"))
        if texts is None:
            self.error(400, "input must be a string, a list of strings or of token lists")
            return
        dims = int(request.get("dimensions") or self.default_dims)
        as_base64 = request.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vector = self.vocabulary.embed(text, dims)
            if as_base64:
                encoded = base64.b64encode(vector.tobytes()).decode()
            else:
                encoded = vector.tolist()
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        tokens = sum(len(t.split()) for t in texts)
        self.counts["requests"] += 1
        self.counts["texts"] += len(texts)
        self.reply(200, {"object": "list", "data": data, "model": request.get("model", "stub"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on")
    ap.add_argument("--port", type=int, default=8900, help="port to listen on")
    ap.add_argument("--dims", type=int, default=1536,
                    help="vector length when a request does not ask for one (`dimensions`)")
    args = ap.parse_args()
    Stub.default_dims = args.dims
    server = ThreadingHTTPServer((args.host, args.port), Stub)
    server.daemon_threads = True
    print(f"embedding stub at http://{args.host}:{args.port}/v1, {args.dims} dims", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
