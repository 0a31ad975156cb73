# bench/gdb_bench_lib.sh — what bench/gdb_bench.sh and bench/gdbserver_bench.sh share: the gdb
# command file that counts a watchpoint's stops, and the timed run of one configuration. Sourced,
# not run. The caller sets `limit` (seconds a run may take) and `pin` (an array: empty, or
# `taskset -c C`).

# gdb_watch_script TAG START EXPR [SETTING]: a gdb command file that runs the program to main,
# sets `watch EXPR`, counts every stop in Python (a breakpoint command that continues silently)
# and prints "TAG_hits=N" at the end. START is `run` (native: the program and its arguments are on
# gdb's command line) or `target remote | SERVER ...` (then `continue`); SETTING is one more gdb
# command before it (e.g. `set can-use-hw-watchpoints 0`).
gdb_watch_script() {
  local tag="$1" start="$2" expr="$3" setting="${4:-}" go=continue
  [[ "$start" == run ]] && go=run
  cat <<EOF
set pagination off
set confirm off
set sysroot /
$setting
python bench_hits = 0
EOF
  [[ "$start" != run ]] && echo "$start"
  cat <<EOF
break main
$go
watch $expr
commands
silent
python bench_hits += 1
continue
end
continue
python print("${tag}_hits=%d" % bench_hits)
EOF
}

# run_timed LABEL DIR KEY REP CMD...: prints LABEL on stderr, runs CMD (stdin from /dev/null,
# bounded by $limit, under $pin) with its stdout and stderr in DIR/KEY.REP.{out,err}, and appends
# "KEY REP RC MICROSECONDS" (wall time from this shell) to DIR/manifest.
run_timed() {
  local label="$1" dir="$2" key="$3" rep="$4" rc=0
  shift 4
  echo "$label" >&2
  local t0="$EPOCHREALTIME"
  timeout -k 5 "$limit" "${pin[@]}" "$@" >"$dir/$key.$rep.out" 2>"$dir/$key.$rep.err" </dev/null || rc=$?
  local t1="$EPOCHREALTIME"
  echo "$key $rep $rc $((${t1/./} - ${t0/./}))" >>"$dir/manifest"
}
