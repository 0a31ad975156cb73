#!/usr/bin/env bash
# bench/watch_per_hit.sh — the time of one watch hit: `hwarb watch --hardware` against
# `hwarb watch --software` and `perf record -e mem:ADDR:w -c 1` (a sample per hit), on
# `prog_writer WRITES` (default 10000), the program alone as the floor (targets: "hardware per hit
# <= software per hit", "keep ahead of perf record").
#   bench/watch_per_hit.sh BUILD_DIR [WRITES] [SERIES]
# Each of SERIES series (default 3) runs the four commands in turn, five times (repetitions
# interleaved, so a change of the machine's load hits all four alike), and prints the wall times
# in ms and the medians' ratios. Every hwarb run must report WRITES hits and every perf run WRITES
# samples or more (the breakpoint also fires in the start-up's own accesses); otherwise exit 1.
# HWARB=path overrides BUILD_DIR's hwarb (to measure another build in the same minutes). Needs
# perf (linux-perf); exits 2 without it.
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 3 ]] || { echo "usage: $0 BUILD_DIR [WRITES] [SERIES]" >&2; exit 2; }
build="$1"
writes="${2:-10000}"
series="${3:-3}"
[[ "$writes" =~ ^[1-9][0-9]*$ ]] || { echo "watch_per_hit: WRITES: a positive number" >&2; exit 2; }
[[ "$series" =~ ^[1-9][0-9]*$ ]] || { echo "watch_per_hit: SERIES: a positive number" >&2; exit 2; }
hwarb="${HWARB:-$build/tools/hwarb/hwarb}"
prog="$build/tests/programs/prog_writer"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "watch_per_hit: $f: not built" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "watch_per_hit: perf: not installed" >&2; exit 2; }
work="$(mktemp -d /tmp/watch_per_hit.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# The address of `target` with ASLR off (setarch -R): PIE loads at 0x555555554000 then.
off="$(nm "$prog" | awk '$3 == "target" { print $1 }')"
[[ -n "$off" ]] || { echo "watch_per_hit: $prog: no symbol target" >&2; exit 2; }
addr="$(printf '0x%x' $((0x555555554000 + 0x$off)))"

# Runs a command, prints its wall time in ms; its stderr is kept in $work/err.
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
  cat "$work/err" "$work/hits" 2>/dev/null | grep -q "hwarb watch: $writes hits" ||
    { echo "watch_per_hit: $1 did not report $writes hits:" >&2; tail -2 "$work/err" >&2; fail=1; }
}

echo "| series | program alone | hwarb --hardware | hwarb --software | perf record -c 1 | hardware/software | hardware/perf record |"
echo "|---|---|---|---|---|---:|---:|"
for ((s = 1; s <= series; ++s)); do
  al=() hw=() sw=() pr=()
  for r in 1 2 3 4 5; do
    al+=("$(timed setarch -R "$prog" "$writes")")
    hw+=("$(timed "$hwarb" watch --hardware -o "$work/hits" target:w -- "$prog" "$writes")")
    check_hits "hwarb --hardware"
    sw+=("$(timed "$hwarb" watch --software -o "$work/hits" target:w -- "$prog" "$writes")")
    check_hits "hwarb --software"
    pr+=("$(timed setarch -R perf record -q -o "$work/perf.data" -e "mem:$addr:w" -c 1 -- "$prog" "$writes")")
    samples="$(perf report -i "$work/perf.data" --stats 2>/dev/null | awk '/SAMPLE events/ { print $3; exit }')"
    ((${samples:-0} >= writes)) ||
      { echo "watch_per_hit: perf record took ${samples:-no} samples, not $writes" >&2; fail=1; }
  done
  mh=$(median "${hw[@]}") ms=$(median "${sw[@]}") mp=$(median "${pr[@]}")
  echo "| $s | ${al[*]} | ${hw[*]} | ${sw[*]} | ${pr[*]} | $(awk -v a="$mh" -v b="$ms" 'BEGIN { printf "%.2fx", a / b }') | $(awk -v a="$mh" -v b="$mp" 'BEGIN { printf "%.2fx", a / b }') |"
done
exit "$fail"
