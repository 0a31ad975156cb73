#!/usr/bin/env bash
# bench/gdb_bench.sh — hwarb on real processes against gdb, in the same run.
#   bench/gdb_bench.sh BUILD_DIR [--reps N] [--rare-units U] [--cpu C]
# BUILD_DIR holds tools/hwarb/hwarb and tests/programs/prog_bench_{loop,rare,trace} (bench/run gdb
# builds them in Release). Every measurement is repeated N times (default 3), the repetitions
# interleaved; the median wall time (launch to exit, from this shell) is reported. --cpu C runs
# every command (native runs included) under `taskset -c C`, tracer and tracee on one CPU: on this
# VM a ptrace stop whose tracer waits on the other CPU costs a cross-CPU wake-up, and unpinned
# hwarb times vary up to 4x from run to run with where the scheduler puts the two.
#   1. software watch: gdb `set can-use-hw-watchpoints 0` + `watch counter` (every change counted
#      by a breakpoint command that continues) against `hwarb watch --software --json counter:w`,
#      on prog_bench_loop (14 300 writes); native run time too.
#   2. rare writes: the same two tools on prog_bench_rare (10 writes of `rare.value`); gdb steps
#      every instruction, so both run it with U work units (default 1, ~30 s in gdb); hwarb alone
#      also runs the default size (~55 ms natively) for its overhead against the native run.
#   3. trace: gdb `break main`, `run`, `record full` (insn-number-max unlimited), `continue` to the
#      exit against `hwarb trace --json` (from main) on prog_bench_trace; branches/s and stops per
#      taken branch from hwarb's summary line.
#   4. `hwarb stat` in hardware mode against native runs, only when `hwarb probe --json` reports
#      "hits_delivered":true.
# Prints a markdown table. Exit status 1 when a tool run fails, times out (300 s per run) or
# reports a wrong hit / instruction / branch count, or a program's output differs from its native
# run; 2 on usage errors. Missing a speed target does not change the exit status.
set -euo pipefail
export LC_ALL=C

usage() {
  echo "usage: $0 BUILD_DIR [--reps N] [--rare-units U] [--cpu C]" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
build="$1"
shift
reps=3
rare_units=1
pin=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; reps="$2"; shift 2 ;;
    --rare-units) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; rare_units="$2"; shift 2 ;;
    --cpu) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage; pin=(taskset -c "$2"); shift 2 ;;
    *) usage ;;
  esac
done

hwarb="$build/tools/hwarb/hwarb"
progs="$build/tests/programs"
for f in "$hwarb" "$progs/prog_bench_loop" "$progs/prog_bench_rare" "$progs/prog_bench_trace"; do
  [[ -x "$f" ]] || { echo "gdb_bench: $f: not built (bench/run gdb builds it)" >&2; exit 2; }
done
for tool in gdb python3 timeout ${pin[0]+"${pin[0]}"}; do
  command -v "$tool" >/dev/null || { echo "gdb_bench: $tool: not installed" >&2; exit 2; }
done
limit=300

work="$(mktemp -d /tmp/gdb_bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=bench/gdb_bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_bench_lib.sh"

# gdb software watchpoints: every stop counted in Python, continued silently.
gdb_watch_script gdb_bench run counter "set can-use-hw-watchpoints 0" >"$work/loop.gdb"
gdb_watch_script gdb_bench run rare.value "set can-use-hw-watchpoints 0" >"$work/rare.gdb"
cat >"$work/trace.gdb" <<'EOF'
set pagination off
set confirm off
set record full insn-number-max unlimited
break main
run
record full
continue
info record
kill
EOF

# timed KEY REP CMD...: one run of CMD (gdb_bench_lib.sh's run_timed) into $work.
timed() {
  local key="$1" rep="$2"
  shift 2
  run_timed "gdb_bench: rep $rep/$reps: $key" "$work" "$key" "$rep" "$@"
}

probe_json="$("$hwarb" probe --json 2>&1)" || true
delivered=0
[[ "$probe_json" == *'"hits_delivered":true'* ]] && delivered=1

