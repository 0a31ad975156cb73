#!/usr/bin/env bash
# `hwarb gdbserver` with real gdb (Debian's) as the client, in batch mode, against
# tests/programs/gdb_target.c: gdbserver_test.sh HWARB PROGRAMS_DIR
# Every case runs in both modes the machine offers: the default (debug registers where the probe
# sees hits delivered, else software) and --software. gdb's Old/New value sequences must equal
# what `hwarb watch` reports on the same program; the program's output and exit status are its
# own; detach lets it run on unchanged. gdb waits up to 30 s for each answer (remotetimeout; its
# default, 2 s, is less than a sanitizer build of the server may take to probe the machine and
# start the program while other tests load the CPUs).
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_gdb_target

# gdb NAME MODE COMMANDS...: gdb in batch mode against `hwarb gdbserver MODE --stdio -- prog`;
# its output in $tmp/NAME.out (the program's own output is on gdb's stderr: $tmp/NAME.err).
gdb_run() {
  local name=$1 mode=$2
  shift 2
  local args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off' -ex 'set width 0'
              -ex "target remote | $hwarb gdbserver $mode --stdio -- $prog")
  for c in "$@"; do args+=(-ex "$c"); done
  timeout 120 gdb "${args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}
new_values() {  # the "New value = V" sequence of a gdb output, space-separated
  sed -n 's/^New value = //p' "$1" | tr '\n' ' '
}
expect() {  # expect FILE REGEX DESCRIPTION: at least one line matches
  grep -qE -- "$2" "$1" || { bad "$3: no line matches '$2'"; sed 's/^/  | /' "$1" | tail -25 >&2; }
}
count() {  # count FILE REGEX N DESCRIPTION
  local n
  n=$(grep -cE -- "$2" "$1")
  [[ $n -eq $3 ]] || { bad "$4: $n lines match '$2', expected $3"; sed 's/^/  | /' "$1" | tail -25 >&2; }
}

