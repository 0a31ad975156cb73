#!/usr/bin/env bash
# `hwarb watch`, `stat` and `trace` with names as C++ source spells them, on prog_names:
# watch_names_test.sh HWARB PROGRAMS_DIR
# Qualified names, static members, a template's static member, an anonymous namespace (spelt out
# and left out), struct-array members, a two-dimensional element, a member through a pointer:
# every write counted exactly, spawned and attached, in the default mode and with --software
# (and a thread_local written by 4 threads, spawned);
# hits named by demangled symbols; trace --filter/--start with C++ names; errors (exit 2) that
# say what a name is (a local, a thread-local as code or with a member, a member that does not
# exist, an index past the end) and, for a script or a program that execs another, where an
# unknown name was looked up.
set -uo pipefail
hwarb=$1
programs=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"
prog="$programs/prog_names"
rounds=10

# Each expression and the writes prog_names makes to what it names (one per round).
exprs=(
  'ns::g_cfg.limits[2].max:w'
  'ns::g_cfg.limits[1].min:w'
  'ns::Counter::total:w'
  'ns::Box<int>::count:w'
  '(anonymous namespace)::hidden:w'
  'hidden:w'
  'g_matrix[1][2]:w'
  'g_cfg_ptr->limits[2].max:w'
  '(*g_cfg_ptr).limits[1].min:w'
  'g_shape.mode:w'
  'g_counter.value:w'
)

check_counts() {  # check_counts FILE DESCRIPTION: every expression has `rounds` hits
  python3 - "$1" "$rounds" "${exprs[@]}" <<'PY' || { echo "FAIL: $2: counts" >&2; fail=1; }
import json, sys
path, rounds, exprs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
recs = [json.loads(l) for l in open(path) if l.startswith("{")]
summary = [r for r in recs if r["event"] == "summary"][-1]
bad = {e: summary["hits"].get(e) for e in exprs if summary["hits"].get(e) != rounds}
assert not bad, f"expected {rounds} hits each, got {bad}"
for e in exprs:
    writes = sum(v["writes"] for k, v in summary["threads"].items() if k.rsplit("@", 1)[0] == e)
    assert writes == rounds, (e, writes)
assert summary["target"]["exit"] == 0, summary
PY
}

