#!/usr/bin/env bash
# Breakpoint conditions evaluated by the stub (ConditionalBreakpoints+, gdb's agent expressions),
# with Debian's gdb as the client against Debian's gdbserver (the reference) and `hwarb gdbserver`
# in both modes: gdbserver_conditions_test.sh HWARB PROGRAMS_DIR
# tests/programs/gdb_threads.c `count`: four threads call counted(who, n) 1000 times each.
#  - `break counted if who == 2 && n == 500` with `set breakpoint condition-evaluation target`:
#    gdb stops once, in thread 2's call 500, and the stub sends exactly one breakpoint stop
#    (gdb's remote log: one T05 ... swbreak) — the 3999 false hits cost no round trip;
#  - a condition that reads memory (one stop sent too) and one gdb cannot compile for the agent
#    (floating point) are still right: the second is evaluated by gdb at each of the 4000 hits,
#    stepping each thread over the breakpoint it takes out, and a thread created meanwhile must
#    stay stopped (run then, it made all its calls unseen: no stop in 3 runs of 6 before);
#  - then `delete` and `continue`: the program counts its 4000 calls and exits 0, as unwatched;
#  - an agent-style dprintf (`set dprintf-style agent`, BreakpointCommands+) on counted() with
#    the condition `n % 250 == 0`: the stub prints its 16 lines (4 threads x n = 0, 250, 500,
#    750) on its own output, and sends gdb no stop at all (gdbserver prints on its standard
#    output, the stdio connection there, so only gdb's story is compared with it).
# gdb's story (the stop, the values printed, the exit) must equal gdbserver's.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_gdb_threads

# run NAME SERVER COMMANDS...: gdb in batch mode against SERVER (a command line that takes the
# program after it), with the remote protocol logged to $tmp/NAME.log.
run() {
  local name=$1 server=$2 c
  shift 2
  local gdb_args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off'
                  -ex 'set width 0' -ex "target remote | $server $prog count"
                  -ex 'set breakpoint condition-evaluation target'
                  -ex "set logging file $tmp/$name.log" -ex 'set logging redirect off'
                  -ex 'set logging debugredirect on' -ex 'set logging enabled on' -ex 'set debug remote 1')
  for c in "$@"; do gdb_args+=(-ex "$c"); done
  timeout 300 gdb "${gdb_args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
story() {
  grep -E '^(Thread [0-9.]+ .*hit |\$[0-9]+ = |\[Inferior|warning: Target does not support)' "$1" |
    sed -E 's/(process|Thread|pid) [0-9]+(\.[0-9]+)?/\1 N/g; s/Thread N "[^"]*"/Thread N/;
            s/who=who@entry=[0-9]+/who=W/'
}
# stops NAME: the stops at the breakpoint the stub sent (each T05 in the remote log whose pc,
# register 10 expedited little-endian, is the address gdb gave "Breakpoint 1" or "Dprintf 1").
stops() {
  local addr le
  addr=$(sed -nE 's/^(Breakpoint|Dprintf) 1 at 0x([0-9a-f]*):.*/\2/p' "$tmp/$1.out" | head -1)
  [[ -n $addr ]] || { echo "no-breakpoint-address"; return; }
  le=$(printf '%016x' "0x$addr" | sed 's/../& /g' | awk '{ for (i = NF; i > 0; i--) printf "%s", $i }')
  grep -cE "Packet received: T05.*;10:$le;" "$tmp/$1.log"
}

cases=(sw ptr call dprintf)
declare -A cmds_of=(
  [dprintf]='set dprintf-style agent|dprintf counted,"hit who=%d n=%d\n", who, n|condition 1 n % 250 == 0|continue'
  [sw]="break counted if who == 2 && n == 500|continue|p who|p n|delete|continue"
  [ptr]="break counted if n == 700 && *(int *)&calls > 100|continue|p n|delete|continue"
  [call]="break counted if n * 1.0 == 900.0 && who == 3|continue|p who|p n|delete|continue"
)
declare -A stops_of=([sw]=1 [ptr]=1 [call]="" [dprintf]=0)
for c in "${cases[@]}"; do
  IFS='|' read -ra cmds <<<"${cmds_of[$c]}"
  if command -v gdbserver >/dev/null; then
    run "$c-gdbserver" "gdbserver -" "${cmds[@]}"
    story "$tmp/$c-gdbserver.out" >"$tmp/$c-gdbserver.story"
  else
    skip_case - "$c: compared with Debian's gdbserver" "Debian's gdbserver is not installed"
  fi
  for mode in "" "--software"; do
    m=${mode:-default}
    run "$c$m" "$hwarb gdbserver $mode --stdio --" "${cmds[@]}"
    story "$tmp/$c$m.out" >"$tmp/$c$m.story"
    grep -q '^calls=4000$' "$tmp/$c$m.err" ||
      bad "$m: $c: the program did not count its 4000 calls: $(tail -3 "$tmp/$c$m.err")"
    grep -q '^\[Inferior 1 (process [0-9]*) exited normally\]' "$tmp/$c$m.out" ||
      bad "$m: $c: the program did not exit normally: $(tail -3 "$tmp/$c$m.out")"
    if grep -q 'does not support breakpoint condition evaluation' "$tmp/$c$m.out" "$tmp/$c$m.err"; then
      bad "$m: $c: gdb found no target-side condition evaluation"
    fi
    if [[ -n ${stops_of[$c]} ]]; then
      n=$(stops "$c$m")
      [[ $n == "${stops_of[$c]}" ]] ||
        bad "$m: $c: $n breakpoint stops sent to gdb, ${stops_of[$c]} expected (the false conditions are the stub's to evaluate)"
    fi
    if [[ -f $tmp/$c-gdbserver.story ]] && ! diff -u "$tmp/$c-gdbserver.story" "$tmp/$c$m.story" >"$tmp/$c$m.diff"; then
      bad "$m: $c: gdb's story differs from gdbserver's (- gdbserver, + hwarb):"
      sed 's/^/  | /' "$tmp/$c$m.diff" >&2
    fi
  done
done
# The values gdb printed at the stop: thread 2's call 500, call 700, thread 3's call 900.
for m in default --software; do
  grep -qx '\$1 = 2' "$tmp/sw$m.out" && grep -qx '\$2 = 500' "$tmp/sw$m.out" ||
    bad "$m: sw: the stop is not thread 2's call 500: $(grep '^\$' "$tmp/sw$m.out" | tr '\n' ' ')"
  grep -qx '\$1 = 700' "$tmp/ptr$m.out" || bad "$m: ptr: the stop is not call 700"
  grep -qx '\$1 = 3' "$tmp/call$m.out" && grep -qx '\$2 = 900' "$tmp/call$m.out" ||
    bad "$m: call: the stop is not thread 3's call 900"
  # Each of the 16 once, and nothing else.
  n=$(grep -E '^hit who=[0-3] n=(0|250|500|750)$' "$tmp/dprintf$m.err" | sort -u | wc -l)
  all=$(grep -c '^hit' "$tmp/dprintf$m.err")
  [[ $n == 16 && $all == 16 ]] ||
    bad "$m: dprintf: $n of the 16 lines printed by the stub, $all lines in all"
done
exit $fail
