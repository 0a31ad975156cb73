#!/usr/bin/env bash
# bench/cpu_accesses.sh — what it costs the software watch to let the CPU make each access to a
# watched page (`--cpu-accesses`: the instruction stepped with the page open, so that another
# user's breakpoints there see it) instead of making it itself through /proc/PID/mem, on
# `prog_writer WRITES` (default 10000; it writes the watched `target` and its neighbour on the
# same page, so 2 x WRITES faults), the program alone as the floor.
#   bench/cpu_accesses.sh BUILD_DIR [WRITES] [SERIES]
# Each of SERIES series (default 3) runs the three commands in turn, five times (interleaved),
# and prints the medians in ms, the time per fault in us and the ratio CPU/emulated. Every hwarb
# run must report WRITES hits; otherwise exit 1. Target: ratio <= 6 (one fault costs one stop
# emulated; stepped it costs the fault, two injected mprotect calls and the step).
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 3 ]] || { echo "usage: $0 BUILD_DIR [WRITES] [SERIES]" >&2; exit 2; }
build="$1"
writes="${2:-10000}"
series="${3:-3}"
[[ "$writes" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_accesses: WRITES: a positive number" >&2; exit 2; }
[[ "$series" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_accesses: SERIES: a positive number" >&2; exit 2; }
hwarb="${HWARB:-$build/tools/hwarb/hwarb}"
prog="$build/tests/programs/prog_writer"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "cpu_accesses: $f: not built" >&2; exit 2; }
done
work="$(mktemp -d /tmp/cpu_accesses.XXXXXX)"
trap 'rm -rf "$work"' EXIT

timed() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>"$work/err"
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
fail=0
check_hits() {
  grep -q "hwarb stat: $writes hits" "$work/err" ||
    { echo "cpu_accesses: $1 did not report $writes hits:" >&2; tail -2 "$work/err" >&2; fail=1; }
}

echo "| series | program alone ms | emulated ms | CPU accesses ms | us/fault emulated | us/fault CPU | CPU/emulated |"
echo "|---|---:|---:|---:|---:|---:|---:|"
worst=0
for ((s = 1; s <= series; ++s)); do
  al=() em=() cp=()
  for r in 1 2 3 4 5; do
    al+=("$(timed "$prog" "$writes")")
    em+=("$(timed "$hwarb" stat --software target:w -- "$prog" "$writes")")
    check_hits "--software"
    cp+=("$(timed "$hwarb" stat --software --cpu-accesses target:w -- "$prog" "$writes")")
    check_hits "--software --cpu-accesses"
  done
  a=$(median "${al[@]}")
  e=$(median "${em[@]}")
  c=$(median "${cp[@]}")
  faults=$((2 * writes))
  awk -v s="$s" -v a="$a" -v e="$e" -v c="$c" -v f="$faults" 'BEGIN {
    printf "| %d | %d | %d | %d | %.1f | %.1f | %.2f |\n", s, a, e, c,
      (e - a) * 1000 / f, (c - a) * 1000 / f, (c - a) / (e - a > 0 ? e - a : 1) }'
  ratio=$(awk -v a="$a" -v e="$e" -v c="$c" 'BEGIN { printf "%d", (c - a) * 100 / (e - a > 0 ? e - a : 1) }')
  ((ratio > worst)) && worst=$ratio
done
echo "worst CPU/emulated: $((worst / 100)).$(printf '%02d' $((worst % 100))) (target <= 6)"
((fail == 0)) || exit 1
((worst <= 600)) || exit 1
exit 0