modes=("" "--software")
for mode in "${modes[@]}"; do
  m=${mode:-default}
  # 1. watch on a scalar: every change, in order, as `hwarb watch` reports it; the exit code.
  gdb_run "w$m" "$mode" 'break main' 'continue' 'watch counter' continue continue continue \
    continue continue 'delete' 'continue'
  "$hwarb" watch $mode --json counter:w -- "$prog" >"$tmp/hw$m.json" 2>/dev/null
  want=$(grep '"event":"hit"' "$tmp/hw$m.json" | sed 's/.*"new":"\(0x[0-9a-f]*\)".*/\1/' |
         while read -r v; do printf '%d ' "$v"; done)
  got=$(new_values "$tmp/w$m.out")
  [[ $got == "1 2 3 4 5 " ]] || bad "$m: watch counter: gdb saw '$got'"
  [[ $got == "$want" ]] || bad "$m: watch counter: gdb '$got', hwarb watch '$want'"
  count "$tmp/w$m.out" '^(Hardware )?[Ww]atchpoint 2: counter$' 6 "$m: watch counter: the watchpoint and its 5 stops"
  expect "$tmp/w$m.out" 'exited with code 07' "$m: watch counter: the exit code"
  expect "$tmp/w$m.err" '^total=936$' "$m: watch counter: the program's output"

  # ... and what gdb's own hardware watchpoints report natively, where this machine delivers
  # their hits.
  if [[ -z $mode ]]; then
    if "$hwarb" probe --json | grep -q '"hits_delivered":true'; then
      timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off' -ex 'break main' \
        -ex run -ex 'watch counter' -ex continue -ex continue -ex continue -ex continue \
        -ex continue -ex delete -ex continue --args "$prog" >"$tmp/native.out" 2>&1
      native=$(new_values "$tmp/native.out")
      [[ $got == "$native" ]] || bad "watch counter: gdb + hwarb '$got', native gdb '$native'"
    else
      skip_case hits "default mode on debug registers, native gdb comparison" \
        "this machine does not deliver breakpoint hits (the default mode ran in software)"
    fi
  fi

  # 1b. A breakpoint on the store itself: gdb steps over it with the watch in place, and the
  # write is still a watch stop (a debug register's trap must not vanish into the step's).
  gdb_run "bw$m" "$mode" 'break bump' 'continue' 'watch counter' continue continue continue continue
  count "$tmp/bw$m.out" '^Breakpoint 1, bump' 3 "$m: break + watch: breakpoint stops"
  [[ $(new_values "$tmp/bw$m.out") == "1 2 " ]] || bad "$m: break + watch: gdb saw '$(new_values "$tmp/bw$m.out")'"

  # 2. A 64-byte struct (8 longs): one stop per element written, whole values.
  gdb_run "b$m" "$mode" 'break fill' 'continue' 'watch block' continue continue continue continue \
    continue continue continue continue 'delete' 'continue'
  count "$tmp/b$m.out" '^New value = ' 8 "$m: watch block: 8 stops"
  expect "$tmp/b$m.out" '^New value = \{v = \{100, 101, 102, 103, 104, 105, 106, 107\}\}$' "$m: watch block: the last value"
  expect "$tmp/b$m.out" 'exited with code 07' "$m: watch block: the exit code"

  # 3. More watchpoints than registers, an array element, a condition, read and access watches.
  gdb_run "many$m" "$mode" 'break main' 'continue' 'watch counter if counter == 4' 'watch arr[3]' \
    'watch arr[4]' 'watch block.v[7]' 'watch slots[1]' 'rwatch secret' continue continue continue \
    continue continue continue continue continue continue continue 'delete' 'continue'
  expect "$tmp/many$m.out" '^New value = 4$' "$m: many: the condition's stop"
  count "$tmp/many$m.out" '^Old value = 3$' 1 "$m: many: counter stops once (the condition)"
  count "$tmp/many$m.out" 'atchpoint 3: arr\[3\]' 4 "$m: many: arr[3] set and 3 stops"
  count "$tmp/many$m.out" 'atchpoint 4: arr\[4\]' 2 "$m: many: arr[4] set and 1 stop"
  count "$tmp/many$m.out" 'atchpoint 5: block.v\[7\]' 2 "$m: many: block.v[7] set and 1 stop"
  count "$tmp/many$m.out" '^Value = 42$' 2 "$m: many: rwatch secret: 2 reads"
  count "$tmp/many$m.out" 'atchpoint 6: slots\[1\]' 3 "$m: many: slots[1] set and its first two writes"
  count "$tmp/many$m.out" '^New value = ' 8 "$m: many: every stop once"

  # 4. Breakpoints, hbreak, bt, registers, stepi, finish; threads.
  gdb_run "br$m" "$mode" 'break bump' 'hbreak peek' 'continue' 'bt' 'info registers rip' 'stepi' \
    'finish' 'delete 1' 'continue' 'delete' 'break worker' 'continue' 'info threads' 'thread 1' \
    'bt 1' 'info sharedlibrary' 'kill'
  expect "$tmp/br$m.out" '^Breakpoint 1, bump \(v=(v@entry=)?1\) at .*gdb_target.c' "$m: break bump"
  expect "$tmp/br$m.out" '^#1 +0x[0-9a-f]+ in main' "$m: bt"
  expect "$tmp/br$m.out" '^rip +0x[0-9a-f]+ +0x[0-9a-f]+ <bump' "$m: info registers rip"
  expect "$tmp/br$m.out" '^0x[0-9a-f]+ in main .* at .*gdb_target.c:42' "$m: finish (back in main)"
  expect "$tmp/br$m.out" '^Breakpoint 2, peek \(\) at' "$m: hbreak peek"
  expect "$tmp/br$m.out" 'hit Breakpoint 3, worker \(arg=0x[01]\)' "$m: break worker, in a thread"
  # main and the worker at least (the other worker may not be created yet).
  # (gdb names a thread PID.TID: the server speaks multiprocess+, as gdbserver.)
  n=$(grep -cE '^[* ] +[0-9]+ +Thread [0-9]+\.[0-9]+ ' "$tmp/br$m.out")
  [[ $n -ge 2 && $n -le 3 ]] || bad "$m: info threads: $n threads"
  expect "$tmp/br$m.out" '^\[Switching to thread 1 ' "$m: thread 1"
  expect "$tmp/br$m.out" '^\[Inferior 1 \(process [0-9]+\) killed\]' "$m: kill"
  # gdb's default sysroot reads the libraries through the server (vFile).
  expect "$tmp/br$m.out" 'Yes .*target:/.*libc\.so\.6' "$m: libraries read through the server"
  # The library list comes from the server's walk of the dynamic linker's link_map chain.
  gdb_run "lib$m" "$mode" 'set debug remote 1' 'break main' 'continue' 'info sharedlibrary' 'kill'
  expect "$tmp/lib$m.err" 'received: l<library-list-svr4 version="1\.0" main-lm="0x[0-9a-f]+">.*<library name="[^"]*/libc\.so\.6" lm="0x' "$m: qXfer:libraries-svr4"
  expect "$tmp/lib$m.out" 'Yes .*target:/.*libc\.so\.6' "$m: libraries-svr4: libc listed"

  # 4f. A watch on a stack variable (a stack page cannot be protected: the software path steps
  # the thread): each write is a stop, with its values.
  prog="$P/prog_stackvar" gdb_run "stack$m" "$mode" 'break 13' continue 'watch local' continue \
    continue continue delete continue
  [[ $(new_values "$tmp/stack$m.out") == "1 2 3 " ]] ||
    bad "$m: watch on a stack variable: gdb saw '$(new_values "$tmp/stack$m.out")'"
  expect "$tmp/stack$m.out" 'exited normally' "$m: watch on a stack variable: the program's exit"

  # 4e. Steps with a watch on the software path (a 64-byte watch is software in every mode): the
  # lines stepped write arr, on the watched page, so each of those stores faults without touching
  # the watch; `next` still ends at the next line, `stepi` one instruction on, and a step over a
  # breakpoint stops at the following one.
  gdb_run "step$m" "$mode" 'break 44' continue 'watch -l block' next next stepi 'break 48' \
    'break 49' continue 'info line *$pc' continue 'info line *$pc'
  expect "$tmp/step$m.out" '^45[[:space:]]+arr\[4\] = 4;' "$m: next with a software watch: line 45"
  expect "$tmp/step$m.out" '^46[[:space:]]+int r = peek' "$m: next with a software watch: line 46"
  # (line 46's first instruction calls peek)
  expect "$tmp/step$m.out" '^peek \(\) at .*gdb_target.c:31$' "$m: stepi with a software watch: one instruction"
  expect "$tmp/step$m.out" '^Line 48 of' "$m: continue with a software watch: the next breakpoint"
  expect "$tmp/step$m.out" '^Line 49 of' "$m: a step over a breakpoint with a software watch: the one after"