for mode in "" "--software"; do
  m=${mode:-default}
  # 1. Spawned: every write of every name, counted exactly.
  run 0 "$m: stat" stat $mode --json "${exprs[@]}" -- "$prog" $rounds
  check_counts "$tmp/out" "$m: stat"
  has "$tmp/out" "total=$rounds rounds=$rounds" "$m: program output"
  has "$tmp/err" "note: g_cfg_ptr->limits[2].max:w: 'g_cfg_ptr' (Config*) was read once" \
    "$m: the pointer note"
  # The thread_local its 4 threads write (created while the others write): each its own copy,
  # every write counted, beside the names above.
  run 0 "$m: stat thread-local" stat $mode --json 't_local:w' 'ns::Counter::total:w' -- "$prog" 50
  python3 - "$tmp/out" <<'PY' || { echo "FAIL: $m: thread-local counts" >&2; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
summary = [r for r in recs if r["event"] == "summary"][-1]
assert summary["hits"].get("t_local:w") == 200, summary["hits"]
assert summary["hits"].get("ns::Counter::total:w") == 50, summary["hits"]
per = sorted(v["writes"] for k, v in summary["threads"].items() if k.rsplit("@", 1)[0] == "t_local:w")
assert per == [50, 50, 50, 50], per
PY
  # 2. Hits are named by demangled symbols; an execute watch on a C++ function.
  run 0 "$m: watch" watch $mode --json 'ns::Counter::total:w' 'ns::Counter::bump():x' -- "$prog" 3
  count "$tmp/out" '"expr":"ns::Counter::total:w".*"symbol":"ns::Counter::bump\(\)\+0x[0-9a-f]+ \(names.cpp:[0-9]+\)"' 3 "$m: demangled hit symbol"
  count "$tmp/out" '"expr":"ns::Counter::bump\(\):x".*"access":"x"' 3 "$m: exec hits"
  count "$tmp/out" '_ZN2ns' 0 "$m: no mangled names"
  run 0 "$m: watch human" watch $mode 'ns::Counter::total:w' -- "$prog" 2
  count "$tmp/out" ' ns::Counter::bump\(\)\+0x[0-9a-f]+ \(names.cpp:[0-9]+\)  ns::Counter::total:w ' 2 "$m: human hit symbol"
  # 3. Typed values: old -> new in the object's type (text), "value" beside the raw bytes (JSON).
  run 0 "$m: typed" watch $mode --json g_shape.mode:w g_shape.on:w g_shape.ratio:w \
    g_shape.delta:w ns::g_cfg.name:w 'ns::g_cfg.limits[1].min:w' -- "$prog" 3
  python3 - "$tmp/out" <<'PY' || { echo "FAIL: $m: typed values" >&2; fail=1; }
import json, sys
hits = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"event":"hit"')]
def values(expr):
    return [(h["value"]["old"], h["value"]["new"]) for h in hits if h["expr"] == expr]
assert values("g_shape.mode:w") == [("kOff", "kOn"), ("kOn", "kAuto"), ("kAuto", "kOff")], values("g_shape.mode:w")
assert values("g_shape.on:w") == [(False, True), (True, False), (False, True)], values("g_shape.on:w")
assert values("g_shape.ratio:w") == [(0, 0.5), (0.5, 1), (1, 1.5)], values("g_shape.ratio:w")
assert values("g_shape.delta:w") == [(0, -1), (-1, -2), (-2, -3)], values("g_shape.delta:w")
assert values("ns::g_cfg.limits[1].min:w") == [(0, -1), (-1, -2), (-2, -3)]
name = values("ns::g_cfg.name:w")
assert name and name[0][0] == "" and name[-1][1] == "names", name
typed = [h for h in hits if h["expr"] == "g_shape.delta:w"]
assert typed[0]["old"] == "0x0" and typed[0]["new"] == "0xffff", typed[0]
assert typed[0]["value"]["type"] == "short int", typed[0]
PY
  run 0 "$m: typed human" watch $mode g_shape.delta:w g_shape.mode:w -- "$prog" 2
  count "$tmp/out" ' g_shape.delta:w 0x[0-9a-f]+ w  0 -> -1$' 1 "$m: human signed"
  count "$tmp/out" ' g_shape.delta:w 0x[0-9a-f]+ w  -1 -> -2$' 1 "$m: human signed"
  count "$tmp/out" ' g_shape.mode:w 0x[0-9a-f]+ w  kOn -> kAuto$' 1 "$m: human enum"
done

# 4. Attached: the same names in a running program (waiting for SIGUSR1 before its writes).
for mode in "" "--software"; do
  m=${mode:-default}
  "$prog" $rounds wait >"$tmp/names.out" &
  spin=$!
  for _ in $(seq 100); do grep -q ready "$tmp/names.out" && break; sleep 0.05; done
  "$hwarb" stat $mode --json -p "$spin" "${exprs[@]}" >"$tmp/attach.out" 2>"$tmp/attach.err" &
  watcher=$!
  # The watches are armed once the mode line is printed.
  for _ in $(seq 400); do grep -qs "mode" "$tmp/attach.err" && break; sleep 0.05; done
  kill -USR1 "$spin"
  wait "$watcher"
  rc=$?
  wait "$spin" 2>/dev/null
  spin=
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: $m: attach: exit $rc" >&2
    sed 's/^/  err: /' "$tmp/attach.err" >&2
    fail=1
  fi
  check_counts "$tmp/attach.out" "$m: attach"
  has "$tmp/names.out" "total=$rounds rounds=$rounds" "$m: attach: program output"
done

# 5. trace --filter and --start with C++ names (software branch tracing works everywhere).
run 0 "trace --filter C++" trace --software --json --filter 'ns::Counter::bump' -- "$prog" 3
python3 - "$tmp/out" <<'PY' || { echo "FAIL: trace --filter C++" >&2; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
branches = [r for r in recs if r["event"] == "branch"]
assert branches, "no branches"
assert all(b["from_sym"].startswith("ns::Counter::bump()+0x") for b in branches), branches[:3]
PY
run 0 "trace --start C++" trace --software --json --start 'ns::Counter::bump()' -- "$prog" 1
python3 - "$tmp/out" <<'PY' || { echo "FAIL: trace --start C++" >&2; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
branches = [r for r in recs if r["event"] == "branch"]
assert branches and branches[0]["from_sym"].startswith("ns::Counter::bump()+0x"), branches[:2]
PY
run 0 "trace --filter mangled" trace --software --json --filter _ZN2ns7Counter4bumpEv -- "$prog" 1
has "$tmp/out" '"from_sym":"ns::Counter::bump()+0x' "trace --filter mangled: demangled output"

# 6. Errors that say what a name is: exit 2, the code, nothing run.
err_case() {  # err_case DESCRIPTION EXPR TEXT...: exit 2 and each TEXT on stderr
  local what=$1 expr=$2
  shift 2
  run 2 "$what" watch "$expr" -- "$prog" 1
  for text in "$@"; do has "$tmp/err" "$text" "$what"; done
  [[ ! -s $tmp/out ]] || { echo "FAIL: $what: the program ran" >&2; fail=1; }
}
err_case "local" 'local_rounds:w' "ENOENT" "'local_rounds' is a local variable of main (names.cpp:" \
  "hwarb gdbserver"
err_case "thread-local as code" 't_local:x' "EINVAL" "a thread-local variable is data, not code"
err_case "member of a thread-local" 't_local.x:w' "EINVAL" \
  "a thread-local is watched by its name alone"
err_case "no such member" 'ns::g_cfg.limits[2].maxx:w' "ENOENT" \
  "member: 'ns::g_cfg.limits[2]' (Limit) has no member 'maxx'; did you mean: max"
err_case "index past the end" 'ns::g_cfg.limits[4].max:w' "ERANGE" \
  "index: 4 is past the end of 'ns::g_cfg.limits' (Limit[4]: 0 to 3)"
err_case "no member of a scalar" 'ns::g_cfg.flags.bits:w' "EINVAL" \
  "member: 'ns::g_cfg.flags' is a long int, not a struct, class or union"
err_case "unknown qualified name" 'ns::Counter::totl:w' "ENOENT" "did you mean: ns::Counter::total"
err_case "static member through an object" 'g_counter.total:w' "EINVAL" \
  "member: 'total' is a static member of Counter, not in 'g_counter': watch it as ns::Counter::total"
# A thread-local: each thread's own copy (tests/conformance/watch_tls_test.sh counts them).
run 0 "stat: thread-local" stat --software 't_local:w' -- "$prog" 1
has "$tmp/out" "t_local:w" "stat: thread-local"
err_case "misspelt thread-local" 't_lokal:w' "ENOENT" "did you mean: t_local (thread-local)"

# 7. Where an unknown name was looked up, when the command is not the program: a script run by
# its interpreter (#!), a program that execs another. A misspelling (near names) gets no note.
printf '#!/bin/sh\nexec "%s" "$@"\n' "$prog" >"$tmp/wrapper.sh"
chmod +x "$tmp/wrapper.sh"
run 2 "script: stat" stat 'ns::Counter::total:w' -- "$tmp/wrapper.sh" 1
has "$tmp/err" "unknown symbol 'ns::Counter::total'" "script: stat"
has "$tmp/err" "note: '$tmp/wrapper.sh' is a script (#!/bin/sh): hwarb runs its interpreter, " \
  "script: stat: the note"
has "$tmp/err" "give that program as the command" "script: stat: what to do"
run 2 "script: trace --filter" trace --filter 'ns::Counter::bump' -- "$tmp/wrapper.sh" 1
has "$tmp/err" "note: '$tmp/wrapper.sh' is a script" "script: trace --filter: the note"
run 2 "exec: stat" stat 'ns::Counter::total:w' -- env "$prog" 1
has "$tmp/err" "note: symbols are looked up in /usr/bin/env, the program started; a program it execs is not followed" \
  "exec: stat: the note"
run 2 "misspelt: no note" stat 'ns::Counter::totl:w' -- "$prog" 1
count "$tmp/err" "note:" 0 "misspelt: no note"

exit $fail
