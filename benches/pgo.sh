#!/usr/bin/env bash
# A profile-guided (PGO) release build of Tributary: the binary to deploy at the edge.
#
#   benches/pgo.sh [--secs 15]
#
# 1. Builds an instrumented binary (target/pgo-gen; RUSTFLAGS=-Cprofile-generate).
# 2. Trains it: a fresh data dir, then load.sh's load (examples/loadgen.rs: --secs of 10-event
#    batches at saturation, then 1-event and 50-event batches), a Segment /v1/batch and the
#    contacts API, then SIGTERM, which writes the profile.
# 3. Merges the profile with llvm-profdata of rustc's own LLVM major version (rustup's
#    llvm-tools, else /usr/lib/llvm-N from Debian's llvm-N, installed with apt-get if missing).
# 4. Builds the release binary with the profile (target/pgo; RUSTFLAGS=-Cprofile-use).
#
# Prints the binary's path; `benches/load.sh --server target/pgo/release/tributary` measures it
# against the ceiling. Two release builds: about 30 minutes cold on 2 cores. The profile fits
# the code it was made from: build again after a change (stale parts are ignored, not wrong).
# Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=15
while [ $# -gt 0 ]; do
  case $1 in
    --secs) secs=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
root=$PWD
profiles=$root/target/pgo-data

# llvm-profdata of rustc's LLVM: a profile merged by another major version may not load.
major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
host=$(rustc -vV | sed -n 's/^host: //p')
find_profdata() {
  for c in "$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata" \
    "/usr/lib/llvm-$major/bin/llvm-profdata"; do
    if [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}
if ! profdata=$(find_profdata); then
  echo "== installing llvm-$major (llvm-profdata for rustc's LLVM $major)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  install_llvm() { $sudo apt-get install -y -q "llvm-$major" >/dev/null; }
  { install_llvm 2>/dev/null || { $sudo apt-get update -q >/dev/null && install_llvm; }; } || {
    echo "no llvm-profdata for LLVM $major: run 'rustup component add llvm-tools'" \
      "or install Debian's llvm-$major" >&2
    exit 1
  }
  profdata=$(find_profdata)
fi
echo "== llvm-profdata: $profdata"

echo "== 1/4 building the instrumented binary (target/pgo-gen; about 20 min cold on 2 cores)"
rm -rf "$profiles"; mkdir -p "$profiles"
RUSTFLAGS="-Cprofile-generate=$profiles" CARGO_TARGET_DIR=target/pgo-gen \
  cargo build --release --bin tributary
echo "== building the load generator (target/release)"
cargo build --release --quiet --example loadgen

echo "== 2/4 training: ${secs}s of 10-event batches, then 1- and 50-event ones, Segment, contacts"
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
export TRIBUTARY_ADMIN_TOKEN=pgo-training-admin-token-0123456789
port=$((20000 + RANDOM % 20000))
base=http://127.0.0.1:$port
LLVM_PROFILE_FILE="$profiles/tributary-%p-%m.profraw" RUST_LOG=warn \
  target/pgo-gen/release/tributary serve --bind "127.0.0.1:$port" --data-dir "$work/data" \
  >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 600); do curl -sf -o /dev/null "$base/healthz" && break; sleep 0.05; done
curl -sf -o /dev/null "$base/healthz" || { cat "$work/server.log" >&2; exit 1; }
admin() { # method path [body]
  curl -sf -X "$1" "$base/admin/v1$2" -H "Authorization: Bearer $TRIBUTARY_ADMIN_TOKEN" \
    -H 'Content-Type: application/json' ${3:+-d "$3"}
}
app=$(admin POST /apps '{"name": "pgo", "plan": "enterprise"}')
data() { python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][sys.argv[1]])' "$1"; }
app_id=$(data id <<<"$app")
ik=$(data integrationKey <<<"$app")
key=$(admin POST "/apps/$app_id/keys" \
  '{"name": "pgo", "permissions": ["contacts:read", "contacts:write"]}' | data key)
load() { target/release/examples/loadgen --addr "127.0.0.1:$port" --key "$ik" --conns 32 "$@"; }
load --secs "$secs"
load --secs 3 --events 1
load --secs 5 --events 50
for i in $(seq 200); do
  curl -sf -o /dev/null -X POST "$base/v1/batch" -u "$ik:" -H 'Content-Type: application/json' \
    -d '{"batch": [{"type": "track", "event": "Signed Up", "userId": "u'"$i"'",
      "properties": {"plan": "pro"}}, {"type": "identify", "userId": "u'"$i"'",
      "traits": {"email": "u'"$i"'@example.com"}}]}'
  curl -sf -o /dev/null -X POST "$base/acq/v1/contacts" -H "X-API-Key: $key" \
    -H 'Content-Type: application/json' -d '{"email": "c'"$i"'@example.com", "status": "new"}'
  curl -sf -o /dev/null "$base/acq/v1/contacts?limit=20" -H "X-API-Key: $key"
done
kill -TERM "$pid"; wait "$pid" || true; pid=""
ls "$profiles"/*.profraw >/dev/null 2>&1 || { echo "the server wrote no profile" >&2; exit 1; }
echo "profile: $(du -ch "$profiles"/*.profraw | tail -1 | cut -f1) from the training"

echo "== 3/4 merging the profile"
"$profdata" merge -o "$profiles/merged.profdata" "$profiles"/*.profraw

echo "== 4/4 building with the profile (target/pgo; about 10 min on 2 cores)"
RUSTFLAGS="-Cprofile-use=$profiles/merged.profdata" CARGO_TARGET_DIR=target/pgo \
  cargo build --release --bin tributary
echo "built: target/pgo/release/tributary"
echo "measure it: benches/load.sh --server target/pgo/release/tributary"