loop="$progs/prog_bench_loop"
rare="$progs/prog_bench_rare"
trace="$progs/prog_bench_trace"
: >"$work/manifest"
# native NAME REP CMD...: 5 native runs per repetition (they are short and noisy).
native() {
  local key="$1" rep="$2" i
  shift 2
  for ((i = 1; i <= 5; ++i)); do timed "$key" "$rep.$i" "$@"; done
}
for ((rep = 1; rep <= reps; ++rep)); do
  native loop.native "$rep" "$loop"
  timed loop.hwarb "$rep" "$hwarb" watch --software --json counter:w -- "$loop"
  timed loop.gdb "$rep" gdb -nx -batch -x "$work/loop.gdb" "$loop"
  native rare.native "$rep" "$rare"
  timed rare.hwarb "$rep" "$hwarb" watch --software --json rare/4:w -- "$rare"
  native rareU.native "$rep" "$rare" "$rare_units"
  timed rareU.hwarb "$rep" "$hwarb" watch --software --json rare/4:w -- "$rare" "$rare_units"
  timed rareU.gdb "$rep" gdb -nx -batch -x "$work/rare.gdb" --args "$rare" "$rare_units"
  native trace.native "$rep" "$trace"
  timed trace.hwarb "$rep" "$hwarb" trace --json -- "$trace"
  timed trace.gdb "$rep" gdb -nx -batch -x "$work/trace.gdb" "$trace"
  if [[ $delivered == 1 ]]; then
    timed stat.hwarb "$rep" "$hwarb" stat --json counter:w -- "$loop"
    timed statrare.hwarb "$rep" "$hwarb" stat --json rare/4:w -- "$rare"
  fi
done

python3 - "$work" "$reps" "$rare_units" "$delivered" "$probe_json" "$limit" "${pin[*]}" <<'PYEOF'
import json
import statistics
import sys

work, reps, rare_units, delivered, probe_json, limit, pin = sys.argv[1:8]
reps, delivered, limit = int(reps), delivered == "1", int(limit)

runs = {}  # key -> list of (rep, rc, seconds); rep is "R" or, for native runs, "R.I"
with open(f"{work}/manifest") as f:
    for line in f:
        key, rep, rc, us = line.split()
        runs.setdefault(key, []).append((rep, int(rc), int(us) / 1e6))

failures = []


def text(key, rep, stream):
    with open(f"{work}/{key}.{rep}.{stream}", errors="replace") as f:
        return f.read()


def fail(key, rep, what):
    failures.append(f"{key} rep {rep}: {what}")


def check_rc(key):
    ok = True
    for rep, rc, _ in runs.get(key, []):
        if rc != 0:
            reason = f"timed out after {limit} s" if rc == 124 else f"exit status {rc}"
            tail = " | ".join(text(key, rep, "err").strip().splitlines()[-3:])
            fail(key, rep, f"{reason}: {tail}")
            ok = False
    return ok


def median(key):
    return statistics.median(s for _, _, s in runs[key])


def summary(key, rep):
    lines = [l for l in text(key, rep, "out").splitlines() if '"event":"summary"' in l]
    if not lines:
        fail(key, rep, "no summary line")
        return None
    return json.loads(lines[-1])


def program_line(key, rep, prefix):
    for l in text(key, rep, "out").splitlines():
        if l.startswith(prefix):
            return l
    return None


def check_output(native, key, prefix):
    """The program's own output under the tool equals its native output."""
    for rep, _, _ in runs[key]:
        want = program_line(native, "1.1", prefix)
        got = program_line(key, rep, prefix)
        if want is None or got != want:
            fail(key, rep, f"program output {got!r}, native {want!r}")


def check_hwarb_watch(key, expr, hits, mode, count_lines):
    for rep, rc, _ in runs[key]:
        if rc != 0:
            continue
        s = summary(key, rep)
        if s is None:
            continue
        if s.get("hits", {}).get(expr) != hits:
            fail(key, rep, f"hwarb reported {s.get('hits')} hits, expected {hits}")
        if s.get("mode") != mode:
            fail(key, rep, f"hwarb ran in mode {s.get('mode')!r}, expected {mode!r}")
        if s.get("target", {}).get("exit") != 0:
            fail(key, rep, f"target ended {s.get('target')}")
        if count_lines:
            n = sum('"event":"hit"' in l for l in text(key, rep, "out").splitlines())
            if n != hits:
                fail(key, rep, f"{n} hit lines, expected {hits}")


