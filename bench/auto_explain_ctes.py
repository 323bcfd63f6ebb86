#!/usr/bin/env python3
"""Where a search's time goes, per CTE, from PostgreSQL's auto_explain log.

Turn auto_explain on for the corpus's database, ask the planted questions, turn it off:

    psql -c "ALTER DATABASE bench_old SET session_preload_libraries = 'auto_explain'" \
         -c "ALTER DATABASE bench_old SET auto_explain.log_min_duration = '60ms'" \
         -c "ALTER DATABASE bench_old SET auto_explain.log_analyze = on"
    honcho-bench-scale --database bench_old --search-only
    psql -c "ALTER DATABASE bench_old RESET ALL"
    bench/auto_explain_ctes.py < the new lines of the server's log

--search-only asks each question twice (the first pass warms the caches), so only the second
half of the search plans is read. A CTE's time includes the CTEs it reads (vec_hits holds
fts_hits, vec_near and near_blocks); auto_explain's timing adds its own cost to every node.
"""
import re
import sys

plans, current = [], None
for line in sys.stdin:
    if "duration:" in line and "plan:" in line:
        current = {"ms": float(re.search(r"duration: ([\d.]+)", line).group(1)), "lines": []}
        plans.append(current)
    elif current is not None:
        current["lines"].append(line.rstrip("\n"))

searches = [p for p in plans if any(l.strip() == "CTE near_blocks" for l in p["lines"])]
searches = searches[len(searches) // 2:]
times = {"(statement)": [p["ms"] for p in searches]}
for p in searches:
    lines = p["lines"]
    for i, line in enumerate(lines[:-1]):
        name = re.fullmatch(r"CTE (\w+)", line.strip())
        took = re.search(r"actual time=[\d.]+\.\.([\d.]+) rows=\d+ loops=(\d+)", lines[i + 1])
        if name and took:
            times.setdefault(name.group(1), []).append(float(took.group(1)) * int(took.group(2)))

print(f"{len(searches)} searches; ms per CTE, inclusive")
print(f"{'CTE':20s} {'p25':>8s} {'p50':>8s} {'p75':>8s} {'max':>8s}")
for name, values in sorted(times.items(), key=lambda kv: -sorted(kv[1])[len(kv[1]) // 2]):
    v = sorted(values)
    q = lambda f: v[min(len(v) - 1, int(f * len(v)))]
    print(f"{name:20s} {q(0.25):8.1f} {q(0.5):8.1f} {q(0.75):8.1f} {v[-1]:8.1f}")
