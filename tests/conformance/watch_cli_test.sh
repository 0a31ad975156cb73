#!/usr/bin/env bash
# `hwarb watch` and `hwarb stat` on real processes: watch_cli_test.sh HWARB PROGRAMS_DIR GOLDEN_DIR
# Every case runs in both modes the machine offers: the default (hardware where the probe sees
# breakpoint hits delivered, else software) and --software. Exact counts, values, exit
# statuses, the program's own output (unchanged), errors with exit 2, and an attach + Ctrl-C that
# leaves the target running with its text byte-identical to the file.
set -uo pipefail
hwarb=$1
programs=$2
golden=$3
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

# probe --json: every field, and what it says agrees with the machine's own files.
run 0 "probe --json" probe --json
python3 - "$tmp/out" <<'PY' || fail=1
import json, os, sys
report = json.loads(open(sys.argv[1]).read())
keys = ["perf_event_paranoid", "breakpoint_pmu", "breakpoint_slots", "slots_error", "hits_delivered",
        "canary_writes", "canary_hits", "intel_bts", "intel_pt", "ptrace_scope", "ptrace_allowed",
        "singlestep_works", "singleblock_steps_blocks", "singleblock_detail", "notes", "slots"]
missing = [k for k in keys if k not in report]
assert not missing, f"probe --json lacks {missing}"
dev = "/sys/bus/event_source/devices/"
assert report["breakpoint_pmu"] == os.path.isdir(dev + "breakpoint"), "breakpoint_pmu"
assert report["intel_bts"] == os.path.isdir(dev + "intel_bts"), "intel_bts"
assert report["intel_pt"] == os.path.isdir(dev + "intel_pt"), "intel_pt"
assert report["hits_delivered"] == (report["canary_writes"] > 0 and
                                    report["canary_hits"] == report["canary_writes"]), "verdict"
if report["breakpoint_pmu"]:
    assert report["breakpoint_slots"] >= 1, "slots"
assert report["perf_event_paranoid"] == int(open("/proc/sys/kernel/perf_event_paranoid").read())
slots = report["slots"]
assert slots["registers"] == 4 and slots["free"] == report["breakpoint_slots"], "slots"
assert bool(slots["explain"]) == report["breakpoint_pmu"], "slots: explain"
PY
run 0 "probe" probe
has "$tmp/out" "hits delivered:" "probe human"
has "$tmp/out" "BTS:" "probe human"

for mode in "" "--software"; do
  m=${mode:-default}
  # 1. Every write of the global, with its values; the program's output and status unchanged.
  run 0 "$m: writes" watch $mode --json target:w -- "$programs/prog_writer" 10
  count "$tmp/out" '"event":"hit"' 10 "$m: writes"
  for i in 1 2 3 4 5 6 7 8 9 10; do
    count "$tmp/out" "\"access\":\"w\",\"old\":\"0x$(printf %x $((i - 1)))\",\"new\":\"0x$(printf %x $i)\"" 1 "$m: write $i"
  done
  count "$tmp/out" '"symbol":"set_target\+0x[0-9a-f]+ \(writer.c:[0-9]+\)"' 10 "$m: ip symbol"
  has "$tmp/out" 'sum=100' "$m: program output"
  has "$tmp/out" '{"event":"summary","hits":{"target:w":10}' "$m: summary"
  has "$tmp/out" '"exit":3' "$m: tracee status"
  # 2. Reads only (x86 has no read breakpoint: rw registers filtered by the instruction).
  run 0 "$m: reads" watch $mode --json target:r -- "$programs/prog_writer" 6
  count "$tmp/out" '"access":"r"' 6 "$m: reads"
  count "$tmp/out" '"access":"w' 0 "$m: no writes in a read watch"
  count "$tmp/out" '"symbol":"get_target' 6 "$m: read ip"
  # 3. --count stops after N hits; the program still runs to its end.
  run 0 "$m: --count" watch $mode --json --count 3 target:w -- "$programs/prog_writer" 10
  count "$tmp/out" '"event":"hit"' 3 "$m: --count"
  has "$tmp/out" 'sum=100' "$m: --count program output"
  has "$tmp/out" '"exit":3' "$m: --count tracee status"
  # 4. --if on the new value.
  run 0 "$m: --if" watch $mode --json --if 'new==5' target:w -- "$programs/prog_writer" 10
  count "$tmp/out" '"event":"hit"' 1 "$m: --if"
  has "$tmp/out" '"old":"0x4","new":"0x5"' "$m: --if values"
  # 5. An unaligned 12-byte range inside a struct: one hit per field store that touches it.
  run 0 "$m: unaligned range" watch $mode --json rec+2/12:w -- "$programs/prog_writer" 1
  count "$tmp/out" '"event":"hit"' 4 "$m: unaligned range"
  # 6. Threads created after the start: every thread's writes, counted per thread.
  run 0 "$m: threads" stat $mode slots/16:w -- "$programs/prog_threads" 4 50
  count "$tmp/out" '^ slots/16:w +[0-9]+ +0 +50 +0 +50$' 4 "$m: per-thread rows"
  count "$tmp/out" '^ slots/16:w +all +0 +200 +0 +200$' 1 "$m: total row"
  has "$tmp/out" 'done' "$m: threads program output"
  # 7. Execution: one hit per call; output unchanged (int3 restored).
  run 0 "$m: exec" watch $mode --json work:x -- "$programs/prog_calls" 7
  count "$tmp/out" '"access":"x"' 7 "$m: exec hits"
  has "$tmp/out" 'total=70' "$m: exec program output"
  has "$tmp/out" '"exit":0' "$m: exec tracee status"
