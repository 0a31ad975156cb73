#!/usr/bin/env bash
# `hwarb trace` on real processes: trace_cli_test.sh HWARB PROGRAMS_DIR
# The three formats agree with each other and with the summary; the program's own output and
# exit status are unchanged; --filter/--start; threads; usage errors (exit 2, near matches for
# unknown symbols) and target errors (exit 1); attach + Ctrl-C leaves the target running with its
# text (executable and libraries) byte-identical to the files.
set -uo pipefail
hwarb=$1
programs=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

same() {  # same GOT WANT DESCRIPTION
  if [[ "$1" != "$2" ]]; then
    echo "FAIL: $3: got '$1', expected '$2'" >&2
    fail=1
  fi
}

branches=$programs/prog_branches
expected=$("$branches" 100)
no_bts=0
[[ -d /sys/bus/event_source/devices/intel_bts ]] || no_bts=1

# --json --filter (software mode, on every machine): branch lines, then one summary whose counts
# add up; the program's line.
run 0 "json filter" trace --software --json --filter classify -- "$branches" 100
cp "$tmp/out" "$tmp/json.out"
has "$tmp/out" "$expected" "program output under trace --json"
python3 - "$tmp/out" <<'PY' || fail=1
import json, re, sys
events = []
for line in open(sys.argv[1]):
    if line.startswith("{"):
        events.append(json.loads(line))
assert events and events[-1]["event"] == "summary", "the last JSON line is the summary"
summary = events[-1]
branches = [e for e in events if e["event"] == "branch"]
assert len(branches) + 1 == len(events), "only branch lines before the summary"
assert summary["branches"] == len(branches) > 100, (summary["branches"], len(branches))
assert sum(summary["by_kind"].values()) == len(branches), "by_kind adds up"
for kind in summary["by_kind"]:
    assert summary["by_kind"][kind] == sum(1 for b in branches if b["kind"] == kind), kind
assert set(summary["by_kind"]) <= {"jump", "cond", "call", "ind-jump", "ind-call", "return"}
assert summary["mode"] == "software" and summary["target"]["exit"] == 0, summary
assert summary["lost"] == 0, summary
assert 0 < summary["stops_per_taken"] <= 2, summary
for b in branches:
    assert set(b) == {"event", "from", "to", "from_sym", "to_sym", "kind", "tid"}, b
    assert b["from"].startswith("0x") and b["to"].startswith("0x"), b
    assert b["tid"] == summary["target"]["pid"], b
    # Symbols as the human format gives them: sym+0xoff (file.c:line).
    assert re.fullmatch(r"classify\+0x[0-9a-f]+ \(branches\.c:[0-9]+\)", b["from_sym"]), b
    assert re.fullmatch(r"\S+\+0x[0-9a-f]+( \(\S+:[0-9]+\))?", b["to_sym"]), b
# All inside one function: the from addresses span less than its size.
froms = [int(b["from"], 16) for b in branches]
assert max(froms) - min(froms) < 0x200, "filtered to one function"
PY
has "$tmp/err" "software branch tracing (--software)" "mode note"
json_count=$(lines "$tmp/json.out" '"event":"branch"')

# Hardware mode: intel_bts where the kernel has it (the default there), a clear error (exit 1,
# nothing run) elsewhere; the hardware finds exactly the software's branches.
run 2 "two modes" trace --hardware --software -- "$branches"
has "$tmp/err" "--hardware and --software are exclusive" "two modes named"
if ((no_bts)); then
  skip_case bts "hardware branch tracing" "no intel_bts PMU on this machine"
  run 1 "hardware without intel_bts" trace --hardware -- "$branches" 100
  has "$tmp/err" "no intel_bts PMU on this machine" "hardware refusal names intel_bts"
  [[ ! -s "$tmp/out" ]] || { echo "FAIL: the program ran although --hardware was refused" >&2; fail=1; }
  run 0 "default mode" trace --json --filter classify -- "$branches" 100
  has "$tmp/err" "software branch tracing (no BTS on this machine)" "default mode note"
  has "$tmp/out" '"mode":"software"' "default mode is software without BTS"
else
  run 0 "hardware filter" trace --hardware --json --filter classify -- "$branches" 100
  has "$tmp/out" "$expected" "program output under hardware trace"
  has "$tmp/err" "hardware branch tracing (intel_bts" "hardware mode note"
  python3 - "$tmp/out" "$json_count" <<'PY' || fail=1
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
summary = events[-1]
branches = [e for e in events if e["event"] == "branch"]
assert summary["mode"] == "hardware" and summary["truncations"] == 0, summary
assert len(branches) == summary["branches"] == int(sys.argv[2]), (len(branches), sys.argv[2])
PY
fi

# Human format: the same branches, with symbols and source lines; the summary on stderr.
run 0 "human filter" trace --software --filter classify -- "$branches" 100
has "$tmp/out" "$expected" "program output under trace"
same "$(lines "$tmp/out" '^ +[0-9]+  classify\+0x[0-9a-f]+ \(branches\.c:[0-9]+\) => ')" \
  "$json_count" "human lines = json lines"
