#!/usr/bin/env bash
# The collector under load, against the HTTP ceiling of this machine measured in the same run.
#
#   benches/load.sh [--secs 10] [--conns 32] [--runs 3] [--events 10] [--pages] [--apps 1]
#                   [--server PATH]
#   benches/load.sh --soak [--minutes 10] [--rate 20000] [--apps 1] [--server PATH]
#
# Load mode: starts a bare actix-web server (examples/ceiling.rs: reads the body, answers 200) and
# Tributary in its default durable configuration (fresh data dir, local lake), then drives each in
# turn with the same load (examples/loadgen.rs: one thread, --conns keep-alive connections,
# batches of --events events, about 750 bytes each, with a fresh anonymousId and messageIds on
# every request), --runs times, and prints per run and as medians: events/s of each (served: in
# requests answered 200, so a batch refused with 503 counts for nothing, here and in the CPU per
# event), the requests refused, the ratio, server CPU µs per event of each (utime + stime from
# /proc/<pid>/stat; for Tributary also by kind of thread: HTTP workers, shard writers, encoders,
# other), p50/p99 latency. Then it runs the ceiling once more at Tributary's saturation rate
# (HTTP's CPU per event at that rate, where each wake-up finds fewer requests than at the
# ceiling's own), Tributary at half its saturation rate for p99, prints its peak RSS (VmHWM),
# stops it (SIGTERM: everything flushed) and checks that the lake holds exactly the acknowledged
# events.
# --events other than 10 splits the cost per request from the cost per event. --pages sends page
# views, each request's with a path of its own (a site's long tail of pages), instead of track
# events of one name: the rollups' top pages then keep a full table. --apps N spreads the
# requests over N apps in turn (an edge serving many sites: a file open per app and hour, a
# rollup bucket each). --server runs that Tributary binary instead of the one built here (e.g.
# benches/pgo.sh's profile-guided build).
#
# Soak mode (10-event batches): Tributary alone at a fixed rate for --minutes, RSS every 30 s;
# then 150 s quiet (RSS every 15 s: memory goes back about two minutes after the last batch);
# then kill -9, a restart timed until it answers, a retry of a batch sent at minute 1 (expects
# 10 duplicates), and a lake check (every acknowledged event once, that batch's events once).
#
# Everything stays on 127.0.0.1. The load generator shares the 2 cores with the server:
# compare ratios and CPU per event, not absolute rates.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=10 conns=32 runs=3 soak=0 minutes=10 rate=20000 batch=10 apps=1 server="" kind=()
while [ $# -gt 0 ]; do
  case $1 in
    --secs) secs=$2; shift 2 ;;
    --conns) conns=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --events) batch=$2; shift 2 ;;
    --pages) kind=(--pages); shift ;;
    --apps) apps=$2; shift 2 ;;
    --soak) soak=1; shift ;;
    --minutes) minutes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -n "$server" ] && [ ! -x "$server" ]; then
  echo "--server: $server is not an executable" >&2; exit 2
