#!/usr/bin/env bash
# bench/gdbserver_bench.sh — gdb + `hwarb gdbserver` against gdb + Debian gdbserver and native gdb,
# in the same run (targets: bench/README.md).
#   bench/gdbserver_bench.sh BUILD_DIR [--reps N] [--writes W] [--dense-work K] [--sparse-writes S]
#                            [--work K] [--cpu C] [--limit SECONDS] [--parts LIST]
# BUILD_DIR holds tools/hwarb/hwarb and tests/programs/prog_bench_watch (bench/run gdbserver builds
# them in Release). Every gdb runs in batch mode with one command file: `set sysroot /` (gdb reads
# the libraries locally in every configuration), `break main`, run or continue to it, `watch EXPR`
# with a `commands` list (`silent`, a Python counter, `continue`), continue to the exit, print the
# count. The repetitions (default 3) are interleaved; the median wall time (launch to exit, from
# this shell) is reported. --cpu C runs every command under `taskset -c C`; --limit bounds each run
# (default 300 s; the target size, 10 000 sparse writes, needs about 1000 s for native gdb);
# --parts runs only some parts (e.g. 1,3; default 1,2,3).
#   1. hardware watch, dense writes: `prog_bench_watch counter W 1` (W writes of a 4-byte global,
#      default 2000, ~31 instructions apart; --dense-work K puts K rounds of work between them, as
#      --work does for the sparse program): gdb + `hwarb gdbserver` against gdb + `gdbserver`
#      and native gdb (a debug register). Target: hwarb within 1.2x of gdb + gdbserver. Skipped,
#      with the reason, when `hwarb probe --json` does not report "hits_delivered":true.
#   2. software watch: gdb + `hwarb gdbserver --software` against native gdb with
#      `set can-use-hw-watchpoints 0` (gdb single-steps the program), on the dense program of part 1
#      and on a sparse one, `prog_bench_watch counter S K` (default 200 writes, K = 32 rounds: ~500
#      instructions apart). Target: >= 20x faster.
#   3. 64-byte watch: `watch block` (eight longs) on `prog_bench_watch block S K`: native gdb cannot
#      place it on the four debug registers and single-steps the program; gdb + `hwarb gdbserver`
#      (default mode). Target: >= 30x faster.
# gdb's single-stepping time grows with the instructions run (S x (16 + 15 K)), hwarb's with the
# writes (S), so the ratios of parts 2 and 3 grow with K; S bounds the single-stepping runs.
# Exit status 1 when a run fails, times out (--limit), counts a number of hits other than the
# number of writes, does not run the program to its end, or the program's output differs from its
# native run; 2 on usage errors or missing tools. A missed target does not change the exit status.
set -uo pipefail
export LC_ALL=C