done

# Kernel accesses (software path): read(2) writes the watched buffer, write(2) reads it.
run 0 "kernel accesses" watch --software --json buffer:rw -- "$programs/prog_syscalls"
count "$tmp/out" '"access":"w".*"syscall":"read"' 1 "kernel write by read(2)"
count "$tmp/out" '"access":"r".*"syscall":"write"' 1 "kernel read by write(2)"
has "$tmp/out" 'kernel!' "syscalls program output"

# Every kernel write is a hit, also of the bytes the buffer already held: 200 preads of the same
# file range into `buffer`, 200 hits (as the hardware sees 200 copies).
run 0 "kernel rewrites" watch --software --json buffer:w -- "$programs/prog_reread" 200
count "$tmp/out" '"event":"hit"' 200 "kernel rewrites: one hit per call"
count "$tmp/out" '"syscall":"pread64"' 100 "kernel rewrites: pread64"
count "$tmp/out" '"syscall":"preadv"' 100 "kernel rewrites: preadv"
has "$tmp/out" 'reads=200' "kernel rewrites: program output"

# The CPU makes each access to a watched page where another user of the breakpoints may be
# there: with --cpu-accesses, once the program opens a perf breakpoint of its own, and while
# another process has perf events open. The counts stay exact.
run 0 "--cpu-accesses" stat --software --cpu-accesses target:w -- "$programs/prog_writer" 50
has "$tmp/err" "the CPU makes each access to a watched page (--cpu-accesses)" "--cpu-accesses"
has "$tmp/err" "50 hits" "--cpu-accesses: exact"
# (--emulate-accesses: another process's perf events, e.g. a test beside this one, would turn the
# CPU's accesses on before the program's own breakpoint does.)
run 0 "program's own breakpoint" stat --software --emulate-accesses target:w -- "$programs/prog_self_watch" 50
has "$tmp/err" "opened a perf breakpoint: accesses to the watched pages are made by the CPU" \
  "program's own breakpoint: noted"
has "$tmp/err" "50 hits" "program's own breakpoint: exact"
if command -v perf >/dev/null; then
  perf stat -e task-clock -- sleep 30 >/dev/null 2>&1 &
  holder=$!
  for _ in $(seq 100); do
    ls -l "/proc/$holder/fd" 2>/dev/null | grep -q perf_event && break
    sleep 0.05
  done
  run 0 "another process's perf events" stat --software target:w -- "$programs/prog_writer" 50
  grep -qE "the CPU makes each access to a watched page \(perf events are open in .*perf\[$holder\]" "$tmp/err" ||
    { echo "FAIL: another process's perf events: not named: $(cat "$tmp/err")" >&2; fail=1; }
  has "$tmp/err" "50 hits" "another process's perf events: exact"
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
else
  skip_case - "another process's perf events" "perf is not installed"
fi

