#!/usr/bin/env bash
# `hwarb stat -a`, `hwarb watch -a` and `-C LIST` on real processes: CPU-wide breakpoints, one per
# CPU and register: watch_cpus_test.sh HWARB PROGRAMS_DIR
# While these run they hold debug registers on every CPU, which every other user on the machine
# (another test's probe or watch) then lacks: alone (RUN_SERIAL). Where breakpoint hits are not
# delivered, `stat -a` is refused with the reason.
set -uo pipefail
hwarb=$1
programs=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

if ! "$hwarb" probe --json | grep -q '"hits_delivered":true'; then
  skip_case hits "stat -a counts, watch -a hits" "this machine does not deliver breakpoint hits"
  run 1 "stat -a without hits" stat -a target:w -- "$programs/prog_writer" 3
  has "$tmp/err" "system-wide counting has no software path" "stat -a refusal says why"
  [[ $fail -eq 0 ]] && echo "watch_cpus_test: all cases passed"
  exit $fail
fi

# stat -a / -C: per-CPU counting events. prog_syscalls has the kernel write `buffer` (read(2)
# from a pipe): counted with -a (user and kernel), not with --user, not by a process's watch.
run 0 "stat -a: kernel writes" stat -a --json buffer/8:w -- "$programs/prog_syscalls"
count "$tmp/out" '^kernel!$' 1 "stat -a: the program's output"
python3 - "$tmp/out" <<'PY' || { echo "FAIL: stat -a: kernel writes not counted" >&2; fail=1; }
import json, os, sys
line = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
s = json.loads(line)
c = s["counts"]["buffer/8:w"]
cpus = sorted(int(x) for x in open("/sys/devices/system/cpu/online").read().replace("-", " ").split()) 
assert s["kernel"] is True and s["target"]["exit"] == 0, s
assert c["total"] >= 1 and c["total"] == sum(c["cpus"].values()), c
assert len(c["cpus"]) == len(s["cpus"]) and s["cpus"][0] == 0, s
PY
run 0 "stat -a --user" stat -a --user --json buffer/8:w -- "$programs/prog_syscalls"
has "$tmp/out" '"kernel":false' "stat -a --user: user only"
has "$tmp/out" '"total":0,' "stat -a --user: the kernel's writes not counted"
run 0 "stat -C 0" stat -C 0 target:w -- "$programs/prog_writer" 20
count "$tmp/out" '^ target:w +0x[0-9a-f]+ +0 ' 1 "stat -C 0: one CPU row"
count "$tmp/out" '^ target:w +0x[0-9a-f]+ +1 ' 0 "stat -C 0: no other CPU"
has "$tmp/err" 'on CPUs 0, user and kernel' "stat -C 0: the method"
# Without a command: until SIGINT; symbols from /proc/kallsyms.
timeout -s INT 0.5 "$hwarb" stat -a --json mem:0x7ffe0000/8:w >"$tmp/out" 2>"$tmp/err"
has "$tmp/out" '"mem:0x7ffe0000/8:w":{"address":"0x7ffe0000","len":8,"total":' "stat -a until SIGINT: a summary"
run 1 "stat -a on kernel text" stat -a schedule:x -- true
has "$tmp/err" 'kernel space, where x86 takes no execute breakpoint' "stat -a: the refusal explained"
has "$tmp/err" "schedule:x" "stat -a: the refused expression named"
run 2 "stat -a unknown symbol" stat -a no_such_symbol_anywhere:w
has "$tmp/err" "no_such_symbol_anywhere" "stat -a: kallsyms looked up"
# watch -a: each hit sampled on its CPU (no values): the kernel's copy into `buffer` named by
# its kernel symbol; the program's own writes by its symbols (other processes at the same
# address, e.g. a parallel test, are counted too: only the target's pid is checked).
run 0 "watch -a: kernel writes" watch -a --json buffer/8:w -- "$programs/prog_syscalls"
python3 - "$tmp/out" <<'PY' || { echo "FAIL: watch -a: kernel hits" >&2; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
hits = [r for r in recs if r["event"] == "hit"]
summary = recs[-1]
pid = summary["target"]["pid"]
mine = [h for h in hits if h["pid"] == pid]
assert mine and all(h["kernel"] and h["access"] == "w" and h["symbol"] and not h["symbol"].startswith("0x") for h in mine), mine
assert summary["hits"]["buffer/8:w"] == len(hits) and summary["target"]["exit"] == 0, summary
PY
run 0 "watch -a: user writes" watch -a --json target:w -- "$programs/prog_writer" 5
python3 - "$tmp/out" <<'PY' || { echo "FAIL: watch -a: user hits" >&2; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
pid = recs[-1]["target"]["pid"]
mine = [r for r in recs if r["event"] == "hit" and r["pid"] == pid]
assert len(mine) == 5, mine
assert all(not h["kernel"] and h["symbol"].startswith("set_target") for h in mine), mine
PY
run 2 "watch -a --count" watch -a --count 3 target:w -- "$programs/prog_writer" 3
has "$tmp/err" "--if and --count need each hit's values" "watch -a --count: why"
# -a: a report that cannot be written is exit 1 with the output and the reason; the program
# runs to its end.
for sub in watch stat; do
  run 1 "$sub -a -o /dev/full" $sub -a -o /dev/full target:w -- "$programs/prog_writer" 5
  [[ $(cat "$tmp/out") == "sum=25" ]] || { echo "FAIL: $sub -a -o /dev/full: the program's output changed" >&2; fail=1; }
  count "$tmp/err" "^hwarb $sub: --output /dev/full: ENOSPC: No space left on device\$" 1 "$sub -a -o /dev/full: the output and the reason"
  run_to /dev/full 1 "$sub -a >/dev/full" $sub -a target:w -- "$programs/prog_writer" 5
  count "$tmp/err" "^hwarb $sub: stdout: ENOSPC: No space left on device\$" 1 "$sub -a >/dev/full: the output and the reason"
  has "$tmp/err" "prog_writer' exited with status 3" "$sub -a >/dev/full: the program's status"
done

[[ $fail -eq 0 ]] && echo "watch_cpus_test: all cases passed"
exit $fail
