#!/usr/bin/env bash
# `hwarb watch` and `stat` on thread-local variables (one watch per thread on its own copy), on
# prog_tls_counter: watch_tls_test.sh HWARB PROGRAMS_DIR
# In the default mode (debug registers while they last), with --software, and with --hardware
# where this machine delivers breakpoint hits (each thread's copy in a debug register of its own:
# the 5 copies of 4 threads and main fit, a register each):
#  spawn    4 threads, created after the watch began, each write their copy of tls_counter N
#           times: stat counts N for each thread and 4N in all;
#  attach   the same with the threads there before hwarb attaches (-p);
#  errno    libc's errno (a library's thread-local), set by a failing close(-1) N times in each
#           thread: N for each;
#  watch    each hit names its thread, and each thread's values are its own 1, 2, 3.
# (The program's threads start writing once all of them exist and end once all have written:
# see the note on watches changed while threads run in docs/cli.md.)
set -uo pipefail
hwarb=$1 prog=$2/prog_tls_counter n=50
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

# counts FILE EXPR WHAT: stat's table in FILE has 4 threads of $n writes of EXPR, 4n in all.
counts() {
  local file=$1 expr=$2 what=$3 rows all
  rows=$(awk -v e="$expr" '$1 == e && $2 != "all" && $4 == '"$n"' {c++} END {print c + 0}' "$file")
  all=$(awk -v e="$expr" '$1 == e && $2 == "all" {print $4}' "$file")
  if [[ $rows -ne 4 || $all != $((4 * n)) ]]; then
    bad "$what: $rows threads with $n writes and $all in all, expected 4 and $((4 * n))"
    sed 's/^/  | /' "$file" "$tmp/err" | tail -20 >&2
  fi
}

modes=("" --software)
if "$hwarb" probe --json >"$tmp/probe" 2>/dev/null && grep -q '"hits_delivered":true' "$tmp/probe"; then
  modes+=(--hardware)
else
  skip_case hits "every case (--hardware)" "$("$hwarb" probe 2>&1 | grep -m1 'hits delivered')"
fi
# tls_run DESCRIPTION ARGS...: run 0 DESCRIPTION ARGS..., but false when run_to withdrew a
# --hardware run (a counted skip: hwarb's own probe found hits lost, run after run).
tls_run() {
  run 0 "$@"
  [[ $mode != --hardware || $checks_off -eq 0 ]]
}

for mode in "${modes[@]}"; do
  m=${mode:-default}
  tls_run "$m: stat spawn" stat $mode tls_counter:w -- "$prog" 4 $n || continue
  counts "$tmp/out" tls_counter:w "$m: spawn"

  "$prog" 4 $n count 2 >"$tmp/prog.out" &
  spin=$!
  for _ in $(seq 200); do grep -qs ready "$tmp/prog.out" && break; sleep 0.05; done
  if ! tls_run "$m: stat -p" stat $mode -p "$spin" tls_counter:w; then
    kill "$spin" 2>/dev/null
    wait "$spin" 2>/dev/null
    spin=
    continue
  fi
  wait "$spin" 2>/dev/null
  spin=
  counts "$tmp/out" tls_counter:w "$m: attach"

  tls_run "$m: stat errno" stat $mode errno:w -- "$prog" 4 $n errno || continue
  counts "$tmp/out" errno:w "$m: errno"

  tls_run "$m: watch" watch $mode tls_counter:w -- "$prog" 2 3 || continue
  # "TIME  tid TID  WHERE  tls_counter:w ADDR w  OLD -> NEW": per thread, 0x1 0x2 0x3.
  got=$(awk '$2 == "tid" && $6 == "tls_counter:w" {v[$3] = v[$3] " " $NF}
             END {for (t in v) print v[t]}' "$tmp/out" | sort | uniq -c | awk '{$1 = $1; print}')
  [[ $got == "2 0x1 0x2 0x3" ]] ||
    { bad "$m: watch: each thread's values, got '$got'"; sed 's/^/  | /' "$tmp/out" >&2; }
done
exit $fail