# A program's own SIGSEGV handler and its own protection, in both modes: stores that fault on
# the program's mprotect did not happen (no hit; 8 writes of page.value), and the handler's writes
# of the watched page (SIGSEGV blocked there) leave its action in place: 4 handled faults, the
# program's output and status as unwatched.
for mode in "" "--software"; do
  m=${mode:-default}
  run 0 "$m: own protection" watch $mode --json page/4:w -- "$programs/prog_segv_rounds" 3
  count "$tmp/out" '"event":"hit"' 8 "$m: own protection: one hit per completed store"
  count "$tmp/out" '"old":"(0x[0-9a-f]+)","new":"\1"' 0 "$m: own protection: no store that did not happen"
  has "$tmp/out" 'handled=4 value=2000 pending=1' "$m: own protection: program output"
  has "$tmp/out" '"exit":5' "$m: own protection: tracee status"
  run 0 "$m: handler writes" watch $mode --json page+4/4:w -- "$programs/prog_segv_rounds" 3
  count "$tmp/out" '"event":"hit"' 4 "$m: handler writes: hits"
  has "$tmp/out" 'handled=4 value=2000 pending=1' "$m: handler writes: program output"
  has "$tmp/out" '"exit":5' "$m: handler writes: tracee status"
done

# An address in a shared library, not mapped at the program's first instruction: watched once
# the loader has mapped it (the program runs to its entry point first, as for a symbol). Its
# address is the same in every run without address randomisation (hwarb's default).
libvar=$(setarch "$(uname -m)" -R "$programs/prog_libdata" 0 | sed -n 's/^at=\(0x[0-9a-f]*\) .*/\1/p')
for mode in "" "--software"; do
  m=${mode:-default}
  run 0 "$m: library address" watch $mode --json "mem:$libvar/8:w" -- "$programs/prog_libdata" 5
  count "$tmp/out" '"event":"hit"' 5 "$m: library address: hits"
  has "$tmp/out" "at=$libvar n=5" "$m: library address: program output"
done

# Golden: the human format of a small run (addresses repeat: ASLR is off as in gdb; times vary;
# --emulate-accesses: the same status lines whatever else on the machine has perf events open).
run 0 "golden human" watch --software --emulate-accesses target:w -- "$programs/prog_writer" 3
sed -E 's/^ +[0-9]+\.[0-9]+  tid [0-9]+/TIME  tid TID/' "$tmp/out" >"$tmp/human"
sed -E "s#$programs#PROGRAMS#" "$tmp/err" >>"$tmp/human"
if ! diff -u "$golden/writer_human.expected" "$tmp/human" >&2; then
  echo "FAIL: golden human output differs" >&2
  fail=1
fi

# Errors: usage (exit 2) with the position or near matches; targets that cannot be traced (1).
run 2 "bad expression" watch mem:0x1000/0 -- "$programs/prog_writer"
has "$tmp/err" "column" "bad expression names the column"
run 2 "unknown symbol" watch tagret -- "$programs/prog_writer"
has "$tmp/err" "did you mean: target" "near matches"
run 2 "no target" watch target
has "$tmp/err" "target:" "missing target"
run 2 "two targets" watch -p 1 target -- "$programs/prog_writer"
run 2 "bad condition" watch --if 'new=5' target -- "$programs/prog_writer"
has "$tmp/err" "column" "bad condition names the column"
run 1 "missing command" watch target -- /nonexistent/prog
has "$tmp/err" "command" "missing command named"
run 1 "no such process" watch -p 999999999 target

# -o FILE / --output FILE: hwarb's report (hits, JSON lines, tables, summaries) goes to FILE; the
# program's own output stays alone on stdout, hwarb's status lines on stderr.
for mode in "" "--software"; do
  m=${mode:-default}
  rm -f "$tmp/report"
  run 0 "$m: -o json" watch $mode --json -o "$tmp/report" target:w -- "$programs/prog_writer" 10
  [[ $(cat "$tmp/out") == "sum=100" ]] || { echo "FAIL: $m: -o: stdout is not the program's alone" >&2; sed 's/^/  | /' "$tmp/out" >&2; fail=1; }
  count "$tmp/report" '"event":"hit"' 10 "$m: -o: hits in the file"
  count "$tmp/report" '^\{"event":"summary","hits":\{"target:w":10\}' 1 "$m: -o: summary in the file"
  count "$tmp/report" 'sum=' 0 "$m: -o: no program output in the file"
  count "$tmp/err" ' mode' 1 "$m: -o: the status line stays on stderr"
  count "$tmp/err" '"event"' 0 "$m: -o: no report on stderr"
  run 0 "$m: --output human" watch $mode --output "$tmp/report" target:w -- "$programs/prog_writer" 3
  [[ $(cat "$tmp/out") == "sum=9" ]] || { echo "FAIL: $m: --output: stdout is not the program's alone" >&2; fail=1; }
  count "$tmp/report" '  tid [0-9]+  set_target\+0x0 .* target:w 0x[0-9a-f]+ w  [0-9] -> [0-9]$' 3 "$m: --output: hit lines in the file"
  count "$tmp/report" '^hwarb watch: 3 hits \(target:w: 3\) in ' 1 "$m: --output: summary in the file"
  count "$tmp/err" '^hwarb watch: [0-9]+ hits' 0 "$m: --output: no summary on stderr"
  run 0 "$m: stat -o" stat $mode -o "$tmp/report" slots/16:w -- "$programs/prog_threads" 4 50
  count "$tmp/report" '^ slots/16:w +all +0 +200 +0 +200$' 1 "$m: stat -o: table in the file"
  count "$tmp/out" 'slots/16' 0 "$m: stat -o: no table on stdout"
  has "$tmp/out" 'done' "$m: stat -o: program output"
