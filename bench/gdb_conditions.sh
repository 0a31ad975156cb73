#!/usr/bin/env bash
# bench/gdb_conditions.sh — what a conditional breakpoint costs a gdb session through `hwarb
# gdbserver` when the server evaluates the condition (ConditionalBreakpoints+: a false hit is
# stepped over in the server) against gdb evaluating it at every hit (`set breakpoint
# condition-evaluation host`: each hit a stop sent to gdb, gdb's step over it, a resume), the
# baseline measured in the same run, and against Debian's gdbserver evaluating it too.
#   bench/gdb_conditions.sh BUILD_DIR [REPS]
# The session: tests/programs/gdb_threads.c `count` (four threads, 4000 calls of counted()),
# `break counted if who == 2 && n == 500`, continue, print n, delete, continue to the end. Each
# of REPS rounds (default 5) runs the three sessions in turn; the medians of the wall times in
# ms, and the ratios. Every session must stop at n = 500 and the program print calls=4000;
# otherwise exit 1. Target: the server's evaluation at most 1.5x gdbserver's, and at least 5x
# faster than gdb's own.
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 BUILD_DIR [REPS]" >&2; exit 2; }
build="$1"
reps="${2:-5}"
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "gdb_conditions: REPS: a positive number" >&2; exit 2; }
hwarb="${HWARB:-$build/tools/hwarb/hwarb}"
prog="$build/tests/programs/prog_gdb_threads"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "gdb_conditions: $f: not built" >&2; exit 2; }
done
command -v gdb >/dev/null || { echo "gdb_conditions: gdb is not installed" >&2; exit 2; }
command -v gdbserver >/dev/null || { echo "gdb_conditions: gdbserver is not installed" >&2; exit 2; }
work="$(mktemp -d /tmp/gdb_conditions.XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail=0
# session NAME EVALUATION SERVER...: one gdb session; prints its wall time in ms.
session() {
  local name=$1 evaluation=$2 t0 t1
  shift 2
  t0=$(date +%s%N)
  timeout 600 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex "target remote | $* $prog count" -ex "set breakpoint condition-evaluation $evaluation" \
    -ex 'break counted if who == 2 && n == 500' -ex continue -ex 'p n' -ex delete -ex continue \
    >"$work/$name.out" 2>"$work/$name.err"
  t1=$(date +%s%N)
  if ! grep -qx '\$1 = 500' "$work/$name.out" || ! grep -qx 'calls=4000' "$work/$name.err"; then
    echo "gdb_conditions: $name: no stop at n = 500, or the program did not count 4000 calls:" >&2
    tail -3 "$work/$name.out" >&2
    fail=1
  fi
  echo $(((t1 - t0) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

server=() host=() reference=()
for ((r = 1; r <= reps; r++)); do
  server+=("$(session server target "$hwarb" gdbserver --stdio --)")
  host+=("$(session host host "$hwarb" gdbserver --stdio --)")
  reference+=("$(session gdbserver target gdbserver -)")
done
s=$(median "${server[@]}")
h=$(median "${host[@]}")
g=$(median "${reference[@]}")
echo "hwarb gdbserver, conditions in the server: $s ms (runs: ${server[*]})"
echo "hwarb gdbserver, conditions in gdb:        $h ms (runs: ${host[*]})"
echo "Debian gdbserver, conditions in the server: $g ms (runs: ${reference[*]})"
awk -v s="$s" -v h="$h" -v g="$g" 'BEGIN {
  printf "gdb evaluating / the server evaluating: %.1fx (target >= 5)\n", h / s
  printf "hwarb / gdbserver, both in the server:  %.2fx (target <= 1.5)\n", s / g }'
exit $fail
