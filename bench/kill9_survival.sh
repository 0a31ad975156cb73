#!/usr/bin/env bash
# bench/kill9_survival.sh — how often a busy multi-threaded program survives `kill -9` of the
# `hwarb stat -p` attached to it: 4 threads adding to one mutex-protected `counter` (the watched
# variable) as fast as they can (prog_futex_counter 4 K), hwarb attached, SIGKILLed at a random
# moment 0.1-0.5 s later; the program must then run to its end with its own output
# ("counter=4K") and status 0.
#   bench/kill9_survival.sh BUILD_DIR [ROUNDS] [K]
#   KILL9_COMMAND=watch bench/kill9_survival.sh ...   # `hwarb watch -p` (a stop per hit) instead
# Modes: --software always, --hardware where `hwarb probe` sees hits delivered. Prints per mode
# the rounds survived and how the others ended (the signal that killed the program). Target:
# >= 95% of rounds survived. Exit 1 when a mode misses it.
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 3 ]] || { echo "usage: $0 BUILD_DIR [ROUNDS] [K]" >&2; exit 2; }
build="$1"
rounds="${2:-20}"
k="${3:-3000000}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "kill9_survival: ROUNDS: a positive number" >&2; exit 2; }
[[ "$k" =~ ^[1-9][0-9]*$ ]] || { echo "kill9_survival: K: a positive number" >&2; exit 2; }
hwarb="${HWARB:-$build/tools/hwarb/hwarb}"
command="${KILL9_COMMAND:-stat}"
[[ $command == stat || $command == watch ]] || { echo "kill9_survival: KILL9_COMMAND: stat or watch" >&2; exit 2; }
prog="$build/tests/programs/prog_futex_counter"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "kill9_survival: $f: not built" >&2; exit 2; }
done
work="$(mktemp -d /tmp/kill9_survival.XXXXXX)"
trap 'rm -rf "$work"' EXIT

modes=(--software)
"$hwarb" probe | grep -q '^hits delivered: yes' && modes+=(--hardware)

echo "| mode | rounds | survived | ended otherwise |"
echo "|---|---:|---:|---|"
fail=0
for mode in "${modes[@]}"; do
  survived=0
  others=""
  for ((r = 1; r <= rounds; ++r)); do
    "$prog" 4 "$k" >"$work/prog" 2>&1 &
    target=$!
    for _ in $(seq 200); do
      [[ $(readlink "/proc/$target/exe") == */prog_futex_counter ]] && break
      sleep 0.005
    done
    "$hwarb" "$command" "$mode" -o /dev/null counter:w -p "$target" >/dev/null 2>"$work/err" &
    watcher=$!
    for _ in $(seq 400); do grep -q ' mode, ' "$work/err" && break; sleep 0.005; done
    sleep "0.$((RANDOM % 4 + 1))$((RANDOM % 10))"
    kill -KILL "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    wait "$target"
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q "^counter=$((4 * k))$" "$work/prog"; then
      survived=$((survived + 1))
    elif [[ $rc -gt 128 ]]; then
      others+=" SIG$(kill -l $((rc - 128)))"
    else
      others+=" exit$rc"
    fi
  done
  echo "| $mode | $rounds | $survived ($((survived * 100 / rounds))%) |${others:- none} |"
  ((survived * 100 >= rounds * 95)) || fail=1
done
exit $fail