done
# The report file is created before the target starts: when it cannot be, nothing runs (exit 2).
run 2 "-o unwritable" watch -o "$tmp/no/such/dir/report" target:w -- "$programs/prog_writer" 3
has "$tmp/err" "$tmp/no/such/dir/report" "-o names the file"
has "$tmp/err" "ENOENT" "-o names the error"
[[ ! -s $tmp/out ]] || { echo "FAIL: -o unwritable: the program ran" >&2; fail=1; }
run 2 "-o twice" stat -o "$tmp/a" -o "$tmp/b" target:w -- "$programs/prog_writer" 3
# A report that cannot be written (a full device, as -o FILE or as stdout) is hwarb's failure:
# exit 1, the output and the errno said on stderr at the end; the program runs to its end as it
# does unwatched (its output on stdout with -o; its status in the summary on stderr without).
for mode in "" "--software"; do
  m=${mode:-default}
  for sub in watch stat; do
    for format in "" "--json"; do
      run 1 "$m: $sub $format -o /dev/full" $sub $mode $format -o /dev/full target:w -- "$programs/prog_writer" 10
      [[ $(cat "$tmp/out") == "sum=100" ]] || { echo "FAIL: $m: $sub $format -o /dev/full: the program's output changed" >&2; sed 's/^/  | /' "$tmp/out" >&2; fail=1; }
      count "$tmp/err" "^hwarb $sub: --output /dev/full: ENOSPC: No space left on device\$" 1 "$m: $sub $format -o /dev/full: the output and the reason"
    done
    run_to /dev/full 1 "$m: $sub >/dev/full" $sub $mode target:w -- "$programs/prog_writer" 10
    count "$tmp/err" "^hwarb $sub: stdout: ENOSPC: No space left on device\$" 1 "$m: $sub >/dev/full: the output and the reason"
    count "$tmp/err" "^hwarb $sub: 10 hits \(target:w: 10\) in .*; command '.*prog_writer' exited with status 3\$" 1 "$m: $sub >/dev/full: the program's status"
  done
  run_to /dev/full 1 "$m: watch --json >/dev/full" watch $mode --json target:w -- "$programs/prog_writer" 10
  count "$tmp/err" '^hwarb watch: stdout: ENOSPC: No space left on device$' 1 "$m: watch --json >/dev/full: the output and the reason"
done

# --hardware insists on the hardware path; with --software it is a usage error.
for sub in watch stat; do
  run 2 "$sub --hardware --software" $sub --hardware --software target:w -- "$programs/prog_writer" 3
  has "$tmp/err" "--hardware and --software are exclusive" "$sub: two modes named"
