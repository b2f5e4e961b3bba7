#!/usr/bin/env bash
# Instructions per event of the collector, counted by valgrind (cachegrind): a measure that the
# host's speed does not move, for steps smaller than `load.sh`'s noise (about 4% between runs).
#
#   benches/insn.sh [--requests 3000] [BINARY [BINARY2]]
#
# Each binary (default: the release build here) is started fresh under cachegrind, takes
# --requests / 3 and then, in a second run, --requests 10-event batches from examples/loadgen.rs
# (8 connections, 400 requests/s: valgrind runs the threads one at a time), and is stopped with
# SIGTERM (its lake flushed, so the Parquet encoding is counted). Instructions per event are the
# difference between the two runs over the difference in events, so start-up and shutdown cancel
# out. Spin-waits (sled's lazy statics, which spin while valgrind runs another thread) are left
# out. With two binaries it prints the ratio and the functions whose counts differ most.
#
# Caveats: this counts instructions, not time (a cache miss or an fsync costs nothing here, a
# `rep stosb` counts once per byte); valgrind hides some CPU features (SHA-NI, AVX-512), so code
# that picks its path at run time (sha2, memcpy) takes a longer one here; the group commits are
# smaller than at saturation; two runs of one binary agree within about 1%. Needs valgrind
# (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=3000
bins=()
while [ $# -gt 0 ]; do
  case $1 in
    --requests) requests=$2; shift 2 ;;
    -*) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
command -v valgrind >/dev/null || { echo "insn.sh needs valgrind (apt-get install valgrind)" >&2; exit 2; }
echo "== building (release)"
targets=(--example loadgen); [ ${#bins[@]} -gt 0 ] || targets+=(--bin tributary)
cargo build --release --quiet "${targets[@]}"
release=${CARGO_TARGET_DIR:-target}/release
[ ${#bins[@]} -gt 0 ] || bins=("$release/tributary")
export TRIBUTARY_ADMIN_TOKEN=insn-bench-admin-token-0123456789abcdef
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# free_port, wait_up, create_app.
source benches/server.sh

# run BINARY REQUESTS OUT: one fresh server under cachegrind; its counts in OUT.
run() {
  local data port pid key
  data=$(mktemp -d "$work/data.XXXX"); port=$(free_port)
  RUST_LOG=warn valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$3" \
    "$1" serve --bind "127.0.0.1:$port" --data-dir "$data" >"$work/server.log" 2>&1 &
  pid=$!
  wait_up "http://127.0.0.1:$port/healthz" 120 || { cat "$work/server.log" >&2; kill "$pid"; return 1; }
  key=$(create_app "$port" insn)
  "$release/examples/loadgen" --addr "127.0.0.1:$port" --key "$key" --conns 8 --rate 400 \
    --secs "$(awk -v r="$2" 'BEGIN {print r / 400}')" | tee -a "$work/loadgen.txt"
  kill -TERM "$pid"; wait "$pid" || true
}

small=$((requests / 3))
outs=()
for i in "${!bins[@]}"; do
  echo "== ${bins[$i]}"
  run "${bins[$i]}" "$small" "$work/$i.small"
  run "${bins[$i]}" "$requests" "$work/$i.large"
  outs+=("$work/$i.small" "$work/$i.large")
done
python3 - "$small" "$requests" "${bins[@]}" -- "${outs[@]}" <<'PY'
import collections, re, subprocess, sys
args = sys.argv[1:]
small, large = int(args[0]) * 10, int(args[1]) * 10
cut = args.index("--")
bins, outs = args[2:cut], args[cut + 1:]
spin = re.compile(r"sled::lazy::Lazy")

def counts(path):
    text = subprocess.run(["cg_annotate", "--threshold=0", path], capture_output=True,
                          text=True, check=True).stdout
    fns = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\S*?:(.+)$", line)
        if m and not spin.search(m.group(2)):
            fns[m.group(2)] += int(m.group(1).replace(",", ""))
    return fns

per_event, large_counts = [], []
for i, b in enumerate(bins):
    s, l = counts(outs[2 * i]), counts(outs[2 * i + 1])
    per_event.append((sum(l.values()) - sum(s.values())) / (large - small))
    large_counts.append(l)
    print(f"{b}: {per_event[-1]:,.0f} instructions per event")
if len(bins) == 2:
    print(f"ratio (second / first): {per_event[1] / per_event[0]:.4f}")
    a, b = large_counts
    diff = {k: (b[k] - a[k]) / large for k in set(a) | set(b)}
    print(f"functions that differ most, instructions per event over {large:,} events:")
    for k, v in sorted(diff.items(), key=lambda x: -abs(x[1]))[:15]:
        print(f"{v:>+10.1f}  {k[:100]}")
PY
