#!/usr/bin/env python3
"""Runs the sitting against Honcho and this server in turn, each run on a database of its own.

For every round, in --order (Honcho first by default):
  - creates a fresh PostgreSQL database named <--db-prefix><server>_r<round> (an existing one of
    that name is dropped first), with the vector extension;
  - starts the server on it: for Honcho, runs the operator's --honcho-start command (below)
    and waits until Honcho answers on --honcho-port; for ours, starts --ours-bin (`serve`, which
    migrates); both embed through the same stub;
  - runs sitting.py against it with --db pointing at that database, so the client waits for
    Honcho's background embedding, then runs ANALYZE, before the timed reads;
  - with --wrk S: replays each read once more at the server with wrk (one thread, one
    connection, S seconds after --wrk-warmup seconds), REST for both and GraphQL for ours;
  - stops the server (for Honcho, runs --honcho-stop) and drops the database (--keep-dbs keeps it).
It starts the embedding stub first (unless --stub-running) and stops everything it started at
the end, also on an error or Ctrl-C. Every process runs under `nice -n --nice`.

Writes to --out-dir one JSON per run (r<round>-<server>.json: the client's, with the wrk
figures and the run's conditions added), and summary.json and summary.md: for each round,
Honcho's time over ours (ratio > 1: ours is faster), per read at p50 and p95, and for ingest
the time per message (Honcho's including its background embedding).

Honcho is the operator's: this driver neither installs, builds nor configures it. --honcho-start
is a shell command run before each Honcho round with these variables in its environment:
  SITTING_DB           the fresh database's name
  SITTING_DB_URL       its URL, postgresql://…/<SITTING_DB> (with --honcho-db-params as its query)
  SITTING_HONCHO_PORT  the port Honcho must serve on (--honcho-port)
  SITTING_STUB_URL     the embedding stub's OpenAI-compatible base URL (http://127.0.0.1:8900/v1)
  SITTING_DIMS         the embedding length (--dims, 1536)
and any --honcho-env KEY=VALUE. It must leave Honcho v3.0.12 serving v3 REST on
127.0.0.1:SITTING_HONCHO_PORT against that database, its migrations applied (README.md says
what else it must see to). It may return once Honcho runs elsewhere, or keep running in the
foreground; the driver then polls GET /health until it answers 200 (--honcho-wait seconds at
most). --honcho-stop, run with the same variables after the round, stops it; a start command
still running after that is ended with its process group.

With --skip-honcho only our server runs (no ratios): a check of the driver, or our figures alone.

Needs: the venv of requirements.txt for this script, the client and the stub; psql; wrk for
--wrk; for Honcho, the operator's own start and stop commands.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
READS = ("search", "by_peer", "by_time", "get")

class Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless it has none or its help already says it."""

    def _get_help_string(self, action):
        if action.default in (None, "", False, []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def log(message: str) -> None:
    print(f"[alternate {time.strftime('%H:%M:%S')}] {message}", flush=True)


def psql(dsn: str, sql: str) -> None:
    done = subprocess.run(["psql", dsn, "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def load_1min() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class Processes:
    """The processes this driver started, each in a session of its own, stopped by their ids."""

    def __init__(self, nice: int, log_dir: Path) -> None:
        self.nice = nice
        self.log_dir = log_dir
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        out = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen(["nice", "-n", str(self.nice), *argv], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        out.close()
        self.running[name] = proc
        log(f"started {name} (pid {proc.pid})")
        return proc

    def wait_ready(self, name: str, url: str, seconds: float, may_exit: bool = False) -> None:
        """Polls url until it answers 200. Gives up after seconds, or when the process has
        exited (with may_exit, only when it exited with a failure: a start command that returns
        once its server runs elsewhere)."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if answers(url):
                return
            code = self.running[name].poll()
            if code is not None and (code != 0 or not may_exit):
                raise RuntimeError(f"{name} exited ({code}) before {url} answered; "
                                   f"see {self.log_dir / (name + '.log')}")
            time.sleep(0.3)
        raise RuntimeError(f"{name} did not answer {url} within {seconds:.0f} s; "
                           f"see {self.log_dir / (name + '.log')}")

    def stop(self, name: str) -> None:
        proc = self.running.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            # The process leads its own group (start_new_session): the group holds only what it forked.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log(f"stopped {name} (pid {proc.pid})")

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Alternate the sitting between Honcho v3 and this server on fresh databases, "
                    "and summarize Honcho's time over ours.",
        formatter_class=Help)
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each runs every server of --order once")
    ap.add_argument("--order", default="honcho,ours", help="servers in the order each round runs them")
    ap.add_argument("--skip-honcho", action="store_true", help="run only ours (no Honcho needed, no ratios)")
    ap.add_argument("--messages", type=int, default=10_000, help="messages per run (sitting.py --messages)")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per read (sitting.py --calls)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls per read (sitting.py --warmup)")
    ap.add_argument("--seed", type=int, default=42, help="corpus and query seed (sitting.py --seed)")
    ap.add_argument("--ours-reads", default="rest,graphql", help="APIs ours is read through")
    ap.add_argument("--ours-bin", default="target/release/honcho-graphql", help="our server's binary")
    ap.add_argument("--ours-port", type=int, default=18600, help="our server's port")
    ap.add_argument("--ours-env", action="append", default=[], metavar="KEY=VALUE",
                    help="one more variable for our server (repeatable)")
    ap.add_argument("--honcho-start", default="", metavar="CMD",
                    help="shell command run before each Honcho round, with SITTING_DB, SITTING_DB_URL, "
                         "SITTING_HONCHO_PORT, SITTING_STUB_URL and SITTING_DIMS in its environment; it "
                         "must leave Honcho v3 serving REST on 127.0.0.1:SITTING_HONCHO_PORT against that "
                         "database, migrations applied (README.md: what it must see to). Needed unless "
                         "--skip-honcho")
    ap.add_argument("--honcho-stop", default="", metavar="CMD",
                    help="shell command run after each Honcho round, same environment, that stops it "
                         "(none: only a --honcho-start still running is ended, with its process group)")
    ap.add_argument("--honcho-wait", type=float, default=300.0,
                    help="seconds to wait for Honcho's /health to answer after --honcho-start")
    ap.add_argument("--honcho-port", type=int, default=8000,
                    help="Honcho's port (SITTING_HONCHO_PORT)")
    ap.add_argument("--honcho-env", action="append", default=[], metavar="KEY=VALUE",
                    help="one more variable for --honcho-start and --honcho-stop (repeatable)")
    ap.add_argument("--stub-port", type=int, default=8900, help="the embedding stub's port")
    ap.add_argument("--stub-running", action="store_true",
                    help="use a stub already answering on --stub-port instead of starting one")
    ap.add_argument("--dims", type=int, default=1536,
                    help="embedding length, for both servers (only 1536 has been run with Honcho)")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432",
                    help="PostgreSQL server (a role that may create databases and the vector extension)")
    ap.add_argument("--db-prefix", default="sitting_", help="prefix of the databases made and dropped")
    ap.add_argument("--ours-db-params", default="",
                    help="query string added to our server's DATABASE_URL, e.g. sslmode=disable "
                         "(default: none, so the driver's default, TLS if the server offers it)")
    ap.add_argument("--honcho-db-params", default="",
                    help="query string added to SITTING_DB_URL, e.g. sslmode=disable")
    ap.add_argument("--keep-dbs", action="store_true", help="do not drop each run's database")
    ap.add_argument("--wrk", type=int, default=0, metavar="SECONDS",
                    help="after each run's client, replay each read with wrk this many whole seconds (0: no wrk)")
    ap.add_argument("--wrk-warmup", type=int, default=1,
                    help="seconds of wrk before each timed wrk run, not counted (wrk takes whole seconds)")
    ap.add_argument("--pause", type=float, default=10.0, help="seconds to wait between runs")
    ap.add_argument("--max-load", type=float, default=0.0,
                    help="before each run, wait (at most --max-load-wait s) for the 1-minute load "
                         "average to fall under this (0: do not wait)")
    ap.add_argument("--max-load-wait", type=float, default=600.0, help="longest wait for --max-load")
    ap.add_argument("--nice", type=int, default=19, help="niceness of every process started")
    ap.add_argument("--out-dir", default=None,
                    help="where the JSON files go (default bench/sitting/results/<date-time>)")
    args = ap.parse_args()
    args.order = [s.strip() for s in args.order.split(",") if s.strip()]
    if args.skip_honcho:
        args.order = [s for s in args.order if s != "honcho"]
    if not args.order or any(s not in ("honcho", "ours") for s in args.order):
        ap.error("--order takes honcho and ours")
    if "honcho" in args.order and not args.honcho_start.strip():
        ap.error("running Honcho needs --honcho-start (or use --skip-honcho)")
    if not Path(args.ours_bin).exists():
        ap.error(f"--ours-bin {args.ours_bin} does not exist")
    if args.wrk > 0 and not shutil.which("wrk"):
        ap.error("--wrk needs wrk on PATH (Debian: apt-get install wrk)")
    args.out_dir = Path(args.out_dir or HERE / "results" / time.strftime("%Y-%m-%d-%H%M"))
    return args


def pairs(values: list[str]) -> dict:
    out = {}
    for item in values:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def wrk_replay(args, base_url: str, replay: dict, nice: int) -> dict:
    """Each read of each API sent again and again by wrk; its SITTING_WRK line, parsed."""
    figures = {}
    script = str(HERE / "wrk_read.lua")
    for api, reads in replay.items():
        figures[api] = {}
        for read, request in reads.items():
            env = dict(os.environ, SITTING_METHOD=request["method"], SITTING_PATH=request["path"],
                       SITTING_BODY=request["body"] or "")
            result = None
            for seconds in (args.wrk_warmup, args.wrk):
                if seconds <= 0:
                    continue
                done = subprocess.run(["nice", "-n", str(nice), "wrk", "-t1", "-c1", f"-d{seconds}s",
                                       "-s", script, base_url], env=env, capture_output=True, text=True)
                line = [x for x in done.stdout.splitlines() if x.startswith("SITTING_WRK ")]
                if done.returncode != 0 or not line:
                    raise RuntimeError(f"wrk {api} {read}: {done.stdout[-400:]} {done.stderr[-400:]}")
                result = json.loads(line[-1].split(" ", 1)[1])
            result["p50_ms"] = round(result["p50_us"] / 1000, 3)
            result["p95_ms"] = round(result["p95_us"] / 1000, 3)
            if result["non_2xx"] or result["socket_errors"]:
                log(f"wrk {api} {read}: {result['non_2xx']} answers not 2xx, {result['socket_errors']} socket errors")
            figures[api][read] = result
            log(f"wrk {api:7} {read:8} p50 {result['p50_ms']} ms p95 {result['p95_ms']} ms")
    return figures


def stop_honcho(args, name: str, env: dict) -> None:
    """Runs --honcho-stop, its output in the round's log; a failure is logged, not raised, so
    the database is still dropped and the next round's check of the port says whether it matters."""
    log(f"stopping {name} with --honcho-stop")
    with open(args.out_dir / f"{name}.log", "ab") as out:
        try:
            done = subprocess.run(["nice", "-n", str(args.nice), "sh", "-c", args.honcho_stop], env=env,
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=120)
            if done.returncode != 0:
                log(f"--honcho-stop exited {done.returncode}; see {args.out_dir / (name + '.log')}")
        except subprocess.TimeoutExpired:
            log("--honcho-stop did not finish within 120 s")


def run_one(args, procs: Processes, server: str, round_no: int) -> dict:
    if args.max_load > 0:
        start = time.time()
        while load_1min() >= args.max_load and time.time() - start < args.max_load_wait:
            time.sleep(5)
    if server == "honcho":
        # A Honcho still answering (one not stopped) would be measured on the wrong database.
        quiet_by = time.time() + 30
        while answers(f"http://127.0.0.1:{args.honcho_port}/health"):
            if time.time() > quiet_by:
                raise RuntimeError(f"something already answers on port {args.honcho_port} before "
                                   "--honcho-start: stop it (does --honcho-stop stop Honcho?)")
            time.sleep(1)
    load_before = load_1min()
    db = f"{args.db_prefix}{server}_r{round_no}"
    admin = f"{args.pg.rstrip('/')}/postgres"
    dsn = f"{args.pg.rstrip('/')}/{db}"
    psql(admin, f'DROP DATABASE IF EXISTS "{db}"')
    psql(admin, f'CREATE DATABASE "{db}"')
    psql(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    stub = f"http://127.0.0.1:{args.stub_port}/v1"
    name = f"{server}-r{round_no}"

    if server == "honcho":
        port = args.honcho_port
        env = dict(os.environ, SITTING_DB=db,
                   SITTING_DB_URL=dsn + (f"?{args.honcho_db_params}" if args.honcho_db_params else ""),
                   SITTING_HONCHO_PORT=str(port), SITTING_STUB_URL=stub, SITTING_DIMS=str(args.dims),
                   **pairs(args.honcho_env))
        procs.start(name, ["sh", "-c", args.honcho_start], env=env)
        reads = "rest"
    else:
        port = args.ours_port
        url = dsn + (f"?{args.ours_db_params}" if args.ours_db_params else "")
        env = dict(os.environ, DATABASE_URL=url, HONCHO_LISTEN=f"127.0.0.1:{port}",
                   HONCHO_EMBEDDER="openai", HONCHO_OPENAI_BASE_URL=stub,
                   HONCHO_OPENAI_MODEL="text-embedding-3-small", HONCHO_OPENAI_DIMS=str(args.dims),
                   **pairs(args.ours_env))
        procs.start(name, [str(Path(args.ours_bin).resolve()), "serve"], env=env)
        reads = args.ours_reads
    base = f"http://127.0.0.1:{port}"
    try:
        if server == "honcho":
            procs.wait_ready(name, base + "/health", args.honcho_wait, may_exit=True)
        else:
            procs.wait_ready(name, base + "/health", 120)
        out = args.out_dir / f"r{round_no}-{server}.json"
        log(f"round {round_no}: {server} on {db}, {args.messages} messages")
        client = subprocess.run(
            ["nice", "-n", str(args.nice), sys.executable, str(HERE / "sitting.py"), "--target", server,
             "--url", base, "--messages", str(args.messages), "--calls", str(args.calls),
             "--warmup", str(args.warmup), "--seed", str(args.seed), "--reads", reads,
             "--db", dsn, "--label", name, "--out", str(out), "--quiet"])
        if client.returncode != 0:
            raise RuntimeError(f"sitting.py failed against {server} (exit {client.returncode})")
        result = json.loads(out.read_text())
        if args.wrk > 0:
            result["wrk"] = wrk_replay(args, base, result["replay"], args.nice)
        result["conditions"] = {"database": db, "load_1min_before": load_before,
                                "db_params": args.honcho_db_params if server == "honcho" else args.ours_db_params,
                                "stub": stub, "dims": args.dims, "nice": args.nice,
                                "server": f"Honcho v3 (--honcho-start {args.honcho_start!r})"
                                if server == "honcho" else f"ours: {args.ours_bin}"}
        out.write_text(json.dumps(result, indent=2) + "\n")
        return result
    finally:
        if server == "honcho" and args.honcho_stop.strip():
            stop_honcho(args, name, env)
        procs.stop(name)
        if not args.keep_dbs:
            psql(admin, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def ratio(honcho: float | None, ours: float | None) -> float | None:
    if not honcho or not ours:
        return None
    return round(honcho / ours, 2)


def summarize(runs: dict) -> dict:
    """Per round: Honcho's time over ours for every figure both have."""
    rounds = []
    for round_no in sorted({r for r, _ in runs}):
        h, o = runs.get((round_no, "honcho")), runs.get((round_no, "ours"))
        row = {"round": round_no}
        for server, run in (("honcho", h), ("ours", o)):
            if run:
                ing = run["ingest"]
                row[f"{server}_msgs_per_s"] = ing.get("msgs_per_s_with_embedding", ing["msgs_per_s"])
                row[f"{server}_growth"] = ing["growth_last10_over_first10"]
        if h and o:
            row["ingest"] = ratio(o["ingest"]["msgs_per_s"],
                                  h["ingest"].get("msgs_per_s_with_embedding", h["ingest"]["msgs_per_s"]))
            for read in READS:
                hr = h["reads"]["rest"][read]
                for api in o["reads"]:
                    orr = o["reads"][api][read]
                    row[f"{read} {api}"] = {
                        "honcho_p50_ms": hr["p50_ms"], "ours_p50_ms": orr["p50_ms"],
                        "p50": ratio(hr["p50_ms"], orr["p50_ms"]),
                        "honcho_p95_ms": hr["p95_ms"], "ours_p95_ms": orr["p95_ms"],
                        "p95": ratio(hr["p95_ms"], orr["p95_ms"])}
                    if "wrk" in h and "wrk" in o:
                        hw, ow = h["wrk"]["rest"][read], o["wrk"][api][read]
                        row[f"{read} {api} wrk"] = {
                            "honcho_p50_ms": hw["p50_ms"], "ours_p50_ms": ow["p50_ms"],
                            "p50": ratio(hw["p50_ms"], ow["p50_ms"]),
                            "honcho_p95_ms": hw["p95_ms"], "ours_p95_ms": ow["p95_ms"],
                            "p95": ratio(hw["p95_ms"], ow["p95_ms"])}
        rounds.append(row)
    return {"rounds": rounds}


def table(summary: dict, runs: dict) -> str:
    lines = []
    have_pairs = any("ingest" in r for r in summary["rounds"])
    if have_pairs:
        lines += ["Honcho's time over ours (> 1: ours is faster), p50 (p95); Honcho's REST against "
                  "ours through the API named; wrk rows at the server.", "",
                  "| round | figure | Honcho | ours | ratio p50 | ratio p95 |", "|---|---|---|---|---|---|"]
        for row in summary["rounds"]:
            if "ingest" not in row:
                continue
            lines.append(f"| {row['round']} | ingest msg/s (Honcho with its background embedding) | "
                         f"{row['honcho_msgs_per_s']} | {row['ours_msgs_per_s']} | **{row['ingest']}×** | |")
            lines.append(f"| {row['round']} | batch growth, last ten batches over the first ten (under 20 batches: halves) | {row['honcho_growth']} | "
                         f"{row['ours_growth']} | | |")
            for key, v in row.items():
                if isinstance(v, dict):
                    lines.append(f"| {row['round']} | {key} | {v['honcho_p50_ms']} / {v['honcho_p95_ms']} ms | "
                                 f"{v['ours_p50_ms']} / {v['ours_p95_ms']} ms | **{v['p50']}×** | {v['p95']}× |")
    else:
        lines += ["No round ran both servers, so no ratios: each run's p50 / p95 in ms.", "",
                  "| round | server | ingest msg/s | growth | " + " | ".join(f"{r} {a}" for a in ("rest", "graphql") for r in READS) + " |",
                  "|---|---|---|---|" + "---|" * 8]
        for (round_no, server), run in sorted(runs.items()):
            cells = []
            for api in ("rest", "graphql"):
                for read in READS:
                    r = run["reads"].get(api, {}).get(read)
                    cells.append(f"{r['p50_ms']} / {r['p95_ms']}" if r else "")
            ing = run["ingest"]
            rate = ing.get("msgs_per_s_with_embedding", ing["msgs_per_s"])
            lines.append(f"| {round_no} | {server} | {rate} | {ing['growth_last10_over_first10']} | " + " | ".join(cells) + " |")
            if "wrk" in run:
                wcells = []
                for api in ("rest", "graphql"):
                    for read in READS:
                        w = run["wrk"].get(api, {}).get(read)
                        wcells.append(f"{w['p50_ms']} / {w['p95_ms']}" if w else "")
                lines.append(f"| {round_no} | {server}, wrk | | | " + " | ".join(wcells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    procs = Processes(args.nice, args.out_dir)
    runs: dict[tuple[int, str], dict] = {}
    failed = None

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        stub_health = f"http://127.0.0.1:{args.stub_port}/health"
        if args.stub_running:
            if not answers(stub_health):
                raise RuntimeError(f"no stub answers on {stub_health}")
        else:
            if answers(stub_health):
                raise RuntimeError(f"something already answers on port {args.stub_port}: stop it, "
                                   "or pass --stub-running to use it")
            procs.start("stub", [sys.executable, str(HERE / "embed_stub.py"), "--port", str(args.stub_port),
                                 "--dims", str(args.dims)], env=dict(os.environ))
            procs.wait_ready("stub", stub_health, 30)
        first = True
        for round_no in range(1, args.rounds + 1):
            for server in args.order:
                if not first and args.pause > 0:
                    time.sleep(args.pause)
                first = False
                runs[(round_no, server)] = run_one(args, procs, server, round_no)
    except KeyboardInterrupt:
        log("interrupted: stopping what was started")
        failed = "interrupted"
    except RuntimeError as e:
        log(f"failed: {e}")
        failed = str(e)
    finally:
        procs.stop_all()
    summary = summarize(runs)
    summary["settings"] = {"messages": args.messages, "calls": args.calls, "warmup": args.warmup,
                           "seed": args.seed, "order": args.order, "rounds": args.rounds,
                           "wrk_seconds": args.wrk, "dims": args.dims, "ours_bin": args.ours_bin,
                           "completed": failed is None}
    (args.out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = table(summary, runs)
    (args.out_dir / "summary.md").write_text(text)
    print(text)
    log(f"wrote {args.out_dir}")
    if failed:
        sys.exit(f"alternate: stopped early: {failed}")


if __name__ == "__main__":
    main()