done
# stat -a / -C usage errors (exit 2, nothing run).
run 2 "stat -a -p" stat -a -p 1 target:w
has "$tmp/err" "not -p or -t" "stat -a -p: why"
run 2 "stat -a --software" stat -a --software target:w -- "$programs/prog_writer" 3
has "$tmp/err" "cannot count CPUs" "stat -a --software: why"
run 2 "stat -a :r" stat -a target:r -- "$programs/prog_writer" 3
has "$tmp/err" ":r cannot be counted on CPUs" "stat -a :r: why"
run 2 "stat -C bad" stat -C x target:w -- "$programs/prog_writer" 3
has "$tmp/err" "-C: cpus: 'x' is not a CPU list" "stat -C bad: the field"
run 2 "stat -C offline" stat -C 1023 target:w -- "$programs/prog_writer" 3
has "$tmp/err" "CPU 1023 is not online" "stat -C offline: why"
run 2 "stat --user without -a" stat --user target:w -- "$programs/prog_writer" 3
has "$tmp/err" "only with -a or -C" "stat --user: why"
if "$hwarb" probe --json | grep -q '"hits_delivered":true'; then
  run 0 "watch --hardware" watch --hardware --json target:w -- "$programs/prog_writer" 10
  count "$tmp/out" '"event":"hit"' 10 "watch --hardware hits"
  has "$tmp/out" '"mode":"hardware"' "watch --hardware mode"
  run 0 "stat --hardware" stat --hardware --json target:w -- "$programs/prog_writer" 10
  has "$tmp/out" '"hits":{"target:w":10}' "stat --hardware counts"
  has "$tmp/out" '"mode":"hardware"' "stat --hardware mode"
  # More debug registers than a thread has: refused (exit 1) with the reason, nothing run.
  run 1 "watch --hardware over the slots" watch --hardware rec+1/15:w target:w -- "$programs/prog_writer" 3
  has "$tmp/err" "--hardware" "over the slots: the flag named"
  has "$tmp/err" "debug registers" "over the slots: the reason"
  [[ $(grep -c 'sum=' "$tmp/out") -eq 0 ]] || { echo "FAIL: --hardware refused, yet the program ran" >&2; fail=1; }
  # Without --hardware, each expression is placed on its own: registers in order while the
  # arbiter admits them, the rest software; one on a page the software path protects goes with
  # it. near (its own page) keeps its register; far's three share a page, and far+16/16 needs 2
  # registers when 1 is left: all three software. Every hit once, with its values.
  run 0 "mixed" watch --json near/4:w far/4:w far+8/4:w far+16/16:w far+64/8:w -- "$programs/prog_two_pages"
  # (", each access made by the CPU" follows when another process holds breakpoints meanwhile.)
  has "$tmp/out" '"mode":"mixed","method":"1 debug registers + page protection (1 page)' "mixed: method"
  has "$tmp/err" 'software: far/4:w: a page shared with far+16/16:w, which is software' "mixed: a shared page named"
  has "$tmp/err" 'far+16/16:w: it needs 2 debug registers; 3 of 4 are held by other watches' "mixed: the arbiter's refusal"
  count "$tmp/out" '"event":"hit","expr":"near/4:w"' 7 "mixed: near's hits (register)"
  count "$tmp/out" '"event":"hit","expr":"far/4:w"' 6 "mixed: far's hits (software)"
  count "$tmp/out" '"expr":"near/4:w".*"old":"0x6","new":"0x3e8"' 1 "mixed: the new thread's write"
  count "$tmp/out" '"expr":"far/4:w".*"old":"0x69","new":"0x6a"' 1 "mixed: far's values"
  count "$tmp/out" '^near=1000 far=106$' 1 "mixed: the program's output"
  run 0 "stat mixed" stat --json near/4:r far/4:w far+8/16:w far+64/16:w -- "$programs/prog_two_pages"
  has "$tmp/out" '"hits":{"near/4:r":1,"far/4:w":6,"far+8/16:w":0,"far+64/16:w":0},"mode":"mixed"' "stat mixed: counts"
else
  refusal_wanted=1
  for sub in watch stat; do
    run 1 "$sub --hardware without hits" $sub --hardware target:w -- "$programs/prog_writer" 3
    has "$tmp/err" "--hardware" "$sub --hardware refusal names the flag"
    has "$tmp/err" "hardware" "$sub --hardware refusal says why"
    [[ ! -s $tmp/out ]] || { echo "FAIL: $sub --hardware refused, yet the program ran" >&2; fail=1; }
  done
  refusal_wanted=0
  skip_case hits "--hardware runs, one register for duplicates" "this machine does not deliver breakpoint hits"
fi

# --count takes a whole number of hits: anything else is a usage error naming --count.
for c in -1 "" 18446744073709551616 x 3x 0x; do
  run 2 "--count '$c'" watch --count "$c" target:w -- "$programs/prog_writer" 3
  has "$tmp/err" "--count" "--count '$c' named"
  [[ ! -s $tmp/out ]] || { echo "FAIL: --count '$c': the program ran" >&2; fail=1; }
