#!/usr/bin/env bash
# bench/stat_bench.sh — `hwarb stat` in hardware mode against `perf stat -e mem:ADDR/LEN:w` on the
# same program, in the same run. perf counts user-space accesses only (`:u`,
# as hwarb: exclude_kernel; without it this kernel adds 4 writes of its own per run).
#   bench/stat_bench.sh BUILD_DIR [--reps N] [--writes W]
# BUILD_DIR holds tools/hwarb/hwarb and tests/programs/prog_writer. The program is
# `prog_writer W` (W writes of `target`, default 10 000, then W reads). Each repetition runs, in
# this order, the program alone, `perf stat` and `hwarb stat --hardware` (the repetitions
# interleaved, so a change in machine load hits all three alike); every run has address-space
# randomisation off (perf under `setarch -R`, hwarb turns it off itself), so the address perf is
# given is the one hwarb resolves. The median wall time of each (launch to exit, from this shell)
# and the ratio hwarb/perf are printed as a markdown table. Both tools must count exactly W writes.
# Exit status 1 when a run fails or a count is wrong, 2 on usage errors or when `perf` or hardware
# breakpoint hits are missing. Missing the speed target (1.2x) does not change the exit status.
set -euo pipefail
export LC_ALL=C

usage() {
  echo "usage: $0 BUILD_DIR [--reps N] [--writes W]" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
build="$1"
shift
reps=11
writes=10000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; reps="$2"; shift 2 ;;
    --writes) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; writes="$2"; shift 2 ;;
    *) usage ;;
  esac
done
hwarb="$build/tools/hwarb/hwarb"
prog="$build/tests/programs/prog_writer"
[[ -x $hwarb && -x $prog ]] || { echo "$0: build $hwarb and $prog first" >&2; exit 2; }
command -v perf >/dev/null || { echo "$0: perf not installed (apt-get install linux-perf)" >&2; exit 2; }
if ! "$hwarb" probe --json 2>/dev/null | grep -q '"hits_delivered":true'; then
  echo "$0: this machine does not deliver breakpoint hits: $("$hwarb" probe | grep 'hits delivered')" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The address of `target` with randomisation off, from hwarb's first hit.
addr=$(timeout -s KILL 60 "$hwarb" watch --json --count 1 target:w -- "$prog" 1 2>/dev/null |
  sed -n 's/.*"event":"hit".*"addr":"\(0x[0-9a-f]*\)".*/\1/p' | head -1)
[[ -n $addr ]] || { echo "$0: could not resolve target's address" >&2; exit 1; }

now() { date +%s%N; }
# timed NAME RC CMD...: runs CMD (bounded, output to $tmp/NAME.out/.err), which must exit with RC;
# appends its wall time in milliseconds to $tmp/NAME.times.
timed() {
  local name=$1 want=$2
  shift 2
  local t0 t1 rc=0
  t0=$(now)
  timeout -s KILL 120 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  if [[ $rc -ne $want ]]; then
    echo "$0: $name exited $rc, not $want: $*" >&2
    tail -3 "$tmp/$name.err" >&2
    exit 1
  fi
  t1=$(now)
  echo "scale=3; ($t1 - $t0) / 1000000" | bc >>"$tmp/$name.times"
}

for ((r = 1; r <= reps; ++r)); do
  timed alone 3 setarch -R "$prog" "$writes"
  timed perf 3 setarch -R perf stat -x, -e "mem:$addr/4:wu" -- "$prog" "$writes"
  timed hwarb 0 "$hwarb" stat --hardware --json target:w -- "$prog" "$writes"
  perf_count=$(grep -m1 "mem:$addr" "$tmp/perf.err" | cut -d, -f1)
  hwarb_count=$(sed -n 's/.*"hits":{"target:w":\([0-9]*\)}.*/\1/p' "$tmp/hwarb.out")
  if [[ $perf_count != "$writes" || $hwarb_count != "$writes" ]]; then
    echo "$0: counts: perf '$perf_count', hwarb '$hwarb_count', expected $writes" >&2
    exit 1
  fi
  grep -q 'hardware mode' "$tmp/hwarb.err" || { echo "$0: hwarb did not run in hardware mode" >&2; exit 1; }
done

median() { sort -n "$tmp/$1.times" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
m_alone=$(median alone)
m_perf=$(median perf)
m_hwarb=$(median hwarb)
ratio=$(echo "scale=2; $m_hwarb / $m_perf" | bc)
echo "| run (prog_writer $writes, medians of $reps) | wall ms |"
echo "| --- | ---: |"
echo "| program alone | $m_alone |"
echo "| perf stat -e mem:$addr/4:wu | $m_perf |"
echo "| hwarb stat --hardware target:w | $m_hwarb |"
echo "| **hwarb / perf** | **${ratio}x** (target <= 1.2x) |"