done

# 4b. Stops while another thread forks: each stop holds the forking thread, often inside fork()
# (its fork event then waits for the next resume); every thread runs on, nothing hangs, and the
# program's output and exit status are its own.
for mode in "${modes[@]}"; do
  m=${mode:-default}
  args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off'
        -ex "target remote | $hwarb gdbserver $mode --stdio -- $P/prog_fork_threads 100"
        -ex 'break tick')
  for _ in $(seq 40); do args+=(-ex continue); done
  args+=(-ex delete -ex continue)
  timeout 120 gdb "${args[@]}" >"$tmp/fk$m.out" 2>"$tmp/fk$m.err"
  count "$tmp/fk$m.out" '^Thread .* hit Breakpoint 1, tick|^Breakpoint 1, tick' 40 "$m: forks: 40 breakpoint stops"
  expect "$tmp/fk$m.out" 'exited normally' "$m: forks: the program's exit"
  expect "$tmp/fk$m.err" '^forks=100 ticks=100$' "$m: forks: the program's output"
done

# 4c. Signals in gdb's numbering: the program's SIGUSR1 is reported as SIGUSR1 (Linux's 10 is
# gdb's SIGBUS) and delivered to its handler when gdb continues.
timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
  -ex "target remote | $hwarb gdbserver --stdio -- $P/prog_branches 100 signal" \
  -ex continue -ex continue >"$tmp/sig.out" 2>"$tmp/sig.err"
expect "$tmp/sig.out" 'received signal SIGUSR1' "signals: SIGUSR1 by its name"
expect "$tmp/sig.out" 'exited normally' "signals: the program's exit"
expect "$tmp/sig.err" '^signal=' "signals: the handler ran"

