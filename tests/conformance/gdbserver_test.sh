#!/usr/bin/env bash
# `hwarb gdbserver` with real gdb (Debian's) as the client, in batch mode, against
# tests/programs/gdb_target.c: gdbserver_test.sh HWARB PROGRAMS_DIR
# Every case runs in both modes the machine offers: the default (debug registers where the probe
# sees hits delivered, else software) and --software. gdb's Old/New value sequences must equal
# what `hwarb watch` reports on the same program; the program's output and exit status are its
# own; detach lets it run on unchanged.
set -uo pipefail
hwarb=$(realpath "$1")  # absolute: a case runs gdb from another directory
P=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
command -v gdb >/dev/null || { echo "FAIL: gdb is not installed (scripts/setup installs it)" >&2; exit 1; }
prog=$P/prog_gdb_target

# gdb NAME MODE COMMANDS...: gdb in batch mode against `hwarb gdbserver MODE --stdio -- prog`;
# its output in $tmp/NAME.out (the program's own output is on gdb's stderr: $tmp/NAME.err).
gdb_run() {
  local name=$1 mode=$2
  shift 2
  local args=(-nx -batch -ex 'set confirm off' -ex 'set pagination off' -ex 'set width 0'
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
      timeout 120 gdb -nx -batch -ex 'set confirm off' -ex 'set pagination off' -ex 'break main' \
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
  n=$(grep -cE '^[* ] +[0-9]+ +Thread [0-9]+ ' "$tmp/br$m.out")
  [[ $n -ge 2 && $n -le 3 ]] || bad "$m: info threads: $n threads"
  expect "$tmp/br$m.out" '^\[Switching to thread 1 ' "$m: thread 1"
  expect "$tmp/br$m.out" 'Remote target\) killed' "$m: kill"
  # gdb's default sysroot reads the libraries through the server (vFile).
  expect "$tmp/br$m.out" 'Yes .*target:/.*libc\.so\.6' "$m: libraries read through the server"
  # The library list comes from the server's walk of the dynamic linker's link_map chain.
  gdb_run "lib$m" "$mode" 'set debug remote 1' 'break main' 'continue' 'info sharedlibrary' 'kill'
  expect "$tmp/lib$m.err" 'received: l<library-list-svr4 version="1\.0" main-lm="0x[0-9a-f]+">.*<library name="[^"]*/libc\.so\.6" lm="0x' "$m: qXfer:libraries-svr4"
  expect "$tmp/lib$m.out" 'Yes .*target:/.*libc\.so\.6' "$m: libraries-svr4: libc listed"

done

# 4b. Stops while another thread forks: each stop holds the forking thread, often inside fork()
# (its fork event then waits for the next resume); every thread runs on, nothing hangs, and the
# program's output and exit status are its own.
for mode in "${modes[@]}"; do
  m=${mode:-default}
  args=(-nx -batch -ex 'set confirm off' -ex 'set pagination off'
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
timeout 120 gdb -nx -batch -ex 'set confirm off' \
  -ex "target remote | $hwarb gdbserver --stdio -- $P/prog_branches 100 signal" \
  -ex continue -ex continue >"$tmp/sig.out" 2>"$tmp/sig.err"
expect "$tmp/sig.out" 'received signal SIGUSR1' "signals: SIGUSR1 by its name"
expect "$tmp/sig.out" 'exited normally' "signals: the program's exit"
expect "$tmp/sig.err" '^signal=' "signals: the handler ran"

# 5. Over TCP on 127.0.0.1 (the port said on stderr; the program's output on hwarb's stdout):
# breakpoints, then a watch and a detach after two stops: the program runs on to its own end,
# its output and exit status unchanged.
for mode in "${modes[@]}"; do
  m=${mode:-default}
  ( "$hwarb" gdbserver $mode 127.0.0.1:0 -- "$prog" 2>"$tmp/tcp$m.err" >"$tmp/tcp$m.prog"
    echo $? >"$tmp/tcp$m.rc" ) &
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/tcp$m.err")
    [[ -n $port ]] && break
    sleep 0.05
  done
  if [[ -z $port ]]; then
    bad "$m: tcp: no port said: $(cat "$tmp/tcp$m.err")"
    continue
  fi
  timeout 60 gdb -nx -batch -ex 'set confirm off' -ex "target remote 127.0.0.1:$port" \
    -ex 'break bump' -ex 'continue' -ex 'continue' -ex 'delete' -ex 'watch counter' \
    -ex 'continue' -ex 'continue' -ex 'detach' >"$tmp/tcp$m.out" 2>&1
  count "$tmp/tcp$m.out" '^Breakpoint 1, bump' 2 "$m: tcp: two breakpoint stops"
  count "$tmp/tcp$m.out" '^New value = ' 2 "$m: tcp: two watch stops"
  expect "$tmp/tcp$m.out" 'Remote target\) detached' "$m: tcp: detached"
  wait
  [[ $(cat "$tmp/tcp$m.rc") == 0 ]] || bad "$m: tcp: the server exited $(cat "$tmp/tcp$m.rc")"
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
  timeout 60 gdb -nx -batch -ex 'set confirm off' \
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

# 6. lldb (Debian's) as the client, over TCP: breakpoint, registers, threads, a watchpoint.
if command -v lldb >/dev/null; then
  ( "$hwarb" gdbserver 127.0.0.1:0 -- "$prog" 2>"$tmp/lldb.err" >"$tmp/lldb.prog" ) &
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/lldb.err")
    [[ -n $port ]] && break
    sleep 0.05
  done
  # Debian's lldb-14 finds its Python module only with this path.
  PYTHONPATH=$(ls -d /usr/lib/llvm-*/lib/python3*/dist-packages 2>/dev/null | head -1) \
    timeout 60 lldb -b "$prog" -o "gdb-remote 127.0.0.1:$port" -o 'breakpoint set -n bump' \
    -o 'continue' -o 'register read rip' -o 'thread list' -o 'watchpoint set variable counter' \
    -o 'continue' -o 'continue' -o 'kill' >"$tmp/lldb.out" 2>&1
  expect "$tmp/lldb.out" 'stop reason = breakpoint 1\.1' "lldb: breakpoint"
  expect "$tmp/lldb.out" 'rip = 0x[0-9a-f]+ +prog_gdb_target`bump' "lldb: register read rip"
  expect "$tmp/lldb.out" 'thread #1: tid = [0-9]+' "lldb: thread list"
  expect "$tmp/lldb.out" 'Watchpoint created: Watchpoint 1: addr = 0x[0-9a-f]+ size = 8' "lldb: watchpoint set"
  expect "$tmp/lldb.out" 'stop reason = watchpoint 1' "lldb: watchpoint stop"
  count "$tmp/lldb.out" '^new value: 1$' 1 "lldb: the watched value"
  wait
else
  bad "lldb is not installed (scripts/setup installs it)"
fi

exit $fail
