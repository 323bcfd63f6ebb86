-- One of the sitting's reads, sent again and again by wrk: the figure at the server, without
-- the Python client's own time in it.
--
--   SITTING_METHOD=POST SITTING_PATH=/v3/workspaces/w/sessions/s/search \
--   SITTING_BODY='{"query":"cracked kettle","limit":10}' \
--   wrk -t1 -c1 -d6s -s bench/sitting/wrk_read.lua http://127.0.0.1:18600
--
-- The request is built once from the environment (a run's JSON holds one per read and API under
-- "replay"; alternate.py --wrk passes them). At the end one line is printed,
--   SITTING_WRK {"requests": ..., "p50_us": ..., "p95_us": ..., ...}
-- latencies in microseconds; "non_2xx" counts answers that were not a success, which make the
-- figures worthless.

local method = os.getenv("SITTING_METHOD") or "GET"
local path = os.getenv("SITTING_PATH") or "/health"
local body = os.getenv("SITTING_BODY")
if body == "" then
  body = nil
end

local prepared

function init(args)
  local headers = {}
  if body then
    headers["Content-Type"] = "application/json"
  end
  prepared = wrk.format(method, path, headers, body)
end

function request()
  return prepared
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'SITTING_WRK {"requests": %d, "duration_s": %.3f, "p50_us": %d, "p95_us": %d, "p99_us": %d, ' ..
    '"mean_us": %.1f, "max_us": %d, "non_2xx": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.mean, latency.max, e.status,
    e.connect + e.read + e.write + e.timeout))
end
