#!/usr/bin/env bash
# examples_test.sh DEBUGGER_LOOP PROGRAMS_DIR — see CMakeLists.txt here.
set -uo pipefail
loop=$1
programs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
bad() {
  echo "FAIL: $*" >&2
  fail=1
}

# run NAME EXIT_STATUS PROGRAM ARGS...: debugger_loop on PROGRAM; three stops at writes of 1, 2
# and 3, the watch removed, the program's end with EXIT_STATUS, exit code 0.
run() {
  local name=$1 status=$2
  shift 2
  local out=$tmp/$name.out
  if ! timeout 120 "$loop" "$@" >"$out" 2>&1; then
    if grep -q 'EPERM' "$out"; then
      skip_case - "debugger_loop $name" "tracing refused here: $(cat "$out")"
      return
    fi
    bad "debugger_loop $name: $(cat "$out")"
    return
  fi
  [[ $(grep -c '^stopped: tid [0-9]* wrote [123] at ip 0x' "$out") -eq 3 ]] &&
    [[ $(grep -c '^\(stopped\|hit\): ' "$out") -eq 3 ]] &&
    grep -q '^watch removed$' "$out" && grep -q "^3 writes seen; exit status $status\$" "$out" ||
    bad "debugger_loop $name output: $(cat "$out")"
}

run single 3 "$programs/prog_forker" child 5
# Four threads writing `counter` under a mutex: the watch is removed while the others run.
for round in 1 2 3; do
  run "threads$round" 0 "$programs/prog_futex_counter" 4 200
done
exit $fail
