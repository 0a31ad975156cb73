#!/usr/bin/env bash
# Another user holds the debug registers CPU-wide (`perf stat -a -e mem:ADDR:w` x N, Debian's
# perf): slots_held_test.sh HWARB PROGRAMS_DIR
# hwarb must name the kernel's reason, ENOSPC with the slots held by another user and the
# processes with perf events open, never "hits are not delivered": in `probe` (text and JSON),
# in the fallback of `watch` (whose count stays exact in software) and in the refusal of
# `watch --hardware` (exit 1). With all 4 slots held, and with 2 of them.
set -uo pipefail
hwarb=$1
P=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

if ! command -v perf >/dev/null; then
  skip_case tools "slots held by perf stat -a" "perf is not installed (scripts/setup installs linux-perf)"
  exit 0
fi
if [[ ! -d /sys/bus/event_source/devices/breakpoint ]]; then
  skip_case hardware "slots held by perf stat -a" "this kernel has no breakpoint PMU"
  exit 0
fi
# Any address will do: the slots are taken when the events are created.
addr=0x$(nm "$P/prog_writer" | awk '$3 == "target" {print $1}')
perf_pid=

hold() {  # hold N: perf stat -a holds N breakpoint slots on every CPU until release
  local events=() i
  for i in $(seq "$1"); do events+=(-e "mem:$addr:w"); done
  perf stat -a "${events[@]}" -- sleep 120 >/dev/null 2>"$tmp/perf.err" &
  perf_pid=$!
  local want=$(($1 * $(nproc)))
  for _ in $(seq 400); do
    (($(find "/proc/$perf_pid/fd" -lname 'anon_inode:\[perf_event\]' 2>/dev/null | wc -l) >= want)) && return 0
    sleep 0.05
  done
  echo "FAIL: perf stat -a never opened its $1 events: $(cat "$tmp/perf.err")" >&2
  fail=1
  return 1
}
release() {
  [[ -n $perf_pid ]] || return 0
  # perf stat ends with its workload (a SIGINT to perf alone waits for the sleep).
  pkill -TERM -P "$perf_pid" sleep 2>/dev/null
  kill -INT "$perf_pid" 2>/dev/null
  wait "$perf_pid" 2>/dev/null
  perf_pid=
}
trap 'release; rm -rf "$tmp"' EXIT

if hold 4; then
  "$hwarb" probe >"$tmp/probe.txt" 2>&1
  has "$tmp/probe.txt" "breakpoint PMU: yes (ENOSPC: every breakpoint slot is held CPU-wide by another user (perf events open in: " "probe, 4 held"
  has "$tmp/probe.txt" "perf[$perf_pid]" "probe, 4 held: the holder"
  has "$tmp/probe.txt" "hits delivered: unknown (no breakpoint slot was free for the canary)" "probe, 4 held"
  grep -q "not delivered\|never delivered" "$tmp/probe.txt" && bad "probe, 4 held: says hits are not delivered"
  "$hwarb" probe --json >"$tmp/probe.json" 2>&1
  has "$tmp/probe.json" '"breakpoint_slots":0,' "probe --json, 4 held"
  has "$tmp/probe.json" '"slots_held_elsewhere":true' "probe --json, 4 held"
  has "$tmp/probe.json" "\"perf[$perf_pid]\"" "probe --json, 4 held: the holder"
  has "$tmp/probe.json" '"slots":{"registers":4,"free":0,"held_elsewhere":4,' "probe --json, 4 held: slots"
  has "$tmp/probe.txt" "breakpoint slots: ENOSPC — 4 slots (DR0-DR3); held: elsewhere 4 (perf[$perf_pid]" "probe, 4 held: explained"

  run 1 "watch --hardware, 4 held" watch --hardware target:w -- "$P/prog_writer" 5
  has "$tmp/err" "--hardware: hardware mode not possible: ENOSPC: every breakpoint slot is held CPU-wide by another user" "watch --hardware, 4 held"

  run 0 "watch, 4 held" watch target:w -- "$P/prog_writer" 5
  has "$tmp/err" "software mode" "watch, 4 held: the fallback"
  has "$tmp/err" "ENOSPC: every breakpoint slot is held CPU-wide by another user" "watch, 4 held: its reason"
  # Another user's breakpoints may be on the watched page: the CPU makes each access.
  has "$tmp/err" "the CPU makes each access to a watched page (ENOSPC" "watch, 4 held: CPU accesses"
  count "$tmp/out" ' set_target\+0x0 .* target:w 0x[0-9a-f]+ w ' 5 "watch, 4 held: every write"
  release
fi

if hold 2; then
  "$hwarb" probe --json >"$tmp/probe2.json" 2>&1
  has "$tmp/probe2.json" '"breakpoint_slots":2,' "probe --json, 2 held"
  has "$tmp/probe2.json" '"slots_held_elsewhere":true' "probe --json, 2 held"
  has "$tmp/probe2.json" '"free":2,"held_elsewhere":2,' "probe --json, 2 held: slots"
  "$hwarb" probe >"$tmp/probe2.txt" 2>&1
  has "$tmp/probe2.txt" "2 slots per thread free; ENOSPC: 2 of 4 breakpoint slots are held CPU-wide by another user" "probe, 2 held"
  release
fi

# Nobody holds them: nothing is said about another user.
"$hwarb" probe --json >"$tmp/probe0.json" 2>&1
has "$tmp/probe0.json" '"slots_held_elsewhere":false' "probe --json, none held"

[[ $fail -eq 0 ]] && echo "slots_held_test: all cases passed"
exit $fail