fi
echo "== building (release)"
# The load generator, the ceiling and the lake counter; Tributary too unless --server names one.
targets=(--examples); [ -n "$server" ] || targets+=(--bin tributary)
cargo build --release --quiet "${targets[@]}"
bin=${CARGO_TARGET_DIR:-target}/release
server=${server:-$bin/tributary}
echo "== tributary: $server"
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# free_port, wait_up, create_app.
source benches/server.sh
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# thread_ticks PID: the CPU ticks of the server's threads by kind: "http writers encoders other"
# (actix's workers, the shard writers, their Parquet encoders, everything else).
thread_ticks() {
  cat /proc/"$1"/task/*/stat 2>/dev/null | awk '{
    lp = index($0, "("); rp = index($0, ") ")
    name = substr($0, lp + 1, rp - lp - 1); split(substr($0, rp + 2), f, " ")
    kind = name ~ /^actix-rt/ ? 1 : name ~ /^shard-/ ? 2 : name ~ /^encoder-/ ? 3 : 4
    t[kind] += f[12] + f[13]
  } END {printf "%d %d %d %d", t[1], t[2], t[3], t[4]}'
}
field() { sed -E "s/.*(^| )$1=([^ ]+).*/\2/" <<<"$2"; }
# app_keys: the key (or, with --apps N, @FILE of N keys) of the apps the load goes to.
app_keys() {
  if [ "$apps" -le 1 ]; then create_app "$tport" load; return; fi
  for i in $(seq "$apps"); do create_app "$tport" "load-$i"; echo; done >"$work/keys.txt"
  echo "@$work/keys.txt"
}

# 16+ characters, or serve refuses it.
export TRIBUTARY_ADMIN_TOKEN=load-test-admin-token-0123456789abcdef
start_tributary() { # data dir; sets tpid, tport
  tport=$(free_port)
  RUST_LOG=warn "$server" serve --bind "127.0.0.1:$tport" --data-dir "$1" \
    >>"$work/tributary.log" 2>&1 &
  tpid=$!; pids+=("$tpid")
  wait_up "http://127.0.0.1:$tport/healthz"
}
# measure PID PORT KEY [loadgen args...]: one loadgen run, with the server's CPU per event, in
# all and by kind of thread (cpu_http, cpu_writers, cpu_encoders, cpu_other).
measure() {
  local pid=$1 port=$2 key=$3; shift 3
  local before after split_before split_after out events
  before=$(ticks "$pid"); split_before=$(thread_ticks "$pid")
  out=$("$bin/examples/loadgen" --addr "127.0.0.1:$port" --key "$key" --conns "$conns" \
    --events "$batch" "${kind[@]}" "$@")
  after=$(ticks "$pid"); split_after=$(thread_ticks "$pid")
  events=$(field events "$out")
  echo "$out $(awk -v t=$((after - before)) -v h="$hz" -v e="$events" \
    -v b="$split_before" -v a="$split_after" 'BEGIN {
      us = e ? 1e6 / h / e : 0; split(b, x, " "); split(a, y, " ")
      printf "cpu_us_per_event=%.2f cpu_http=%.2f cpu_writers=%.2f", t * us, (y[1] - x[1]) * us,
        (y[2] - x[2]) * us
      printf " cpu_encoders=%.2f cpu_other=%.2f", (y[3] - x[3]) * us, (y[4] - x[4]) * us
    }')"
}
median() {
  sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

if [ "$soak" = 0 ]; then
  cport=$(free_port)
  "$bin/examples/ceiling" "127.0.0.1:$cport" >/dev/null 2>&1 &
  cpid=$!; pids+=("$cpid")
  for _ in $(seq 300); do
    curl -s -o /dev/null -X POST -d x "http://127.0.0.1:$cport/api/w/analytics/collect" && break
    sleep 0.02
  done
  start_tributary "$work/data"
  key=$(app_keys)
  : >"$work/ceiling.txt"; : >"$work/tributary.txt"
  accepted=0
  for r in $(seq "$runs"); do
    c=$(measure "$cpid" "$cport" none --secs "$secs")
    t=$(measure "$tpid" "$tport" "$key" --secs "$secs")
    accepted=$((accepted + $(field accepted "$t")))
    echo "run $r ceiling:   $c"
    echo "run $r tributary: $t"
    echo "$c" >>"$work/ceiling.txt"; echo "$t" >>"$work/tributary.txt"
  done
  med() { # key file: the median of key=value over the file's lines
    awk -v k="$1" '{for (i = 1; i <= NF; i++) {split($i, kv, "="); if (kv[1] == k) print kv[2]}}' \
      "$2" | median
  }
  ce=$(med events_per_s "$work/ceiling.txt"); te=$(med events_per_s "$work/tributary.txt")
  half=$(awk -v e="$te" -v n="$batch" 'BEGIN {printf "%d", e / n / 2}')
  # HTTP costs more per request at a lower rate (fewer ready sockets per wake-up), so the
  # ceiling is also driven at Tributary's saturation rate: the HTTP part of the floor there.
  same=$(measure "$cpid" "$cport" none --secs "$secs" --rate "$((half * 2))")
  echo "ceiling at tributary's rate ($((half * 2)) req/s): $same"
  h=$(measure "$tpid" "$tport" "$key" --secs "$secs" --rate "$half")
  accepted=$((accepted + $(field accepted "$h")))
  echo "half rate ($half req/s): $h"
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$tpid/status")
  kill -TERM "$tpid"; wait "$tpid" 2>/dev/null || true
  lake=$("$bin/examples/lake_count" "$work/data/lake")
  echo
  echo "medians of $runs runs, ${secs}s each, $conns connections, $batch-event batches${kind:+ (page views)}, $apps app(s)"
  printf "%-10s %12s %14s %10s %10s\n" "" "events/s" "cpu µs/event" "p50 µs" "p99 µs"
  for s in ceiling tributary; do
    printf "%-10s %12.0f %14.2f %10.0f %10.0f\n" "$s" "$(med events_per_s "$work/$s.txt")" \
      "$(med cpu_us_per_event "$work/$s.txt")" "$(med p50_us "$work/$s.txt")" \
      "$(med p99_us "$work/$s.txt")"
  done
  awk -v c="$ce" -v t="$te" \
    'BEGIN {printf "ratio      %12.3f (tributary events/s / ceiling events/s)\n", t / c}'
  echo "tributary's refusals (503 + Retry-After: back-pressure): $(med errors "$work/tributary.txt")" \
    "requests of $(med requests "$work/tributary.txt") per run"
  echo "tributary's cpu µs/event by thread: http $(med cpu_http "$work/tributary.txt")," \
    "writers $(med cpu_writers "$work/tributary.txt")," \
    "encoders $(med cpu_encoders "$work/tributary.txt")," \
    "other $(med cpu_other "$work/tributary.txt")"
  echo "ceiling at tributary's rate: $(field cpu_us_per_event "$same") cpu µs/event" \
    "(HTTP's part of the floor there)"
  echo "p99 at half saturation ($half req/s): $(field p99_us "$h") µs"
  echo "tributary peak RSS: $((peak / 1024)) MB"
  echo "lake: $lake; acknowledged: $accepted"
  if [ "$(field rows "$lake")" = "$accepted" ] &&
    [ "$(field distinct_message_ids "$lake")" = "$accepted" ]; then
    echo "CHECK lake holds exactly the acknowledged events: ok"
  else
    echo "CHECK lake holds exactly the acknowledged events: FAILED"; exit 1
  fi
  exit 0
fi

# Soak.
start_tributary "$work/data"
key=$(app_keys)
secs=$((minutes * 60))
echo "== soak: $rate events/s for $minutes min, fresh ids; RSS every 30 s"
"$bin/examples/loadgen" --addr "127.0.0.1:$tport" --key "$key" --conns "$conns" --secs "$secs" \
  --rate "$((rate / 10))" --save-at 60 --save "$work/minute1.json" >"$work/soak.txt" &
lpid=$!; pids+=("$lpid")
: >"$work/rss.txt"
for i in $(seq 30 30 "$secs"); do
  sleep 30
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$tpid/status")
  echo "$rss" >>"$work/rss.txt"
  echo "t=${i}s rss=$((rss / 1024)) MB"
done
wait "$lpid"
soakline=$(cat "$work/soak.txt")
echo "load: $soakline"
awk 'NR > 4 {if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1} END {
  printf "RSS after minute 2: min %d MB, max %d MB, spread %.1f%%\n", min / 1024, max / 1024,
    (max - min) * 100 / max }' "$work/rss.txt"
# Quiet: the allocator keeps freed memory while traffic flows and gives it back once the
# collector has been idle for collector.release_memory_after_idle_secs (60 s), counted from the
# last file flush (up to collector.max_file_age_ms after the last batch).
echo "== quiet: RSS every 15 s for 150 s"
for i in $(seq 15 15 150); do
  sleep 15
  echo "quiet t=${i}s rss=$(( $(awk '/VmRSS/ {print $2}' "/proc/$tpid/status") / 1024 )) MB"
done
kill -9 "$tpid"; wait "$tpid" 2>/dev/null || true
t0=$(date +%s%N)
start_tributary "$work/data"
echo "restart after kill -9: ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
retry=$(curl -sf -X POST "http://127.0.0.1:$tport/api/w/analytics/collect" -H "X-App-Key: $key" \
  -H 'Content-Type: application/json' --data-binary @"$work/minute1.json")
echo "retry of a batch from minute 1: $retry"
kill -TERM "$tpid"; wait "$tpid" 2>/dev/null || true
lake=$("$bin/examples/lake_count" "$work/data/lake" "$work/minute1.json")
echo "lake: $lake; acknowledged: $(field accepted "$soakline")"