def check_gdb_watch(key, hits):
    for rep, rc, _ in runs[key]:
        if rc != 0:
            continue
        out = text(key, rep, "out")
        if f"gdb_bench_hits={hits}\n" not in out:
            got = [l for l in out.splitlines() if l.startswith("gdb_bench_hits=")]
            fail(key, rep, f"gdb counted {got or 'nothing'}, expected {hits}")
        if "exited normally" not in out:
            fail(key, rep, "the program did not run to its end under gdb")


for key in sorted(runs):
    check_rc(key)

# 1. loop
check_output("loop.native", "loop.native", "checksum=")
if not (program_line("loop.native", "1.1", "checksum=") or "").endswith("counter=14300"):
    fail("loop.native", "1.1", "prog_bench_loop did not print counter=14300")
check_output("loop.native", "loop.hwarb", "checksum=")
check_output("loop.native", "loop.gdb", "checksum=")
check_hwarb_watch("loop.hwarb", "counter:w", 14300, "software", True)
check_gdb_watch("loop.gdb", 14300)

# 2. rare writes
for native, tools in (("rare.native", ["rare.hwarb"]), ("rareU.native", ["rareU.hwarb", "rareU.gdb"])):
    check_output(native, native, "checksum=")
    for k in tools:
        check_output(native, k, "checksum=")
check_hwarb_watch("rare.hwarb", "rare/4:w", 10, "software", True)
check_hwarb_watch("rareU.hwarb", "rare/4:w", 10, "software", True)
check_gdb_watch("rareU.gdb", 10)

# 3. trace
check_output("trace.native", "trace.native", "checksum=")
check_output("trace.native", "trace.hwarb", "checksum=")
check_output("trace.native", "trace.gdb", "checksum=")
trace_stats = []
for rep, rc, _ in runs["trace.hwarb"]:
    if rc != 0:
        continue
    s = summary("trace.hwarb", rep)
    if s is None:
        continue
    lines = sum('"event":"branch"' in l for l in text("trace.hwarb", rep, "out").splitlines())
    if s.get("branches", 0) <= 0 or lines != s.get("branches"):
        fail("trace.hwarb", rep, f"{lines} branch lines, summary says {s.get('branches')}")
    if s.get("lost", 0) != 0:
        fail("trace.hwarb", rep, f"{s.get('lost')} branches lost")
    if s.get("target", {}).get("exit") != 0:
        fail("trace.hwarb", rep, f"target ended {s.get('target')}")
    trace_stats.append(s)
if len({s.get("branches") for s in trace_stats}) > 1:
    fail("trace.hwarb", "all", f"branch counts differ between runs: {[s.get('branches') for s in trace_stats]}")
gdb_insns = []
for rep, rc, _ in runs["trace.gdb"]:
    if rc != 0:
        continue
    out = text("trace.gdb", rep, "out") + text("trace.gdb", rep, "err")
    if "failed to record" in out or "does not support instruction" in out:
        fail("trace.gdb", rep, "gdb could not record every instruction")
    if "Process record: inferior program stopped" not in out:
        fail("trace.gdb", rep, "gdb did not record up to the exit")
    n = [int(l.split()[2]) for l in out.splitlines() if l.startswith("Log contains ")]
    if not n:
        fail("trace.gdb", rep, "no 'Log contains N instructions' line")
    gdb_insns += n
if len(set(gdb_insns)) > 1:
    fail("trace.gdb", "all", f"instruction counts differ between runs: {gdb_insns}")

# 4. stat
if delivered:
    check_output("loop.native", "stat.hwarb", "checksum=")
    check_output("rare.native", "statrare.hwarb", "checksum=")
    check_hwarb_watch("stat.hwarb", "counter:w", 14300, "hardware", False)
    check_hwarb_watch("statrare.hwarb", "rare/4:w", 10, "hardware", False)


def fmt_time(s):
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def fmt_rate(r):
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if r >= div:
            return f"{r / div:.2f}{unit}"
    return f"{r:.0f}"


