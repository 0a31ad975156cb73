#!/usr/bin/env bash
# Extended-remote mode (`target extended-remote`), with Debian's gdb as the client against Debian's
# gdbserver --multi (the reference) and `hwarb gdbserver --multi` in both modes, each started
# without a program: gdbserver_extended_test.sh HWARB PROGRAMS_DIR
# Two gdb sessions per server (the same commands for every server), then a second client:
#  A (breakpoints): `set remote exec-file` prog_gdb_target, `break main`, `run`, `break bump`, two
#    stops; `kill`, `run` again (a fresh process, the breakpoints re-inserted by gdb), a stop,
#    `delete`, `continue` to its exit (7); `run` a third time, `detach` at a breakpoint (the
#    program runs on to total=936); `attach PID` of a sleeping prog_ticker, `detach`.
#  B (watches): `break main`, `run`, `watch counter`, two hits (0 -> 1, 1 -> 2); `kill`, `run`:
#    gdb re-inserts the watch in the new process and it hits again (0 -> 1); `delete`,
#    `continue`: the program exits 7 with total=936, as unwatched; `run`, a hit, `detach` with
#    the watch inserted: the detached program must run on unwatched to total=936 (a protection
#    or int3 left behind would kill it or miss writes); `attach` a ticker, `watch ticks`, a hit,
#    `detach`: the ticker ends by itself (ticks=400, exit 0).
#  C (environment): `set environment HWARB_ENV_SET=from gdb`, `unset environment HWARB_ENV_GONE`
#    (which the server has), `run` /usr/bin/printenv of both: the program sees the first and not
#    the second (QEnvironmentHexEncoded, QEnvironmentUnset), and exits 1 for the missing one.
#    Programs start through the shell, as gdbserver starts them (startup-with-shell): SHLVL is
#    what gdbserver's shell makes it (bash counts itself), and a `run` of a program that does not
#    exist is the shell's "not found" on the server's stderr and gdb's "Running ... failed".
#    Before any `run`, `set architecture i386` is gdb's to make (the server describes no target
#    without a process); `set cwd ~/` runs /bin/pwd in the server's $HOME (QSetWorkingDir).
#  E (reconnect): `run` to main and `disconnect`; a second gdb connects and finds the process
#    stopped there (`info inferiors`), and `continue`s it to its exit (7).
#  D (non-stop): gdb in non-stop mode from the start connects, `run`s to main and kills: the
#    server without a process answers '?' as gdbserver does (no stop of no process, which gdb
#    would take up at the run and fail an assertion on).
#  F (several processes): `run` to main, `add-inferior`, `inferior 2`, `run` the same program
#    there (both stopped at main: gdb's inferiors 1 and 2 on one connection, multiprocess+),
#    `watch counter` in inferior 2 alone, two hits (0 -> 1, 1 -> 2), `delete`, `continue` it to
#    its exit (7) while inferior 1 stays at main, then `inferior 1` and `continue` to its exit.
#  G (interrupt): a ticker runs under gdb (inferior 1, held at main), `add-inferior`, `inferior 2`,
#    `attach` a second ticker (its own process group, as a terminal's job), `set
#    schedule-multiple on`, `continue`; a Ctrl-C (SIGINT to gdb) stops the process the server
#    last started or attached — gdbserver's SIGINT goes to that one — so gdb's current inferior
#    is 2, and the `detach` that follows lets the attached ticker go (it runs on to its end);
#    `inferior 1`, `kill`.
#  H (an interrupt owed): as G, but `inferior 1` and `continue` it alone (a short ticker): the
#    Ctrl-C during it is owed to the attached process, which the continue does not run —
#    gdbserver's SIGINT waits in that process — so inferior 1 runs to its exit; `inferior 2`,
#    `continue` then stops at once with SIGINT, and `detach` lets it go.
#  I (a breakpoint storm, then detach): gdb with target-non-stop on runs `prog_gdb_threads bump
#    10` (inferior 1: ten threads counting up forever), attaches another (inferior 2), sets a
#    breakpoint on their counting line whose condition is false (`if 0`, evaluated by the
#    server; a location in each process), `continue &` with schedule-multiple, `info threads` twice while the threads keep
#    hitting it, and `detach`es inferior 2: every request is answered in time (no "Ignoring
#    packet error" or reply taken for another), and the detached program runs on (a trap of
#    the removed breakpoint left queued would kill it).
#  Then `disconnect`, and a second gdb connects to the same server (it stays with --multi) and
#  says `monitor exit`, which ends it (exit 0).
# gdb's whole output of A and C, normalised (process ids, addresses, paths, library lines), must equal
# gdbserver's; B's too where gdbserver's hardware watchpoints hit (they never do on a machine
# that does not deliver perf breakpoint hits, where hwarb takes its software path: then B is
# checked against the hits it must show, and the comparison is a counted skip).
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_gdb_target
ticker=$P/prog_ticker
export HWARB_ENV_GONE=present  # in every server's environment: session C unsets it
export SHLVL=5                 # what a program started through bash sees as 6

