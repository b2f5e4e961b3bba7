#!/usr/bin/env bash
# Runs schemathesis over every operation of /openapi.json against a spawned server.
#
#   tests/support/schemathesis.sh BINARY [extra schemathesis options]
#
# Starts BINARY (tributary) on a free port with a temporary data dir, creates an enterprise app
# and a key with every permission, then runs schemathesis with the API key, the integration key
# and the admin token on every request. Exits with schemathesis's status.
set -euo pipefail
bin=${1:?usage: schemathesis.sh BINARY [options]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
data=$(mktemp -d)
port=$("$root/.venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
export TRIBUTARY_ADMIN_TOKEN="adm_schemathesis_$(date +%s%N)"
RUST_LOG=${RUST_LOG:-warn} "$bin" serve --bind "127.0.0.1:$port" --data-dir "$data" >"$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 200); do
  curl -sf "$base/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
admin=(-H "Authorization: Bearer $TRIBUTARY_ADMIN_TOKEN" -H 'Content-Type: application/json')
app=$(curl -sf -X POST "$base/admin/v1/apps" "${admin[@]}" -d '{"name": "schemathesis", "plan": "enterprise"}')
app_id=$(printf '%s' "$app" | "$root/.venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["id"])')
app_key=$(printf '%s' "$app" | "$root/.venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["integrationKey"])')
perms='["contacts:read","contacts:write","contacts:delete","profiles:read"]'
api_key=$(curl -sf -X POST "$base/admin/v1/apps/$app_id/keys" "${admin[@]}" \
  -d "{\"name\": \"schemathesis\", \"permissions\": $perms}" |
  "$root/.venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["key"])')
status=0
"$root/.venv/bin/schemathesis" run "$base/openapi.json" \
  -H "X-API-Key: $api_key" -H "X-App-Key: $app_key" \
  -H "Authorization: Bearer $TRIBUTARY_ADMIN_TOKEN" \
  --checks all --workers 2 "$@" || status=$?
if grep -q 'panicked' "$data/server.log"; then
  echo "the server panicked:"; grep -A5 panicked "$data/server.log"; status=1
fi
exit $status
