#!/usr/bin/env bash
# bench/hit_timeline.sh — where one watch hit's time goes, hardware path against software path,
# from the kernel's own trace events (target: "hardware per hit <= software per hit").
#   bench/hit_timeline.sh BUILD_DIR [WRITES]
# Runs `hwarb watch --hardware` and `hwarb watch --software` on `prog_writer WRITES` (default
# 2000) with these tracefs events on (trace clock `mono`, so CPUs agree):
#   sched:sched_switch          the program leaves or gets a CPU
#   signal:signal_generate      the kernel raises the hit's signal (SIGTRAP for a perf
#                               breakpoint or a single step, SIGSEGV for a protected page)
#   exceptions:page_fault_user  the program's page faults (the software path's trap)
# and splits every stop of the program into three phases, per stop (median, us):
#   trap     from getting the CPU back to the signal: the program's own instructions up to the
#            next hit, and the kernel's exception path up to the signal (a #DB and perf's
#            overflow handling, or a #PF)
#   stop     from the signal to leaving the CPU (signal delivery, the ptrace stop)
#   tracer   from leaving the CPU to getting it back: hwarb's wake-up, its system calls, the
#            resume
# Needs root and a writable /sys/kernel/tracing; exits 2 otherwise. Tracing is switched off and
# the events disabled again on exit.
set -uo pipefail
export LC_ALL=C

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 BUILD_DIR [WRITES]" >&2; exit 2; }
build="$1"
writes="${2:-2000}"
[[ "$writes" =~ ^[1-9][0-9]*$ ]] || { echo "hit_timeline: WRITES: a positive number" >&2; exit 2; }
hwarb="$build/tools/hwarb/hwarb"
prog="$build/tests/programs/prog_writer"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "hit_timeline: $f: not built" >&2; exit 2; }
done
tr=/sys/kernel/tracing
[[ -w "$tr/trace" ]] || { echo "hit_timeline: $tr: not writable (root and tracefs needed)" >&2; exit 2; }

events=(sched/sched_switch signal/signal_generate exceptions/page_fault_user)
old_clock="$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$tr/trace_clock")"
cleanup() {
  echo 0 >"$tr/tracing_on"
  for e in "${events[@]}"; do echo 0 >"$tr/events/$e/enable"; done
  echo "${old_clock:-local}" >"$tr/trace_clock"
  echo >"$tr/trace"
  rm -rf "$work_dir"
}
work_dir="$(mktemp -d /tmp/hit_timeline.XXXXXX)"
trap cleanup EXIT
echo 8192 >"$tr/buffer_size_kb"
echo mono >"$tr/trace_clock"

for mode in hardware software; do
  echo 0 >"$tr/tracing_on"
  echo >"$tr/trace"
  for e in "${events[@]}"; do echo 1 >"$tr/events/$e/enable"; done
  echo 1 >"$tr/tracing_on"
  "$hwarb" watch "--$mode" -o "$work_dir/$mode.hits" target:w -- "$prog" "$writes" \
    >"$work_dir/$mode.out" 2>"$work_dir/$mode.err"
  echo 0 >"$tr/tracing_on"
  cp "$tr/trace" "$work_dir/$mode.trace"
  grep -q "sum=" "$work_dir/$mode.out" ||
    { echo "hit_timeline: $mode: the program did not run to its end" >&2; cat "$work_dir/$mode.err" >&2; exit 1; }
done

python3 - "$work_dir" "$writes" <<'PYEOF'
import re
import statistics
import sys

work, writes = sys.argv[1], int(sys.argv[2])
line_re = re.compile(r"^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\S+): (.*)$")
names = {5: "SIGTRAP", 11: "SIGSEGV"}


def stops_of(mode):
    """The program's hit signals as (time, signal), and its timed stops as (signal, trap, stop,
    tracer) in us: the stops where it left the CPU and got it back (a tracer that polls can
    resume it before it has left the CPU; such a stop has no phases, only its signal)."""
    events = []
    for line in open(f"{work}/{mode}.trace", errors="replace"):
        m = line_re.match(line)
        if m:
            events.append((float(m.group(3)) * 1e6, int(m.group(2)), m.group(4), m.group(5)))
    # The program: the process that received the most hit signals.
    counts = {}
    for _, _, name, rest in events:
        s = re.search(r"sig=(\d+) .* pid=(\d+)", rest) if name == "signal_generate" else None
        if s and int(s.group(1)) in names:
            counts[int(s.group(2))] = counts.get(int(s.group(2)), 0) + 1
    prog = max(counts, key=counts.get)
    signals, timed, faults = [], [], 0
    on_cpu = sig = None
    cur = None  # [signal, trap, stop, tracer] of the stop in progress
    for t, pid, name, rest in events:
        if name == "sched_switch":
            prev = int(re.search(r"prev_pid=(\d+)", rest).group(1))
            nxt = int(re.search(r"next_pid=(\d+)", rest).group(1))
            if prev == prog and cur is not None and len(cur) == 2:
                cur.append(t - sig)
                sig = t
            elif nxt == prog:
                if cur is not None and len(cur) == 3:
                    cur.append(t - sig)
                    timed.append(tuple(cur))
                cur = None
                on_cpu = t
        elif name == "signal_generate":
            s = re.search(r"sig=(\d+) .* pid=(\d+)", rest)
            if s and int(s.group(2)) == prog and int(s.group(1)) in names:
                n = int(s.group(1))
                signals.append((t, n))
                cur = [n, t - on_cpu] if on_cpu is not None else None
                sig, on_cpu = t, None
        elif name == "page_fault_user" and pid == prog:
            faults += 1
    return signals, timed, faults


def med(v):
    return statistics.median(v) if v else 0.0


print("| path | signal | stops | per hit | timed | trap us | stop us | tracer us | to next signal us "
      "| us per hit |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for mode in ("hardware", "software"):
    signals, timed, faults = stops_of(mode)
    # From each hit signal to the program's next one: a whole stop, whatever it contained.
    gaps = {}
    for (t0, n), (t1, _) in zip(signals, signals[1:]):
        gaps.setdefault(n, []).append(t1 - t0)
    total = 0.0
    for n in sorted(gaps):
        mine = [s for s in timed if s[0] == n]
        trap, stop, tracer = (med([s[i] for s in mine]) for i in (1, 2, 3))
        stops = sum(1 for _, m in signals if m == n)
        per_hit = stops / writes
        total += per_hit * med(gaps[n])
        print(f"| {mode} | {names[n]} | {stops} | {per_hit:.2f} | {len(mine)} | {trap:.1f} | "
              f"{stop:.1f} | {tracer:.1f} | {med(gaps[n]):.1f} | {per_hit * med(gaps[n]):.1f} |")
    print(f"| {mode} | all ({faults} page faults of the program) | {len(signals)} | "
          f"{len(signals) / writes:.2f} | {len(timed)} | | | | | **{total:.1f}** |")
PYEOF
