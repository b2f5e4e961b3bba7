#!/usr/bin/env bash
# A fleet on one machine: moto as the S3 bucket, one control node and two edge collectors, an
# app and a fleet token made on the control node, and one event sent through each edge.
#
#   cargo build --release && examples/fleet.sh
#
# What it starts (each node with its own data dir and node id, all on one bucket):
#   moto (S3)      http://127.0.0.1:$((PORT))        bucket tributary-lake
#   control node   http://127.0.0.1:$((PORT + 1))    tributary serve  (the API, the dashboard)
#   edge 1         http://127.0.0.1:$((PORT + 2))    tributary serve --role edge --node-id edge1
#   edge 2         http://127.0.0.1:$((PORT + 3))    tributary serve --role edge --node-id edge2
# then prints the edges as the control node sees them (`tributary fleet nodes`) and stops
# everything. KEEP=1 keeps the fleet running until Ctrl-C (the dashboard's Fleet page is on
# the control node; sign in with the admin token printed).
#
# Settings, from the environment:
#   TRIBUTARY  the binary          (default: target/release/tributary)
#   MOTO       moto's S3 server    (default: .venv/bin/moto_server, else moto_server on PATH;
#                                   `pip install 'moto[server]'`)
#   PORT       the first of 4 ports (default: 8180)
#   KEEP       1: keep running until Ctrl-C
# Needs curl and python3 (which moto needs anyway).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${TRIBUTARY:-target/release/tributary}
port=${PORT:-8180}
if [ -z "${MOTO:-}" ]; then
  if [ -x .venv/bin/moto_server ]; then MOTO=.venv/bin/moto_server; else MOTO=moto_server; fi
fi
[ -x "$bin" ] || { echo "fleet.sh: $bin is missing: run cargo build --release first" >&2; exit 1; }
command -v "$MOTO" >/dev/null || { echo "fleet.sh: $MOTO is missing: pip install 'moto[server]', or set MOTO" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tributary-fleet.XXXXXX")
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "logs and data dirs: $work"
}
trap stop EXIT

# Polls `curl ARGS` (at most 30 s) until it succeeds.
until_ok() {
  for _ in $(seq 300); do
    if curl -fsS -o /dev/null "$@" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "fleet.sh: no answer from: curl $*" >&2
  exit 1
}

json() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

s3="http://127.0.0.1:$port"
control="http://127.0.0.1:$((port + 1))"
admin_token="adm_$(python3 -c 'import secrets; print(secrets.token_hex(24))')"

echo "==> moto (S3) on $s3"
"$MOTO" -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
pids+=($!)
until_ok -X PUT "$s3/tributary-lake"   # moto makes the bucket on an unsigned PUT

# Every node: the lake in the bucket.
export TRIBUTARY__LAKE__KIND=s3 TRIBUTARY__LAKE__S3_BUCKET=tributary-lake \
  TRIBUTARY__LAKE__S3_ENDPOINT="$s3" TRIBUTARY__LAKE__S3_ALLOW_HTTP=true \
  TRIBUTARY__LAKE__S3_ACCESS_KEY_ID=test TRIBUTARY__LAKE__S3_SECRET_ACCESS_KEY=test

echo "==> control node on $control"
TRIBUTARY_ADMIN_TOKEN="$admin_token" "$bin" serve --bind "127.0.0.1:$((port + 1))" \
  --data-dir "$work/control" --node-id control >"$work/control.log" 2>&1 &
pids+=($!)
until_ok "$control/healthz"

# The admin CLI talks to the control node.
export TRIBUTARY_URL="$control" TRIBUTARY_ADMIN_TOKEN="$admin_token"
fleet_token=$("$bin" fleet token create --name "this machine's edges" | json '["token"]')
app=$("$bin" apps create --name "Fleet demo" --plan pro)
app_id=$(echo "$app" | json '["id"]')
app_key=$(echo "$app" | json '["integrationKey"]')
echo "    app $app_id, integration key $app_key"

edges=()
for i in 1 2; do
  edge="http://127.0.0.1:$((port + 1 + i))"
  echo "==> edge$i on $edge"
  TRIBUTARY__FLEET__TOKEN="$fleet_token" "$bin" serve --role edge --control-url "$control" \
    --node-id "edge$i" --bind "127.0.0.1:$((port + 1 + i))" --data-dir "$work/edge$i" \
    >"$work/edge$i.log" 2>&1 &
  pids+=($!)
  edges+=("$edge")
done

# One event through each edge; an edge knows the app from its first registry sync (a second).
for i in 1 2; do
  edge=${edges[$((i - 1))]}
  until_ok "$edge/healthz"
  event="{\"batch\": [{\"type\": \"track\", \"event\": \"Hello from edge$i\", \"anonymousId\": \"6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5$i\", \"messageId\": \"msg_fleet_demo_edge$i\"}]}"
  until_ok -X POST "$edge/api/w/analytics/collect" -H "X-App-Key: $app_key" \
    -H 'Content-Type: application/json' -d "$event"
  echo "    edge$i took an event"
done

echo "==> the edges, as the control node sees them (tributary fleet nodes)"
# Once both have reported their event and hold the current registry (a heartbeat or two).
synced='import json, sys; print(sum(1 for n in json.load(sys.stdin) if n["acceptedTotal"] >= 1 and n["registryCurrent"]))'
for _ in $(seq 100); do
  nodes=$("$bin" fleet nodes)
  if [ "$(echo "$nodes" | python3 -c "$synced")" -ge 2 ]; then break; fi
  sleep 0.1
done
echo "$nodes"

if [ "${KEEP:-}" = 1 ]; then
  echo "==> running: control node $control (admin token $admin_token), edges ${edges[*]}; Ctrl-C stops"
  wait
fi
