#!/usr/bin/env bash
# bench/kill9_server.sh — how often a server under a client's load survives `kill -9` of the hwarb
# attached to it: Debian's redis-server (io-threads 4, no persistence) on a loopback port, a
# redis-benchmark client keeping it busy, `hwarb stat -p` and `hwarb watch -p` on a counter redis
# writes at every command (below), SIGKILLed at a random moment 0.1-0.5 s after its status line. After each round the
# server must answer PING with its process unchanged; at the end it must shut down with status 0.
#   bench/kill9_server.sh BUILD_DIR [ROUNDS]
# Needs redis-server and redis-tools (apt-get install redis-server redis-tools). Modes:
# --software always, --hardware where `hwarb probe` sees hits delivered. Target: >= 95% of rounds
# survived per mode and command; exit 1 when one misses it.
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 BUILD_DIR [ROUNDS]" >&2; exit 2; }
build="$1"
rounds="${2:-20}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "kill9_server: ROUNDS: a positive number" >&2; exit 2; }
hwarb="${HWARB:-$build/tools/hwarb/hwarb}"
[[ -x "$hwarb" ]] || { echo "kill9_server: $hwarb: not built" >&2; exit 2; }
for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "kill9_server: $tool: not installed" >&2; exit 2; }
done
port=6391
work="$(mktemp -d /tmp/kill9_server.XXXXXX)"
server=
client=
cleanup() {
  [[ -n $client ]] && kill "$client" 2>/dev/null
  [[ -n $server ]] && kill -9 "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port "$port" --save '' --appendonly no --io-threads 4 --dir "$work" \
  >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
redis-cli -p "$port" ping | grep -q PONG || { echo "kill9_server: redis did not start" >&2; exit 1; }
redis-benchmark -p "$port" -c 20 -n 100000000 -t set,get,incr -q >/dev/null 2>&1 &
client=$!
# The expression: a counter redis writes at every command. Debian 12's redis 7.0 is stripped of
# its debug information; `server` (its global struct) is exported, and offset 1720 in it is a
# count that follows INFO's total_commands_processed (found by reading the struct between
# commands). KILL9_EXPR overrides it.
expr="${KILL9_EXPR:-server+1720/8:w}"

modes=(--software)
"$hwarb" probe | grep -q '^hits delivered: yes' && modes+=(--hardware)
echo "redis-server pid $server under redis-benchmark -c 20; watching $expr"
echo
echo "| command | mode | rounds | survived | ended otherwise |"
echo "|---|---|---:|---:|---|"
fail=0
for command in stat watch; do
  for mode in "${modes[@]}"; do
    survived=0
    others=""
    for ((r = 1; r <= rounds; ++r)); do
      if ! kill -0 "$server" 2>/dev/null; then
        others+=" server-gone"
        continue
      fi
      "$hwarb" "$command" "$mode" -o /dev/null "$expr" -p "$server" >/dev/null 2>"$work/err" &
      watcher=$!
      for _ in $(seq 400); do grep -q ' mode, ' "$work/err" && break; sleep 0.005; done
      sleep "0.$((RANDOM % 4 + 1))$((RANDOM % 10))"
      kill -KILL "$watcher" 2>/dev/null
      wait "$watcher" 2>/dev/null
      # The watchdog restores the server within a second; it must then answer as before.
      ok=false
      for _ in $(seq 100); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then ok=true; break; fi
        sleep 0.02
      done
      if $ok && kill -0 "$server" 2>/dev/null; then
        survived=$((survived + 1))
      else
        others+=" dead"
        fail=1
        break
      fi
    done
    echo "| $command | $mode | $rounds | $survived ($((survived * 100 / rounds))%) |${others:- none} |"
    ((survived * 100 >= rounds * 95)) || fail=1
  done
done
kill "$client" 2>/dev/null
wait "$client" 2>/dev/null
client=
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
wait "$server"
rc=$?
server=
echo
echo "redis-server exit status at shutdown: $rc"
[[ $rc -eq 0 ]] || fail=1
exit $fail