def ratio(a, b):
    return f"{a / b:.1f}x" if b > 0 else "-"


def target(value, goal):
    return f"≥ {goal}x: {'met' if value >= goal else 'MISSED'}"


def med(key):
    return median(key) if key in runs else float("nan")


print(f"\nhwarb against gdb (gdb 13, software watchpoints / record full), median of {reps} "
      f"interleaved runs (native: 5 per run), wall time from launch to exit, "
      f"{('all under `' + pin + '`') if pin else 'not pinned'}\n")
print("| measurement | program | native | gdb | hwarb | gdb/hwarb | target | hwarb/native |")
print("|---|---|---:|---:|---:|---:|---|---:|")
n, g, h = med("loop.native"), med("loop.gdb"), med("loop.hwarb")
print(f"| software watch, 14 300 hits | prog_bench_loop | {fmt_time(n)} | {fmt_time(g)} | "
      f"{fmt_time(h)} | {ratio(g, h)} | {target(g / h, 10)} | {ratio(h, n)} |")
n, g, h = med("rareU.native"), med("rareU.gdb"), med("rareU.hwarb")
print(f"| software watch, 10 hits | prog_bench_rare ({rare_units} unit{'s' if rare_units != '1' else ''}) | {fmt_time(n)} | {fmt_time(g)} | "
      f"{fmt_time(h)} | {ratio(g, h)} | {target(g / h, 100)} | {ratio(h, n)} |")
n, h = med("rare.native"), med("rare.hwarb")
print(f"| software watch, 10 hits | prog_bench_rare (1200 units) | {fmt_time(n)} | not run (hours) | "
      f"{fmt_time(h)} | - | - | {ratio(h, n)} (+{(h - n) * 1e3:.1f} ms) |")
n, g, h = med("trace.native"), med("trace.gdb"), med("trace.hwarb")
print(f"| trace from main (gdb: record full) | prog_bench_trace | {fmt_time(n)} | {fmt_time(g)} | "
      f"{fmt_time(h)} | {ratio(g, h)} | {target(g / h, 10)} | {ratio(h, n)} |")
if delivered:
    n, h = med("loop.native"), med("stat.hwarb")
    print(f"| stat, hardware, 14 300 hits | prog_bench_loop | {fmt_time(n)} | - | {fmt_time(h)} | - | "
          f"- | {ratio(h, n)} (+{(h - n) * 1e3:.1f} ms) |")
    n, h = med("rare.native"), med("statrare.hwarb")
    print(f"| stat, hardware, 10 hits | prog_bench_rare (1200 units) | {fmt_time(n)} | - | {fmt_time(h)} | - | "
          f"- | {ratio(h, n)} (+{(h - n) * 1e3:.1f} ms) |")
print()
if trace_stats:
    s = trace_stats[0]
    h = med("trace.hwarb")
    kinds = ", ".join(f"{k} {v}" for k, v in s.get("by_kind", {}).items())
    tracer_s = statistics.median(float(t.get("seconds", 0)) for t in trace_stats)
    spt = statistics.median(float(t.get("stops_per_taken", 0)) for t in trace_stats)
    print(f"trace: {s['branches']} branches ({kinds}), {s.get('stops')} stops, "
          f"{s.get('not_taken')} not taken, {s.get('syscalls')} system calls; "
          f"{fmt_rate(s['branches'] / h)} branches/s over hwarb's wall time, "
          f"{fmt_rate(s['branches'] / tracer_s) if tracer_s > 0 else '-'} branches/s over the "
          f"tracer's own {tracer_s:.3f} s; {spt:.3f} stops per taken branch "
          f"(target ≤ 2: {'met' if spt <= 2 else 'MISSED'})")
if gdb_insns:
    g = med("trace.gdb")
    print(f"gdb record full: {gdb_insns[0]} instructions recorded from main to exit_group, "
          f"{fmt_rate(gdb_insns[0] / g)} instructions/s")
if not delivered:
    print(f"stat in hardware mode: skipped, `hwarb probe --json` does not report delivered hits: "
          f"{probe_json}")
if failures:
    print("\nFAILED (correctness):")
    for f in failures:
        print(f"  {f}")
    sys.exit(1)
PYEOF