# 4d. Stops that come together, and the process's life-cycle, as Debian's gdbserver serves them
# (the same gdb commands through `gdbserver -`):
#  threads  4 threads run into one breakpoint at once; gdb shows one stop, `info threads`, then
#           deletes the breakpoint and continues: the threads held at it (their pc set back onto
#           it) run on from there, with no spurious SIGTRAP and the program's sum unchanged;
#  fork     a breakpoint in code only the forked child runs (gdb follows the parent): the child
#           runs with the program's own bytes, exits 3, and the parent's waitpid says so;
#  exec     the program execs another image: gdb hears of it (its exec catchpoint stops), the
#           new image's bytes at the old breakpoint's address are the file's (as gdbserver
#           shows them), and the new program runs to its end.
events=$P/prog_gdb_events
gdbserver_run() {  # gdbserver_run NAME COMMANDS...: as gdb_run, with Debian's gdbserver
  local name=$1
  shift
  local args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off' -ex 'set width 0'
              -ex "target remote | gdbserver - $prog")
  for c in "$@"; do args+=(-ex "$c"); done
  timeout 120 gdb "${args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
exec_cmds=('break before_exec' continue 'set $a = (long) &before_exec' delete 'catch exec' continue
           'x/4xb $a' continue)
if command -v gdbserver >/dev/null; then
  prog="$events exec $P/prog_hello" gdbserver_run exec-gdbserver "${exec_cmds[@]}"
fi
for mode in "${modes[@]}"; do
  m=${mode:-default}
  for round in 1 2; do
    prog="$events threads" gdb_run "thr$m$round" "$mode" 'break in_worker' continue 'info threads' \
      continue 'info threads' delete continue
    expect "$tmp/thr$m$round.err" '^sum=8004000$' "$m: threads at one breakpoint ($round): the program's sum"
    expect "$tmp/thr$m$round.out" 'exited normally' "$m: threads at one breakpoint ($round): the program's exit"
    count "$tmp/thr$m$round.out" 'SIGTRAP' 0 "$m: threads at one breakpoint ($round): no spurious SIGTRAP"
  done
  # A thread born after the resume outlives every thread the client resumed (the leader ended
  # by pthread_exit, its first thread too): the program runs to its end, with no N reply
  # ("No unwaited-for children left") while it runs.
  prog="$events late-thread" gdb_run "late$m" "$mode" continue
  expect "$tmp/late$m.err" '^late$' "$m: a thread outliving those resumed: the program's output"
  expect "$tmp/late$m.out" 'exited normally' "$m: a thread outliving those resumed: the exit"
  count "$tmp/late$m.out" 'unwaited-for' 0 "$m: a thread outliving those resumed: no N reply"
  prog="$events fork" gdb_run "fork$m" "$mode" 'break in_child' continue
  expect "$tmp/fork$m.err" '^child status=3$' "$m: a breakpoint the forked child runs: the child's exit"
  expect "$tmp/fork$m.out" 'exited normally' "$m: a breakpoint the forked child runs: the parent's exit"
  prog="$events exec $P/prog_hello" gdb_run "exec$m" "$mode" "${exec_cmds[@]}"
  expect "$tmp/exec$m.out" 'Catchpoint 2 \(exec.d .*/prog_hello\)' "$m: exec: gdb hears of it"
  expect "$tmp/exec$m.err" '^hello$' "$m: exec: the new program's output"
  expect "$tmp/exec$m.out" 'exited normally' "$m: exec: the new program's exit"
  if [[ -f $tmp/exec-gdbserver.out ]]; then
    want=$(grep -E '^0x[0-9a-f]+:' "$tmp/exec-gdbserver.out")
    got=$(grep -E '^0x[0-9a-f]+:' "$tmp/exec$m.out")
    [[ -n $want && $got == "$want" ]] ||
      bad "$m: exec: the new image at the old breakpoint: '$got', gdbserver shows '$want'"
  fi
done
if ! command -v gdbserver >/dev/null; then
  skip_case - "exec: the new image's bytes compared with gdbserver's" \
    "Debian's gdbserver is not installed"
fi

# 4g. gdb's `monitor exit` ends the server at once (gdb's testsuite ends every session so);
# `monitor help` lists those served; `monitor watches` says where each watchpoint is and why,
# `monitor slots` the debug registers; gdbserver's `monitor set remote-debug 1` logs the packets
# on the server's stderr (and `monitor set debug 0` answers as gdbserver's); a bare `monitor` is
# gdbserver's unknown command (its text, then a protocol error).
gdb_run mon "" 'break main' continue 'watch counter' 'watch -l *(char(*)[64])&counter' continue \
  'monitor watches' 'monitor slots' 'monitor help' 'monitor set remote-debug 1' 'p counter' \
  'monitor set remote-debug 0' 'monitor set debug 0' 'monitor' 'monitor exit' 'info registers rip'