has "$tmp/out" "=> weigh+0x0 (branches.c:" "a call to the helper"
lines "$tmp/out" '  (jump|cond|call|ind-jump|ind-call|return)$' >/dev/null ||
  { echo "FAIL: human lines end with the kind" >&2; fail=1; }
has "$tmp/err" "hwarb trace: $json_count branches (" "human summary count"
has "$tmp/err" "stops per taken branch" "human summary ratio"
has "$tmp/err" "branches/s" "human summary rate"
has "$tmp/err" "exited with status 0" "human summary exit"

# --perf-script: COMM TID TIME: PERIOD EVENT: FROM SYM+OFF (DSO) => TO SYM+OFF (DSO), as perf
# script prints branch samples (period 1: each record is one branch).
run 0 "perf-script filter" trace --software --perf-script --filter classify -- "$branches" 100
same "$(lines "$tmp/out" '^ +prog_branches +[0-9]+ +[0-9]+\.[0-9]{6}: +1 +branches: +[0-9a-f]+ classify\+0x[0-9a-f]+ \(/.*prog_branches\) => +[0-9a-f]+ [^ ]+ \(.*\)$')" \
  "$json_count" "perf-script lines = json lines"
# Calls into the shared libraries go through PLT stubs, named NAME@plt as perf names them; the
# stub's jump lands in the function of that name.
run 0 "perf-script plt" trace --software --perf-script -- "$branches" 20
count "$tmp/out" ' main\+0x[0-9a-f]+ \(/.*prog_branches\) => +[0-9a-f]+ printf@plt\+0x0 \(/.*prog_branches\)$' 1 "a call to printf@plt"
count "$tmp/out" ' main\+0x[0-9a-f]+ \(.*\) => +[0-9a-f]+ _init\+' 0 "no call lands in _init"
python3 - "$tmp/out" <<'PY' || fail=1
import re, sys
stubs = 0
for line in open(sys.argv[1]):
    m = re.search(r" (\w+)@plt\+0x0 \(\S+\) => +[0-9a-f]+ (\S+) \((\S+)\)$", line)
    if not m:
        continue
    stubs += 1
    name, to, dso = m.groups()
    # Bound: the function itself (or an alias with underscores); lazy: back into the stub, on
    # to the resolver.
    bound = re.fullmatch(r"_*(IO_)?" + name + r"\+0x0", to) and dso.startswith("/")
    assert bound or to.startswith(name + "@plt+0x"), line
assert stubs >= 2, f"only {stubs} jumps out of PLT stubs"
PY

# -o FILE: the branches and the summary go to FILE; the program's output alone on stdout, the
# mode line on stderr.
run 0 "json -o" trace --software --json -o "$tmp/report" --filter classify -- "$branches" 100
same "$(cat "$tmp/out")" "$expected" "trace -o: stdout is the program's alone"
same "$(lines "$tmp/report" '"event":"branch"')" "$json_count" "trace -o: branches in the file"
count "$tmp/report" '^\{"event":"summary"' 1 "trace -o: summary in the file"
count "$tmp/err" 'software branch tracing' 1 "trace -o: the mode line on stderr"
run 0 "human --output" trace --software --output "$tmp/report" --filter classify -- "$branches" 100
same "$(cat "$tmp/out")" "$expected" "trace --output: stdout is the program's alone"
count "$tmp/report" "^hwarb trace: $json_count branches \(" 1 "trace --output: the summary in the file"
count "$tmp/err" 'branches \(' 0 "trace --output: no summary on stderr"
run 2 "-o unwritable" trace -o "$tmp/none/report" -- "$branches" 3
has "$tmp/err" "$tmp/none/report" "trace -o names the file"
# A report that cannot be written (a full device, as -o FILE or as stdout) is hwarb's failure:
# exit 1, the output and the errno said on stderr at the end; the program runs to its end as it
# does unwatched (its output on stdout with -o; its status in the summary on stderr without).
# Without intel_bts the default mode is the software one: it runs once.
trace_modes=("")
((no_bts)) || trace_modes+=("--software")
for mode in "${trace_modes[@]}"; do
  m=${mode:-default}
  for format in "" "--json" "--perf-script"; do
    run 1 "$m: trace $format -o /dev/full" trace $mode $format -o /dev/full --filter classify -- "$branches" 100
    same "$(cat "$tmp/out")" "$expected" "$m: trace $format -o /dev/full: the program's output"
    count "$tmp/err" '^hwarb trace: --output /dev/full: ENOSPC: No space left on device$' 1 "$m: trace $format -o /dev/full: the output and the reason"
  done
  run_to /dev/full 1 "$m: trace >/dev/full" trace $mode --filter classify -- "$branches" 100
  count "$tmp/err" '^hwarb trace: stdout: ENOSPC: No space left on device$' 1 "$m: trace >/dev/full: the output and the reason"
  count "$tmp/err" "^hwarb trace: [0-9]+ branches .*; command '.*prog_branches' exited with status 0\$" 1 "$m: trace >/dev/full: the program's status"
done

