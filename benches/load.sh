#!/usr/bin/env bash
# Load test of the collector against the HTTP ceiling measured in the same run.
#
#   benches/load.sh [seconds per run, default 10] [connections, default 64]
#
# Starts a release build of tributary on 127.0.0.1 with a fresh data dir, then runs wrk:
#   1. baseline: GET /healthz (the same server, workers and middleware: the ceiling of the stack)
#   2. collect:  POST /api/w/analytics/collect, 10-event batches, unique messageIds
# and prints requests/s, events/s and the ratio collect/baseline. Everything stays on 127.0.0.1.
# The load generator shares the machine's cores with the server: compare ratios, not absolutes.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-64}
command -v wrk >/dev/null || { [ "$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null || sudo apt-get install -y -qq wrk >/dev/null; }
cargo build --release --quiet
data=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
export TRIBUTARY_ADMIN_TOKEN=load-test-token
RUST_LOG=warn target/release/tributary serve --bind 127.0.0.1:$port --data-dir "$data" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data" "$lua"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
key=$(curl -sf -X POST "http://127.0.0.1:$port/admin/v1/apps" -H "Authorization: Bearer $TRIBUTARY_ADMIN_TOKEN" \
  -H 'Content-Type: application/json' -d '{"name": "load", "plan": "enterprise"}' | sed -E 's/.*"integrationKey":"([^"]+)".*/\1/')
lua=$(mktemp --suffix .lua)
cat > "$lua" <<LUA
local n = 0
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads .. "_" .. os.time())
end
-- 64 visitors, so events spread over the shards as real traffic does.
local anons = {}
for i = 1, 64 do anons[i] = string.format("%08x-0000-4000-8000-%012x", i, i * 7919) end
request = function()
  n = n + 1
  local ev = {}
  for i = 1, 10 do
    ev[i] = string.format('{"type":"track","event":"Load Test","anonymousId":"%s","messageId":"msg_%s_%d_%d","sessionId":"ses_1","timestamp":"2026-11-22T10:00:00Z","properties":{"i":%d,"plan":"pro"},"context":{"page":{"url":"https://shop.example/p","path":"/p","title":"P","referrer":""},"locale":"en-US","timezone":"Europe/Paris","screen":{"width":1440,"height":900}}}', anons[(n % 64) + 1], tid, n, i, i)
  end
  local body = '{"sentAt":"2026-11-22T10:00:01Z","batch":[' .. table.concat(ev, ",") .. ']}'
  return wrk.format("POST", "/api/w/analytics/collect", {["Content-Type"] = "application/json", ["X-App-Key"] = "$key"}, body)
end
LUA
rps() { awk '/Requests\/sec/ {print $2}'; }
echo "== baseline: GET /healthz, ${secs}s, $conns connections"
wrk -t2 -c"$conns" -d"${secs}s" "http://127.0.0.1:$port/healthz" > "$data/base.txt"
cat "$data/base.txt"
base=$(rps < "$data/base.txt")
echo "== collect: POST 10-event batches, ${secs}s, $conns connections"
wrk -t2 -c"$conns" -d"${secs}s" -s "$lua" "http://127.0.0.1:$port/api/w/analytics/collect" > "$data/collect.txt"
cat "$data/collect.txt"
coll=$(rps < "$data/collect.txt")
dups=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^tributary_collector_duplicates_total/ {s += $2} END {print s}')
accepted=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^tributary_collector_accepted_total/ {s += $2} END {print s}')
fsyncs=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^tributary_collector_wal_fsyncs_total/ {s += $2} END {print s}')
non200=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^tributary_collector_rejected_total/ {s += $2} END {print s}')
awk -v b="$base" -v c="$coll" -v a="$accepted" -v d="$dups" -v f="$fsyncs" -v r="$non200" -v s="$secs" 'BEGIN {
  printf "\nbaseline  %10.0f req/s\n", b
  printf "collect   %10.0f req/s  %10.0f events/s\n", c, c * 10
  printf "ratio     %10.3f (collect req/s / baseline req/s)\n", c / b
  printf "accepted  %10d events, %d duplicates, %d group commits (%.1f events per fsync), %d refused\n", a, d, f, (f > 0 ? a / f : 0), r
}'