# gdb may end before the server it started over the pipe has written its last line (it ends the
# program and takes its watches down first): that line is waited for, at most 20 s.
for _ in $(seq 200); do grep -q '^hwarb gdbserver: the client went away' "$tmp/mon.err" && break; sleep 0.1; done
cat "$tmp/mon.out" "$tmp/mon.err" >"$tmp/mon.all"
expect "$tmp/mon.all" '^The following monitor commands are supported:' "monitor help: the list"
expect "$tmp/mon.all" '^Protocol debug output enabled\.' "monitor set remote-debug 1: answered"
expect "$tmp/mon.all" 'hwarb gdbserver: remote: received m[0-9a-f]+,[0-9a-f]+' "monitor set remote-debug 1: a packet logged"
expect "$tmp/mon.all" '^Debug output disabled\.' "monitor set debug 0: answered"
expect "$tmp/mon.all" '^Unknown monitor command\.' "monitor: unknown"
expect "$tmp/mon.all" 'Protocol error with Rcmd' "monitor: its protocol error"
expect "$tmp/mon.all" '^  watches ' "monitor help: watches listed"
expect "$tmp/mon.all" '^2 watchpoint\(s\): ' "monitor watches: both"
expect "$tmp/mon.all" '^  #2 0x[0-9a-f]+/64:w  (software|hardware)' "monitor watches: the 64-byte one"
expect "$tmp/mon.all" '^debug registers per thread: [0-9]+; held by this session' "monitor slots"
count "$tmp/mon.all" 'Target does not support this command' 0 "monitor exit: served"
expect "$tmp/mon.all" 'Remote connection closed|Target disconnected|The program has no registers now' "monitor exit: the server ended"
expect "$tmp/mon.all" 'hwarb gdbserver: the client went away' "monitor exit: the program left as at a disconnect"

# 5. Over TCP on 127.0.0.1 (the port said on stderr; the program's output on hwarb's stdout):
# breakpoints, then a watch and a detach after two stops: the program runs on to its own end,
# its output and exit status unchanged.
server_tcp() {  # server_tcp NAME MODE TARGET...: the server in the background ($server, $port)
  local name=$1 mode=$2
  shift 2
  "$hwarb" gdbserver $mode 127.0.0.1:0 "$@" 2>"$tmp/$name.err" >"$tmp/$name.prog" &
  server=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/$name.err")
    [[ -n $port ]] && break
    sleep 0.05
  done
}
for mode in "${modes[@]}"; do
  m=${mode:-default}
  server_tcp "tcp$m" "$mode" -- "$prog"
  if [[ -z $port ]]; then
    bad "$m: tcp: no port said: $(cat "$tmp/tcp$m.err")"
    continue
  fi
  timeout 60 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex "target remote 127.0.0.1:$port" \
    -ex 'break bump' -ex 'continue' -ex 'continue' -ex 'delete' -ex 'watch counter' \
    -ex 'continue' -ex 'continue' -ex 'detach' >"$tmp/tcp$m.out" 2>&1
  count "$tmp/tcp$m.out" '^Breakpoint 1, bump' 2 "$m: tcp: two breakpoint stops"
  count "$tmp/tcp$m.out" '^New value = ' 2 "$m: tcp: two watch stops"
  expect "$tmp/tcp$m.out" '^\[Inferior 1 \(process [0-9]+\) detached\]' "$m: tcp: detached"
  wait "$server"
  rc=$?
  [[ $rc == 0 ]] || bad "$m: tcp: the server exited $rc"
  for _ in $(seq 50); do grep -q '^total=' "$tmp/tcp$m.prog" && break; sleep 0.1; done
  expect "$tmp/tcp$m.prog" '^total=936$' "$m: tcp: after the detach the program ran on to its end"
done