usage() {
  echo "usage: $0 BUILD_DIR [--reps N] [--writes W] [--dense-work K] [--sparse-writes S] [--work K] [--cpu C] [--limit SECONDS] [--parts LIST]" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
build="$1"
shift
reps=3
writes=2000
sparse=200
work=32
pin=()
limit=300
dense_work=1
parts=1,2,3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; reps="$2"; shift 2 ;;
    --writes) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; writes="$2"; shift 2 ;;
    --sparse-writes) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; sparse="$2"; shift 2 ;;
    --work) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; work="$2"; shift 2 ;;
    --cpu) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage; pin=(taskset -c "$2"); shift 2 ;;
    --limit) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; limit="$2"; shift 2 ;;
    --dense-work) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || usage; dense_work="$2"; shift 2 ;;
    --parts) [[ $# -ge 2 && "$2" =~ ^[123](,[123])*$ ]] || usage; parts="$2"; shift 2 ;;
    *) usage ;;
  esac
done

hwarb="$build/tools/hwarb/hwarb"
prog="$build/tests/programs/prog_bench_watch"
for f in "$hwarb" "$prog"; do
  [[ -x "$f" ]] || { echo "gdbserver_bench: $f: not built (bench/run gdbserver builds it)" >&2; exit 2; }
done
for tool in gdb python3 timeout ${pin[0]+"${pin[0]}"}; do
  command -v "$tool" >/dev/null || { echo "gdbserver_bench: $tool: not installed" >&2; exit 2; }
done
have_gdbserver=1
command -v gdbserver >/dev/null || have_gdbserver=0

work_dir="$(mktemp -d /tmp/gdbserver_bench.XXXXXX)"
trap 'rm -rf "$work_dir"' EXIT

# Whether this machine delivers hardware breakpoint hits decides part 1.
probe_json="$("$hwarb" probe --json 2>&1)"
probe_rc=$?
delivered=0
[[ $probe_rc -eq 0 && "$probe_json" == *'"hits_delivered":true'* ]] && delivered=1

# shellcheck source=bench/gdb_bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_bench_lib.sh"

# Configurations: KEY|PROGRAM ARGS|WATCH EXPR|EXPECTED GDB WATCHPOINT KIND|EXPECTED hwarb MODE
# (the last two are checked in the output: gdb's "Hardware watchpoint N" / "Watchpoint N", and
# hwarb's "watchpoints: ..." line on stderr). The gdb command files are written below.
dense_args="counter $writes $dense_work"
sparse_args="counter $sparse $work"
block_args="block $sparse $work"
configs=()
add() {  # add KEY ARGS EXPR START [SETTING]; only for the parts asked for
  local key="$1" args="$2" expr="$3" start="$4" setting="${5:-}" part="${1:1:1}"
  [[ ",$parts," == *",$part,"* ]] || return 0
  if [[ "$start" == run ]]; then
    gdb_watch_script gdbserver_bench run "$expr" "$setting" >"$work_dir/$key.gdb"
  else
    gdb_watch_script gdbserver_bench "target remote | $start -- $prog $args" "$expr" "$setting" \
      >"$work_dir/$key.gdb"
  fi
  echo "$args" >"$work_dir/$key.args"
  configs+=("$key")
}
if [[ $delivered == 1 ]]; then
  add p1.native "$dense_args" counter run
  [[ $have_gdbserver == 1 ]] && add p1.gdbserver "$dense_args" counter "gdbserver -"
  add p1.hwarb "$dense_args" counter "$hwarb gdbserver --stdio"
fi
add p2d.native "$dense_args" counter run "set can-use-hw-watchpoints 0"
add p2d.hwarb "$dense_args" counter "$hwarb gdbserver --software --stdio"
add p2s.native "$sparse_args" counter run "set can-use-hw-watchpoints 0"
add p2s.hwarb "$sparse_args" counter "$hwarb gdbserver --software --stdio"
add p3.native "$block_args" block run
add p3.hwarb "$block_args" block "$hwarb gdbserver --stdio"

# timed KEY REP: one run of configuration KEY (gdb_bench_lib.sh's run_timed) into $work_dir.
timed() {
  local key="$1" rep="$2" args
  read -r -a args <"$work_dir/$key.args"
  local cmd=(gdb -nx -batch -x "$work_dir/$key.gdb")
  if [[ "$key" == *.native ]]; then cmd+=(--args "$prog" "${args[@]}"); else cmd+=("$prog"); fi
  run_timed "gdbserver_bench: rep $rep/$reps: $key ($(basename "$prog") ${args[*]})" "$work_dir" \
    "$key" "$rep" "${cmd[@]}"
}

: >"$work_dir/manifest"
# The program's own output, natively, for every argument set.
for key in "${configs[@]}"; do
  args="$(<"$work_dir/$key.args")"
  [[ -f "$work_dir/native.${args// /_}.out" ]] && continue
  # shellcheck disable=SC2086
  "$prog" $args >"$work_dir/native.${args// /_}.out" 2>&1 ||
    { echo "gdbserver_bench: $prog $args failed natively" >&2; exit 1; }
done
t_start="$EPOCHREALTIME"
for ((rep = 1; rep <= reps; ++rep)); do
  for key in "${configs[@]}"; do timed "$key" "$rep"; done
done
t_end="$EPOCHREALTIME"

python3 - "$work_dir" "$reps" "$delivered" "$have_gdbserver" "$probe_rc" "$probe_json" "$limit" \
  "${pin[*]}" "$writes" "$sparse" "$work" "$(((${t_end/./} - ${t_start/./}) / 1000000))" "$parts" \
  "$dense_work" <<'PYEOF'
import json
import statistics
import sys

(work, reps, delivered, have_gdbserver, probe_rc, probe_json, limit, pin, writes, sparse, k,
 total, parts, dense_k) = sys.argv[1:15]
reps, limit, writes, sparse, k, dense_k = (int(reps), int(limit), int(writes), int(sparse), int(k),
                                           int(dense_k))
parts = set(parts.split(","))
delivered, have_gdbserver = delivered == "1", have_gdbserver == "1"

runs = {}  # key -> [(rep, rc, seconds)]
with open(f"{work}/manifest") as f:
    for line in f:
        key, rep, rc, us = line.split()
        runs.setdefault(key, []).append((rep, int(rc), int(us) / 1e6))

failures = []


def text(key, rep, stream):
    with open(f"{work}/{key}.{rep}.{stream}", errors="replace") as f:
        return f.read()


def args_of(key):
    with open(f"{work}/{key}.args") as f:
        return f.read().split()


def expected_hits(key):
    return int(args_of(key)[1])


def native_line(key):
    with open(f"{work}/native.{'_'.join(args_of(key))}.out") as f:
        return next((l for l in f.read().splitlines() if l.startswith("checksum=")), None)


def check(key, gdb_kind, hwarb_mode):
    """Every run of KEY: exit 0, the program ran to its end with its native output, gdb counted one
    stop per write, gdb placed the expected kind of watchpoint, hwarb served in the expected mode."""
    want_hits = expected_hits(key)
    want_line = native_line(key)
    for rep, rc, _ in runs[key]:
        out, err = text(key, rep, "out"), text(key, rep, "err")
        both = out + err
        if rc != 0:
            reason = f"timed out after {limit} s" if rc == 124 else f"exit status {rc}"
            tail = " | ".join(err.strip().splitlines()[-3:])
            failures.append(f"{key} rep {rep}: {reason}: {tail}")
            continue
        got = [l for l in out.splitlines() if l.startswith("gdbserver_bench_hits=")]
        if got != [f"gdbserver_bench_hits={want_hits}"]:
            failures.append(f"{key} rep {rep}: gdb counted {got or 'nothing'}, expected "
                            f"{want_hits} (one stop per write, every write changes the value)")
        if "exited normally" not in out:
            failures.append(f"{key} rep {rep}: the program did not run to its end under gdb")
        lines = [l for l in both.splitlines() if l.startswith("checksum=")]
        if want_line is None or lines != [want_line]:
            failures.append(f"{key} rep {rep}: program output {lines}, natively {want_line!r}")
        if f"{gdb_kind} 2: " not in out or (gdb_kind == "Watchpoint" and "Hardware watchpoint 2" in out):
            failures.append(f"{key} rep {rep}: gdb did not set a '{gdb_kind}'")
        if hwarb_mode and f"watchpoints: {hwarb_mode}" not in err:
            failures.append(f"{key} rep {rep}: hwarb gdbserver did not say 'watchpoints: {hwarb_mode}'")


checks = {
    "p1.native": ("Hardware watchpoint", None),
    "p1.gdbserver": ("Hardware watchpoint", None),
    "p1.hwarb": ("Hardware watchpoint", "debug registers while they last"),
    "p2d.native": ("Watchpoint", None),
    "p2d.hwarb": ("Hardware watchpoint", "software (--software)"),
    "p2s.native": ("Watchpoint", None),
    "p2s.hwarb": ("Hardware watchpoint", "software (--software)"),
    "p3.native": ("Watchpoint", None),
    "p3.hwarb": ("Hardware watchpoint", ""),
}
for key in runs:
    check(key, *checks[key])


def med(key):
    return statistics.median(s for _, _, s in runs[key])


def secs(s):
    return f"{s:.2f}"


def prog(key):
    return "prog_bench_watch " + " ".join(args_of(key))


rows = []  # (part, configuration, program, hits, seconds, ratio, target, met)
skip_notes = []
ceiling_notes = []
if "1" not in parts:
    pass
elif delivered:
    n, h = med("p1.native"), med("p1.hwarb")
    hits = expected_hits("p1.hwarb")
    rows.append(("1", "gdb (native), hardware watchpoint", prog("p1.native"), hits, secs(n), "-", "-", "-"))
    if have_gdbserver:
        g = med("p1.gdbserver")
        rows.append(("1", "gdb + Debian gdbserver", prog("p1.gdbserver"), hits, secs(g), "-", "-", "-"))
        r = h / g
        rows.append(("1", "gdb + hwarb gdbserver (debug registers)", prog("p1.hwarb"), hits, secs(h),
                     f"{r:.2f}x gdbserver's time ({h / n:.1f}x native gdb's)", "≤ 1.2x",
                     "yes" if r <= 1.2 else "NO"))
    else:
        rows.append(("1", "gdb + hwarb gdbserver (debug registers)", prog("p1.hwarb"), hits, secs(h),
                     f"{h / n:.1f}x native gdb's time", "≤ 1.2x gdbserver", "skipped"))
        skip_notes.append("part 1, gdb + gdbserver: skipped: gdbserver is not installed "
                          "(apt-get install gdbserver)")
else:
    if probe_rc != "0":
        reason = f"`hwarb probe --json` failed (exit status {probe_rc}): {probe_json.strip()}"
    else:
        try:
            p = json.loads(probe_json)
            reason = (f"this machine does not deliver hardware breakpoint hits (`hwarb probe "
                      f"--json`: hits_delivered {json.dumps(p.get('hits_delivered'))}, canary "
                      f"{p.get('canary_hits')} hits of {p.get('canary_writes')} writes); native "
                      f"gdb's and gdbserver's hardware watchpoints would not fire either")
        except ValueError:
            reason = f"`hwarb probe --json` said: {probe_json.strip()}"
    skip_notes.append(f"part 1 (hardware watch, gdb + hwarb gdbserver / gdbserver / native gdb): "
                      f"skipped: {reason}")
for part, tag, what in (("2", "p2d", "dense"), ("2", "p2s", "sparse")):
    if part not in parts:
        continue
    n, h = med(f"{tag}.native"), med(f"{tag}.hwarb")
    hits = expected_hits(f"{tag}.hwarb")
    rows.append((part, f"gdb (native), software watchpoint ({what})", prog(f"{tag}.native"), hits,
                 secs(n), "-", "-", "-"))
    rows.append((part, f"gdb + hwarb gdbserver --software ({what})", prog(f"{tag}.hwarb"), hits,
                 secs(h), f"{n / h:.1f}x faster", "≥ 20x", "yes" if n / h >= 20 else "NO"))
    if tag == "p2d" and "p1.native" in runs:
        # No stub can make gdb faster than gdb's own hardware watch on the same program, which
        # has no stub and no protocol at all.
        ceiling = n / med("p1.native")
        ceiling_notes.append(f"part 2 dense: the most any stub could reach is {ceiling:.1f}x "
                             f"(native gdb's own hardware watchpoint on the same program, "
                             f"{med('p1.native'):.2f} s: no server, no protocol)")
if "3" in parts:
    n, h = med("p3.native"), med("p3.hwarb")
    hits = expected_hits("p3.hwarb")
    rows.append(("3", "gdb (native), 64-byte watch: single-steps", prog("p3.native"), hits,
                 secs(n), "-", "-", "-"))
    rows.append(("3", "gdb + hwarb gdbserver, 64-byte watch", prog("p3.hwarb"), hits, secs(h),
                 f"{n / h:.1f}x faster", "≥ 30x", "yes" if n / h >= 30 else "NO"))

print(f"\ngdb + hwarb gdbserver against gdb + gdbserver and native gdb: median of {reps} interleaved "
      f"runs, wall seconds from launch to exit; {('all under `' + pin + '`') if pin else 'not pinned'}; "
      f"{total} s in all\n")
print("| part | configuration | program | hits | seconds | ratio | target | met |")
print("|---|---|---|---:|---:|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(c) for c in r) + " |")
print()
print(f"dense: {dense_k} rounds between writes, ~{16 + 15 * dense_k} instructions apart; sparse: "
      f"{k} rounds, ~{16 + 15 * k} instructions apart. Single-stepping costs grow with the "
      f"instructions run, hwarb's with the writes: the ratios of parts 2 and 3 grow with --work.")
for note in ceiling_notes + skip_notes:
    print(note)
if failures:
    print("\nFAILED (correctness):")
    for f in failures:
        print(f"  {f}")
    sys.exit(1)
PYEOF