done
run 0 "--count 0x2" watch --json --count 0x2 target:w -- "$programs/prog_writer" 3
count "$tmp/out" '"event":"hit"' 2 "--count 0x2"
# A range past the end of the address space.
run 2 "wrapping range" watch 'mem:0xffffffffffffffff/8' -- "$programs/prog_writer" 3
has "$tmp/err" "wraps" "wrapping range: the reason"
run 2 "wrapping default length" watch 'mem:0xfffffffffffffffe:w' -- "$programs/prog_writer" 3
run 2 "wrapping symbol offset" watch 'target-0x600000000000:w' -- "$programs/prog_writer" 3
has "$tmp/err" "wraps" "wrapping symbol offset: the reason"

# Execute watches only on instruction boundaries of code, in both modes. set_target's first
# instruction (a store, or endbr64) is longer than one byte; its return is a boundary inside it,
# found from the branch it takes (trace).
run 0 "set_target's return" trace --software --json --filter set_target -- "$programs/prog_writer" 3
ret=$(grep -m1 -oE '"from_sym":"set_target\+0x[0-9a-f]+' "$tmp/out" | sed 's/.*"from_sym":"//')
[[ -n $ret ]] || { echo "FAIL: no branch from set_target traced" >&2; fail=1; }
for mode in "" "--software"; do
  m=${mode:-default}
  run 2 "$m: data:x" watch $mode 'target:x' -- "$programs/prog_writer" 3
  has "$tmp/err" "not code" "$m: data:x refused"
  [[ ! -s $tmp/out ]] || { echo "FAIL: $m: data:x: the program ran" >&2; fail=1; }
  run 2 "$m: set_target+1:x" watch $mode 'set_target+1:x' -- "$programs/prog_writer" 3
  has "$tmp/err" "instruction boundary" "$m: set_target+1:x refused"
  run 2 "$m: stat rec:x" stat $mode 'rec+4:x' -- "$programs/prog_writer" 3
  has "$tmp/err" "not code" "$m: stat of data as code refused"
  run 0 "$m: $ret:x" watch $mode --json "$ret:x" -- "$programs/prog_writer" 3
  count "$tmp/out" '"access":"x"' 3 "$m: an instruction boundary inside a function"
done

# One register for identical expressions; each expression still reported.
for mode in "" "--software"; do
  m=${mode:-default}
  run 0 "$m: duplicates" watch $mode --json target:w target:w target/4:w target:w target:w -- "$programs/prog_writer" 3
  count "$tmp/out" '"event":"hit","expr":"target:w"' 12 "$m: duplicates: hits of target:w"
  count "$tmp/out" '"event":"hit","expr":"target/4:w"' 3 "$m: duplicates: hits of target/4:w"
  if [[ -z $mode ]] && "$hwarb" probe --json | grep -q '"hits_delivered":true'; then
    has "$tmp/out" '"mode":"hardware","method":"1 debug registers"' "duplicates share one register"
  fi
done

# Attach to a running process, then Ctrl-C: it runs on, its text identical to the file.
"$programs/prog_spin" >"$tmp/spin.out" &
spin=$!
for _ in $(seq 50); do grep -q ready "$tmp/spin.out" && break; sleep 0.05; done
"$hwarb" watch --software --json ticks:w tick:x -p "$spin" >"$tmp/attach.out" 2>"$tmp/attach.err" &
watcher=$!
handles "$watcher" 2
sleep 0.7
kill -INT "$watcher"
wait "$watcher"
rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: attach + SIGINT: exit $rc" >&2; cat "$tmp/attach.err" >&2; fail=1; }
has "$tmp/attach.out" '"event":"summary"' "attach summary"
has "$tmp/attach.out" '"interrupted":true' "attach interrupted"
# One tick() call per write; Ctrl-C may land between a call and its write.
calls=$(grep -c '"access":"x"' "$tmp/attach.out")
writes=$(grep -c '"access":"w"' "$tmp/attach.out")
if ((calls < 10 || calls - writes < 0 || calls - writes > 1)); then
  echo "FAIL: attach: $calls tick() calls for $writes writes" >&2
  fail=1
fi
sleep 0.1
state=$(awk '{print $3}' "/proc/$spin/stat")
[[ $state == S || $state == R ]] || { echo "FAIL: target state '$state' after detach" >&2; fail=1; }
grep -q TracerPid:.0 "/proc/$spin/status" || { echo "FAIL: target still traced" >&2; fail=1; }
python3 "$(dirname "${BASH_SOURCE[0]}")/text_matches.py" "$spin" "$programs/prog_spin" || fail=1
kill -9 "$spin"
wait "$spin" 2>/dev/null
spin=

exit $fail