# Default start (main) vs --start=entry (the dynamic loader on): the first branch is main's.
run 0 "default start" trace -- "$branches" 20
first=$(grep -m1 -E '^ +[0-9]+  ' "$tmp/out")
[[ $first == *"  main+0x"* ]] || { echo "FAIL: first branch not from main: $first" >&2; fail=1; }
from_main=$(lines "$tmp/out" '^ +[0-9]+  ')
run 0 "start=entry" trace --start=entry --json -- "$branches" 20
from_entry=$(lines "$tmp/out" '"event":"branch"')
((from_entry > from_main && from_main > 50)) ||
  { echo "FAIL: start=entry $from_entry branches, from main $from_main" >&2; fail=1; }
run 0 "start=weigh" trace --start weigh --json -- "$branches" 20
from_weigh=$(lines "$tmp/out" '"event":"branch"')
((from_weigh < from_main)) || { echo "FAIL: start=weigh $from_weigh >= $from_main" >&2; fail=1; }

# A library function: resolved after the libraries are mapped.
run 0 "filter in libc" trace --json --filter printf -- "$branches" 20
has "$tmp/out" '"event":"summary"' "libc filter summary"

# Threads: every thread's branches, the program's output unchanged.
run 0 "threads" trace --json -- "$programs/prog_threads" 4 100
has "$tmp/out" "done" "threads output"
tids=$(grep '"event":"branch"' "$tmp/out" | sed -E 's/.*"tid":([0-9]+).*/\1/' | sort -u | wc -l)
((tids == 5)) || { echo "FAIL: branches from $tids threads, expected 5" >&2; fail=1; }

# Exit status and signals of the program are reported, unchanged.
run 0 "signal mode" trace --json -- "$branches" 20 signal
has "$tmp/out" "$("$branches" 20 signal | head -1)" "signal program output"
has "$tmp/out" '"signals":1' "signal counted"
run 0 "fork mode" trace --json -- "$branches" 20 fork
has "$tmp/out" "child=" "forked child output"

# Usage errors: exit 2 with the reason; unknown symbols with near matches.
run 2 "unknown filter symbol" trace --filter clasify -- "$branches"
has "$tmp/err" "hwarb trace:" "error prefix"
has "$tmp/err" "did you mean" "near matches"
has "$tmp/err" "classify" "near match named"
run 2 "unknown start symbol" trace --start no_such_function_at_all -- "$branches"
has "$tmp/err" "no_such_function_at_all" "unknown start named"
run 2 "filter on data" trace --filter from_handler -- "$branches"
run 2 "no target" trace --json
run 2 "two formats" trace --json --perf-script -- "$branches"
run 2 "two targets" trace -p 1 -- "$branches"
# Target errors: exit 1.
run 1 "missing command" trace -- /nonexistent/prog_none
has "$tmp/err" "hwarb trace:" "target error prefix"
run 1 "no such process" trace -p 999999999

# Attach to a running process, then Ctrl-C: it runs on, its text identical to the files.
"$programs/prog_spin" >"$tmp/spin.out" &
spin=$!
for _ in $(seq 50); do grep -q ready "$tmp/spin.out" && break; sleep 0.05; done
"$hwarb" trace --json -p "$spin" >"$tmp/attach.out" 2>"$tmp/attach.err" &
tracer=$!
handles "$tracer" 2
sleep 0.7
kill -INT "$tracer"
wait "$tracer"
rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: attach + SIGINT: exit $rc" >&2; cat "$tmp/attach.err" >&2; fail=1; }
has "$tmp/attach.out" '"event":"summary"' "attach summary"
has "$tmp/attach.out" '"interrupted":true' "attach interrupted"
calls=$(lines "$tmp/attach.out" '"kind":"call"')
((calls > 10)) || { echo "FAIL: attach: only $calls calls traced" >&2; fail=1; }
sleep 0.1
state=$(awk '{print $3}' "/proc/$spin/stat")
[[ $state == S || $state == R ]] || { echo "FAIL: target state '$state' after detach" >&2; fail=1; }
grep -q TracerPid:.0 "/proc/$spin/status" || { echo "FAIL: target still traced" >&2; fail=1; }
python3 - "$spin" <<'PY' || fail=1
import sys
pid = sys.argv[1]
checked = set()
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
    for line in maps:
        parts = line.split()
        if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        offset = int(parts[2], 16)
        with open(parts[5], "rb") as f:
            f.seek(offset)
            want = f.read(end - start)
        mem.seek(start)
        live = mem.read(len(want))
        if live != want:
            print(f"FAIL: text of {parts[5]} differs from the file after detach", file=sys.stderr)
            sys.exit(1)
        checked.add(parts[5])
if not any(p.endswith("/prog_spin") for p in checked) or len(checked) < 2:
    print(f"FAIL: text mappings checked: {sorted(checked)}", file=sys.stderr)
    sys.exit(1)
PY
"$hwarb" trace --json -p "$spin" >"$tmp/attach2.out" 2>&1 &
tracer=$!
handles "$tracer" 2
sleep 0.5
kill -INT "$tracer"
wait "$tracer" || { echo "FAIL: second attach" >&2; fail=1; }
kill -9 "$spin"
wait "$spin" 2>/dev/null
spin=

exit $fail