# 5b. -p: attach to a running program, watch, detach: it runs on untouched (its text as in the
# file), in both modes.
for mode in "${modes[@]}"; do
  m=${mode:-default}
  "$P/prog_spin" >"$tmp/spin$m.out" &
  spin=$!
  for _ in $(seq 50); do grep -q ready "$tmp/spin$m.out" && break; sleep 0.05; done
  timeout 60 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex "target remote | $hwarb gdbserver $mode --stdio -p $spin" -ex 'watch ticks' -ex 'continue' \
    -ex 'continue' -ex 'detach' >"$tmp/att$m.out" 2>&1
  count "$tmp/att$m.out" '^New value = ' 2 "$m: attach: two watch stops"
  old=$(sed -n 's/^Old value = //p' "$tmp/att$m.out" | head -1)
  new=$(sed -n 's/^New value = //p' "$tmp/att$m.out" | head -1)
  [[ -n $old && $new == $((old + 1)) ]] || bad "$m: attach: values $old -> $new"
  sleep 0.3
  if kill -0 "$spin" 2>/dev/null; then
    python3 "$(dirname "${BASH_SOURCE[0]}")/text_matches.py" "$spin" "$P/prog_spin" ||
      bad "$m: attach: the program's text changed"
    grep -q 'TracerPid:.0' "/proc/$spin/status" || bad "$m: attach: still traced after the detach"
    kill "$spin"
  else
    bad "$m: attach: the program died after the detach"
  fi
  wait "$spin" 2>/dev/null
done

# 5d. The server ends by a signal (INT, TERM, HUP, KILL) or by a reset connection while the
# program is stopped at a breakpoint with a watch on: an attached program runs on unchanged (not
# traced, its text as in the file, still ticking: its watched page is writable again), as
# `watch -p` leaves it; a spawned one is killed, as `watch` leaves it.
stopped_client() {  # stopped_client NAME: gdb at a breakpoint with a watch, holding on ($client)
  gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex "target remote 127.0.0.1:$port" -ex 'break tick' -ex continue -ex 'watch ticks' \
    -ex "shell touch $tmp/$1.stopped; while [ ! -e $tmp/$1.go ]; do sleep 0.05; done" \
    >"$tmp/$1.gdb" 2>&1 &
  client=$!
  for _ in $(seq 200); do [[ -f $tmp/$1.stopped ]] && break; sleep 0.05; done
}
release_client() {  # release_client NAME: the held gdb goes on (to a closed connection) and ends
  touch "$tmp/$1.go"
  wait "$client" 2>/dev/null
}
runs_on() {  # runs_on NAME PID: PID runs on untraced and unchanged
  local name=$1 pid=$2 t1 t2
  for _ in $(seq 60); do
    grep -q 'TracerPid:.0' "/proc/$pid/status" 2>/dev/null && break
    sleep 0.05
  done
  sleep 0.3
  t1=$(python3 "$(dirname "${BASH_SOURCE[0]}")/read_symbol.py" "$pid" ticks 8 2>/dev/null)
  sleep 0.3
  t2=$(python3 "$(dirname "${BASH_SOURCE[0]}")/read_symbol.py" "$pid" ticks 8 2>/dev/null)
  if ! kill -0 "$pid" 2>/dev/null; then
    bad "$name: the attached program died"
    return
  fi
  grep -q 'TracerPid:.0' "/proc/$pid/status" || bad "$name: the program is still traced"
  [[ -n $t1 && -n $t2 && $t2 -gt $t1 ]] || bad "$name: the program stopped ticking ($t1, $t2)"
  python3 "$(dirname "${BASH_SOURCE[0]}")/text_matches.py" "$pid" "$P/prog_spin" ||
    bad "$name: the program's text changed"
}
# KILL and RST in both modes; INT, HUP and TERM share them out.
for mode in "${modes[@]}"; do
  m=${mode:-default}
  ends=(KILL RST INT HUP)
  [[ -n $mode ]] && ends=(KILL RST TERM)
  for how in "${ends[@]}"; do
    name="end-$how$m"
    "$P/prog_spin" >"$tmp/$name.spin" &
    spin=$!
    for _ in $(seq 50); do grep -q ready "$tmp/$name.spin" && break; sleep 0.05; done
    server_tcp "$name" "$mode" -p "$spin"
    if [[ $how == RST ]]; then
      python3 "$(dirname "${BASH_SOURCE[0]}")/gdb_reset.py" "$port" "$spin" ||
        bad "$name: the client could not get the program stopped"
    else
      stopped_client "$name"
      [[ -f $tmp/$name.stopped ]] || bad "$name: gdb never stopped the program"
      kill -"$how" "$server"
    fi
    wait "$server"
    rc=$?
    [[ $how == KILL || $rc -eq 0 ]] || bad "$name: the server exited $rc"
    runs_on "$name" "$spin"
    [[ $how == RST ]] || release_client "$name"
    kill "$spin" 2>/dev/null
    wait "$spin" 2>/dev/null
  done
