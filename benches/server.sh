# Sourced by the benches that start a server (load.sh, insn.sh): what each would write again.

# A port to bind on 127.0.0.1 (the servers' own, not shared between runs of one script).
free_port() { echo $((20000 + RANDOM % 20000)); }

# wait_up URL [SECONDS]: polls URL until it answers (default 6 s; longer under valgrind).
wait_up() {
  local tries=$(( ${2:-6} * 50 ))
  for _ in $(seq "$tries"); do curl -sf -o /dev/null "$1" && return 0; sleep 0.02; done
  echo "server did not start: $1" >&2; return 1
}

# create_app PORT NAME: a new enterprise app on the server at PORT; prints its integration key
# (needs TRIBUTARY_ADMIN_TOKEN, the token the server was started with).
create_app() {
  curl -sf -X POST "http://127.0.0.1:$1/admin/v1/apps" \
    -H "Authorization: Bearer $TRIBUTARY_ADMIN_TOKEN" \
    -H 'Content-Type: application/json' -d "{\"name\": \"$2\", \"plan\": \"enterprise\"}" |
    sed -E 's/.*"integrationKey":"([^"]+)".*/\1/'
}