# port_of FILE: the port a server said it listens on (gdbserver: "Listening on port N").
port_of() {
  local port='' _
  for _ in $(seq 600); do
    port=$(sed -n 's/.*[Ll]istening on port \([0-9]*\).*/\1/p' "$1" | head -1)
    [[ -n $port ]] && break
    sleep 0.05
  done
  echo "$port"
}
# normalise FILE: gdb's output with what differs from run to run (and between servers in ways
# that are not the protocol's: library loading, addresses, process ids, the padding after a
# process id, whose width `info inferiors` and `info threads` set from its digits, where in its
# sleep an attach
# finds the ticker, and the ticker's count when a watch of `ticks` hits: T, T+1) taken out.
normalise() {
  sed -E -e "s#$P/##g" \
    -e 's/(process|Thread|pid|LWP) [0-9]+(\.[0-9]+)?/\1 N/g' -e 's/ N +/ N /g' -e 's/  +/ /g' \
    -e 's/0x[0-9a-f]+/ADDR/g' -e 's/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/g' \
    -e 's/ in [_a-z0-9]*nanosleep[_a-z0-9]* .*/ in SLEEP/' \
    "$1" | grep -vE '^(Reading |warning: File transfers|\[Thread debugging|Using host libthread_db|\[New Thread|\[Thread .* exited|Download failed|warning: Unable to find libthread_db|warning: could not find .gnu_debugaltlink|Remote debugging using|ADDR in |[_A-Za-z0-9]*nanosleep[_a-z0-9]* \(|[0-9]+	)' |
    awk '/^Hardware watchpoint [0-9]+: ticks$/ { tick = 1 }
         tick && /^Old value = / { print "Old value = T"; next }
         tick && /^New value = / { print "New value = T+1"; tick = 0; next }
         { print }'
}
# gdb_session NAME PORT TICKER_PID COMMANDS...: one batch gdb against the server, output to NAME.out.
gdb_session() {
  local name=$1 port=$2 tick=$3 c
  shift 3
  local args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off'
              -ex 'set width 0' -ex "target extended-remote 127.0.0.1:$port"
              -ex "set remote exec-file $prog" -ex "file $prog")
  for c in "$@"; do args+=(-ex "${c//TICKER/$tick}"); done
  timeout 300 gdb "${args[@]}" >"$tmp/$name.out" 2>&1
}
# start_ticker NAME: a prog_ticker writing `ticks` 400 times, 20 ms apart; its pid in $tick.
start_ticker() {
  rm -f "$tmp/$1.tick"
  "$ticker" "$tmp/$1.tick" 400 0 20000 >"$tmp/$1.ticker" 2>&1 &
  tick=$!
  for _ in $(seq 200); do [[ -s $tmp/$1.tick ]] && break; sleep 0.02; done
}
# ticker_ended NAME PID: the ticker ran on to its own end after the detach.
ticker_ended() {
  wait "$2"
  local rc=$?
  [[ $rc -eq 0 ]] && grep -q '^ticks=400$' "$tmp/$1.ticker" ||
    bad "$1: the attached and detached ticker did not end by itself (exit $rc, '$(cat "$tmp/$1.ticker")')"
}
a_cmds=('break main' run 'break bump' continue continue kill 'info breakpoints' run continue
        delete continue 'break bump' run continue detach delete
        "file $ticker" 'attach TICKER' 'info inferiors' detach)