done
for how in TERM KILL; do
  name="spawned-$how"
  server_tcp "$name" "" -- "$P/prog_spin"
  pid=$(sed -n 's/.* is process \([0-9]*\);.*/\1/p' "$tmp/$name.err")
  stopped_client "$name"
  [[ -f $tmp/$name.stopped ]] || bad "$name: gdb never stopped the program"
  kill -"$how" "$server"
  wait "$server"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  ! kill -0 "$pid" 2>/dev/null || { bad "$name: the spawned program outlived the server"; kill -9 "$pid"; }
  release_client "$name"
done

# 5c. A program named without a slash, as gdbserver takes it: a file of that name in the working
# directory (run by its absolute path), before PATH; a name that is also in PATH is still the
# file here. gdb_target says which ran (total=936, exit code 07); hello is the one in PATH.
mkdir -p "$tmp/here" "$tmp/bin"
cp "$prog" "$tmp/here/prog_here"
cp "$prog" "$tmp/here/prog_both"
cp "$P/prog_hello" "$tmp/bin/prog_both"
(cd "$tmp/here" && prog=prog_here gdb_run here "" 'break main' continue 'print argv[0]' continue)
expect "$tmp/here.out" "^\\\$1 = 0x[0-9a-f]+ \"$tmp/here/prog_here\"\$" "cwd: argv[0] is the absolute path"
expect "$tmp/here.out" 'exited with code 07' "cwd: the program's exit"
expect "$tmp/here.err" '^total=936$' "cwd: the program's output"
(cd "$tmp/here" && PATH="$tmp/bin:$PATH" prog=prog_both gdb_run both "" continue)
expect "$tmp/both.out" 'exited with code 07' "cwd before PATH: the file here ran"
expect "$tmp/both.err" '^total=936$' "cwd before PATH: its output"
count "$tmp/both.err" '^hello$' 0 "cwd before PATH: not the one in PATH"

# 6. lldb (Debian's) as the client, over TCP: breakpoint, registers, threads, the libraries, a
# watchpoint.
if command -v lldb >/dev/null; then
  server_tcp lldb "" -- "$prog"
  # Debian's lldb-14 finds its Python module only with this path.
  PYTHONPATH=$(ls -d /usr/lib/llvm-*/lib/python3*/dist-packages 2>/dev/null | head -1) \
    timeout 60 lldb -b "$prog" -o "gdb-remote 127.0.0.1:$port" -o 'breakpoint set -n bump' \
    -o 'continue' -o 'register read rip' -o 'thread list' -o 'image list' \
    -o 'watchpoint set variable counter' \
    -o 'continue' -o 'continue' -o 'kill' >"$tmp/lldb.out" 2>&1
  expect "$tmp/lldb.out" 'stop reason = breakpoint 1\.1' "lldb: breakpoint"
  expect "$tmp/lldb.out" 'rip = 0x[0-9a-f]+ +prog_gdb_target`bump' "lldb: register read rip"
  expect "$tmp/lldb.out" 'thread #1: tid = [0-9]+' "lldb: thread list"
  # The libraries loaded at start-up, libc among them (followed from the dynamic linker's
  # rendezvous after the launch).
  expect "$tmp/lldb.out" '^\[ *[0-9]+\] .*/libc\.so\.6' "lldb: image list after a launch"
  expect "$tmp/lldb.out" 'Watchpoint created: Watchpoint 1: addr = 0x[0-9a-f]+ size = 8' "lldb: watchpoint set"
  expect "$tmp/lldb.out" 'stop reason = watchpoint 1' "lldb: watchpoint stop"
  count "$tmp/lldb.out" '^new value: 1$' 1 "lldb: the watched value"
  wait
else
  bad "lldb is not installed (scripts/setup installs it)"
fi

exit $fail