b_cmds=('break main' run 'watch counter' continue continue kill run continue 'p counter' delete
        continue 'break bump' run 'watch counter' continue detach delete "file $ticker"
        'attach TICKER' 'watch ticks' continue 'p ticks > 0' detach disconnect)
c_cmds=('set architecture i386' 'set architecture auto'
        'set environment HWARB_ENV_SET=from gdb' 'unset environment HWARB_ENV_GONE'
        'set remote exec-file /usr/bin/printenv' 'file /usr/bin/printenv'
        'run HWARB_ENV_SET HWARB_ENV_GONE SHLVL' 'set cwd ~/' 'set remote exec-file /bin/pwd'
        'file /bin/pwd' run 'set cwd' 'set remote exec-file /nonexistent-hwarb-program' 'run')
f_cmds=('break main' run add-inferior 'inferior 2' "set remote exec-file $prog" "file $prog" run
        'info inferiors' 'watch counter' continue continue delete continue 'inferior 1'
        'info threads' continue 'info inferiors')
# g_session NAME PORT: session G; gdb's output to NAME-g.out.
g_session() {
  local name=$1 port=$2 gdb_pid
  rm -f "$tmp/$name-g.tick" "$tmp/$name-g.tick1"
  setsid "$ticker" "$tmp/$name-g.tick" 400 0 20000 >"$tmp/$name-g.ticker" 2>&1 &
  local tick=$!
  for _ in $(seq 200); do [[ -s $tmp/$name-g.tick ]] && break; sleep 0.02; done
  gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off' \
    -ex 'set width 0' -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file $ticker" -ex "file $ticker" -ex 'break main' \
    -ex "run $tmp/$name-g.tick1 400 0 20000" -ex add-inferior -ex 'inferior 2' \
    -ex "file $ticker" -ex "attach $tick" -ex 'set schedule-multiple on' -ex continue \
    -ex 'info inferiors' -ex detach -ex 'inferior 1' -ex kill >"$tmp/$name-g.out" 2>&1 &
  gdb_pid=$!
  # The ticker run under gdb writes its pid file once `continue` let it past main.
  for _ in $(seq 600); do [[ -s $tmp/$name-g.tick1 ]] && break; sleep 0.05; done
  sleep 0.3
  kill -INT "$gdb_pid"
  timeout 60 tail --pid="$gdb_pid" -f /dev/null || { bad "$name: session G: gdb did not end"; kill -9 "$gdb_pid"; }
  wait "$gdb_pid"
  ticker_ended "$name-g" "$tick"
}
# h_session NAME PORT: session H; gdb's output to NAME-h.out. A python timer in gdb sends gdb the
# SIGINT 0.4 s into the continue (the run ticker lasts 1 s).
h_session() {
  local name=$1 port=$2
  rm -f "$tmp/$name-h.tick"
  setsid "$ticker" "$tmp/$name-h.tick" 400 0 20000 >"$tmp/$name-h.ticker" 2>&1 &
  local tick=$!
  for _ in $(seq 200); do [[ -s $tmp/$name-h.tick ]] && break; sleep 0.02; done
  local ctrl_c='python import threading, os, signal; threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()'
  timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex 'set pagination off' -ex 'set width 0' -ex "target extended-remote 127.0.0.1:$port" \
    -ex "set remote exec-file $ticker" -ex "file $ticker" -ex 'break main' \
    -ex "run $tmp/$name-h.tick1 50 0 20000" -ex add-inferior -ex 'inferior 2' -ex "file $ticker" \
    -ex "attach $tick" -ex 'inferior 1' -ex "$ctrl_c" -ex continue -ex 'info inferiors' \
    -ex 'inferior 2' -ex continue -ex 'info inferiors' -ex detach >"$tmp/$name-h.out" 2>&1
  ticker_ended "$name-h" "$tick"
}
# i_session NAME PORT: session I; gdb's output to NAME-i.out.
i_session() {
  local name=$1 port=$2 threads=$P/prog_gdb_threads
  local line
  line=$(grep -n 'bump_line \*/' "$(dirname "${BASH_SOURCE[0]}")/../programs/gdb_threads.c" | cut -d: -f1)
  "$threads" bump 10 >"$tmp/$name-i.prog" 2>&1 &
  local bump=$!
  sleep 0.3
  timeout 120 gdb -nx -batch -ex 'set remotetimeout 10' -ex 'set confirm off' \
    -ex 'set pagination off' -ex 'maint set target-non-stop on' -ex 'set schedule-multiple on' \
    -ex "target extended-remote 127.0.0.1:$port" -ex "set remote exec-file $threads" \
    -ex "file $threads" -ex 'break main' -ex 'run bump 10' \
    -ex add-inferior -ex 'inferior 2' -ex "file $threads" -ex "attach $bump" \
    -ex 'set breakpoint condition-evaluation target' -ex "break gdb_threads.c:$line if 0" \
    -ex 'continue &' -ex 'shell sleep 2' -ex 'info threads' -ex 'shell sleep 1' \
    -ex 'info threads' -ex detach -ex 'inferior 1' -ex kill >"$tmp/$name-i.out" 2>&1
  if grep -qE 'Ignoring packet error|Unknown remote|Invalid remote reply' "$tmp/$name-i.out"; then
    bad "$name: session I: a request was not answered in time: $(grep -m1 -E 'Ignoring packet error|Unknown remote|Invalid remote reply' "$tmp/$name-i.out")"
  fi
  grep -q '^\[Inferior 2 (process [0-9]*) detached\]$' "$tmp/$name-i.out" ||
    bad "$name: session I: no detach: $(grep -m2 -E 'detached|rror' "$tmp/$name-i.out")"
  sleep 0.5
  if kill -0 "$bump" 2>/dev/null; then
    kill "$bump"
    wait "$bump" 2>/dev/null
  else
    wait "$bump"
    bad "$name: session I: the detached program ended (status $?)"
  fi
}
# session NAME SERVER...: the server on 127.0.0.1 (any port), sessions A and B, the second client.
session() {
  local name=$1 port server tick rc
  shift
  "$@" >"$tmp/$name.prog" 2>"$tmp/$name.srv" &
  server=$!
  port=$(port_of "$tmp/$name.srv")
  [[ -n $port ]] || { bad "$name: the server did not listen: $(cat "$tmp/$name.srv")"; kill "$server"; return; }
  start_ticker "$name-a"
  gdb_session "$name-a" "$port" "$tick" "${a_cmds[@]}"
  ticker_ended "$name-a" "$tick"
  start_ticker "$name-b"
  gdb_session "$name-b" "$port" "$tick" "${b_cmds[@]}"
  ticker_ended "$name-b" "$tick"
  gdb_session "$name-c" "$port" 0 "${c_cmds[@]}"
  timeout 120 gdb -nx -batch -ex 'set non-stop on' -ex 'set confirm off' \
    -ex "target extended-remote 127.0.0.1:$port" -ex "set remote exec-file $prog" -ex "file $prog" \
    -ex 'break main' -ex run -ex 'info threads' -ex kill >"$tmp/$name-d.out" 2>&1
  gdb_session "$name-f" "$port" 0 "${f_cmds[@]}"
  g_session "$name" "$port"
  h_session "$name" "$port"
  i_session "$name" "$port"
  gdb_session "$name-e1" "$port" 0 'break main' run disconnect
  gdb_session "$name-e2" "$port" 0 'info inferiors' continue
  timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' \
    -ex "target extended-remote 127.0.0.1:$port" -ex 'monitor exit' >"$tmp/$name.exit" 2>&1
  timeout 60 tail --pid="$server" -f /dev/null || { bad "$name: the server did not end at monitor exit"; kill "$server"; }
  wait "$server"
  rc=$?
  [[ $rc -eq 0 ]] || bad "$name: the server exited $rc: $(tail -3 "$tmp/$name.srv")"
  normalise "$tmp/$name-a.out" >"$tmp/$name-a.story"
  normalise "$tmp/$name-b.out" >"$tmp/$name-b.story"
  normalise "$tmp/$name-c.out" >"$tmp/$name-c.story"
  normalise "$tmp/$name-d.out" >"$tmp/$name-d.story"
  normalise "$tmp/$name-e2.out" >"$tmp/$name-e2.story"
  normalise "$tmp/$name-f.out" >"$tmp/$name-f.story"
  normalise "$tmp/$name-g.out" >"$tmp/$name-g.story"
  normalise "$tmp/$name-h.out" >"$tmp/$name-h.story"
  grep -q '^\[Inferior 1 (process [0-9]*) exited normally\]$' "$tmp/$name-h.out" &&
    grep -q '^Thread 2.1 .* received signal SIGINT' "$tmp/$name-h.out" ||
    bad "$name: session H: the owed Ctrl-C did not wait for the attached process: $(grep -m2 -E 'SIGINT|exited|rror' "$tmp/$name-h.out")"
  grep -q '^\[Inferior 2 (process [0-9]*) detached\]$' "$tmp/$name-g.out" ||
    bad "$name: session G: the detach after the interrupt did not let the attached process go: $(grep -m2 -E 'detached|SIGINT|rror' "$tmp/$name-g.out")"
  grep -q 'exited with code 07' "$tmp/$name-e2.out" ||
    bad "$name: session E: the second client did not continue the kept process to its exit: $(tail -2 "$tmp/$name-e2.out")"
  grep -qx "$HOME" "$tmp/$name.prog" ||
    bad "$name: session C's pwd after \`set cwd ~/\` did not print $HOME: $(cat "$tmp/$name.prog")"
  grep -q 'Breakpoint 1, main ' "$tmp/$name-d.out" && ! grep -q 'internal-error' "$tmp/$name-d.out" ||
    bad "$name: session D (non-stop) did not stop at main: $(grep -m1 -E 'internal-error|error' "$tmp/$name-d.out")"
  grep -qx 'from gdb' "$tmp/$name.prog" && ! grep -qx 'present' "$tmp/$name.prog" ||
    bad "$name: session C's program did not see gdb's environment: $(cat "$tmp/$name.prog")"
  grep -xE '[0-9]+' "$tmp/$name.prog" >"$tmp/$name.shlvl"
  grep -q 'nonexistent-hwarb-program: \(not found\|No such file\)' "$tmp/$name.srv" ||
    bad "$name: no shell said it cannot find the program: $(tail -3 "$tmp/$name.srv")"
}
# differs NAME REF: gdb's session NAME differs from REF's (shown).
differs() {
  diff -u "$tmp/$2.story" "$tmp/$1.story" >"$tmp/$1.diff" && return 1
  sed 's/^/  | /' "$tmp/$1.diff" >&2
  return 0
}

if command -v gdbserver >/dev/null; then
  session gdbserver gdbserver --multi 127.0.0.1:0
  # Session A ends twice by itself (the exit, the detached run), session B then as often as the
  # watch lets it: twice where gdbserver's hits are delivered, 3 times where its watch never hits.
  grep -q '^total=936$' "$tmp/gdbserver.prog" || bad "gdbserver: no run printed total=936"
else
  skip_case - "compared with Debian's gdbserver" "Debian's gdbserver is not installed"
fi
for mode in "" "--software"; do
  m=hwarb${mode}
  session "$m" "$hwarb" gdbserver $mode --multi 127.0.0.1:0
  totals=$(grep -c '^total=936$' "$tmp/$m.prog")
  [[ $totals -eq 7 ]] || bad "$m: $totals runs printed total=936 (want 7: A's exit and detach, B's, F's two, E's): $(cat "$tmp/$m.prog")"
  grep -q '^\[Inferior 2 (process [0-9]*) exited with code 07\]$' "$tmp/$m-f.out" &&
    grep -q '^\[Inferior 1 (process [0-9]*) exited with code 07\]$' "$tmp/$m-f.out" ||
    bad "$m: session F's two processes did not both run to their exits: $(grep -m2 -E 'exited|rror' "$tmp/$m-f.out")"
  hits=$(grep -A1 '^Old value = ' "$tmp/$m-f.out" | grep -v '^--$' | tr '\n' ' ')
  [[ $hits == 'Old value = 0 New value = 1 Old value = 1 New value = 2 ' ]] ||
    bad "$m: session F's watch in inferior 2 hit as '$hits' (want 0 -> 1, 1 -> 2)"
  if grep -q 'Remote communication error\|Remote replied unexpectedly\|not supported' "$tmp/$m-a.out" "$tmp/$m-b.out"; then
    bad "$m: gdb: $(grep -h -m1 'Remote communication error\|Remote replied unexpectedly\|not supported' "$tmp/$m-a.out" "$tmp/$m-b.out")"
  fi
  # B's hits: 0 -> 1, 1 -> 2; after kill and run 0 -> 1 again; after the third run 0 -> 1; a tick.
  hits=$(grep -A1 '^Old value = ' "$tmp/$m-b.out" | grep -v '^--$' | tr '\n' ' ')
  want='Old value = 0 New value = 1 Old value = 1 New value = 2 Old value = 0 New value = 1 Old value = 0 New value = 1 '
  [[ $hits == "$want"Old\ value\ =\ *New\ value\ =\ * ]] ||
    bad "$m: session B's watch hits are '$hits' (want '${want}Old value = T New value = T+1')"
  grep -qx '\$1 = 1' "$tmp/$m-b.out" || bad "$m: counter after the second run's hit is not 1"
  if [[ -f $tmp/gdbserver-a.story ]]; then
    differs "$m-a" gdbserver-a && bad "$m: session A differs from gdbserver's (- gdbserver, + hwarb) above"
    differs "$m-c" gdbserver-c && bad "$m: session C differs from gdbserver's (- gdbserver, + hwarb) above"
    differs "$m-d" gdbserver-d && bad "$m: session D differs from gdbserver's (- gdbserver, + hwarb) above"
    differs "$m-e2" gdbserver-e2 && bad "$m: session E differs from gdbserver's (- gdbserver, + hwarb) above"
    differs "$m-g" gdbserver-g && bad "$m: session G differs from gdbserver's (- gdbserver, + hwarb) above"
    differs "$m-h" gdbserver-h && bad "$m: session H differs from gdbserver's (- gdbserver, + hwarb) above"
    if grep -q '^Old value' "$tmp/gdbserver-f.out"; then
      differs "$m-f" gdbserver-f && bad "$m: session F differs from gdbserver's (- gdbserver, + hwarb) above"
    else
      skip_case - "$m: session F compared with gdbserver's" \
        "Debian's gdbserver's hardware watchpoints do not hit here (perf breakpoint hits not delivered)"
    fi
    cmp -s "$tmp/gdbserver.shlvl" "$tmp/$m.shlvl" ||
      bad "$m: the program's SHLVL is '$(cat "$tmp/$m.shlvl")', under gdbserver '$(cat "$tmp/gdbserver.shlvl")'"
    if grep -q '^Old value' "$tmp/gdbserver-b.out"; then
      differs "$m-b" gdbserver-b && bad "$m: session B differs from gdbserver's (- gdbserver, + hwarb) above"
    else
      skip_case - "$m: session B compared with gdbserver's" \
        "Debian's gdbserver's hardware watchpoints do not hit here (perf breakpoint hits not delivered)"
    fi
  fi
done
[[ $fail -eq 0 ]] && echo "gdbserver_extended_test: all cases passed"
exit $fail
