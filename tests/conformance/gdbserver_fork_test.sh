#!/usr/bin/env bash
# `hwarb gdbserver` following forks and vforks as Debian's gdbserver 13.1 does, with real gdb as
# the client (it announces multiprocess+, fork-events+ and vfork-events+):
# gdbserver_fork_test.sh HWARB PROGRAMS_DIR
# The same gdb commands run against `gdbserver -` and against `hwarb gdbserver --stdio` in both
# modes (the default and --software), on tests/programs/gdb_events.c's fork and vfork modes:
#  catch   `catch fork`: gdb stops at the fork, detaches the child, the parent runs to its end
#          (the child's exit status reaches the parent's waitpid);
#  child   `set follow-fork-mode child` with a breakpoint in code only the child runs: gdb
#          detaches the parent and stops the child at the breakpoint (a second inferior);
#  keep    `set detach-on-fork off` (and schedule-multiple): both processes stay, `info
#          inferiors` lists both, the child stops at its breakpoint and exits 3, then the parent
#          runs to its end;
#  vfork   `catch vfork`, then stepi twice over the vfork: the parent's pc stays readable (no
#          "Could not read registers", no SIGSEGV at pc 0) and the program ends normally.
#  signal  tests/programs/own_segv.c's SIGSEGV: `$_siginfo` (qXfer:siginfo:read), `info threads`
#          with the thread's name (qXfer:threads:read), `info proc` (vFile:readlink).
#  syscall `catch syscall write` (entry and return), then `catch syscall` (any: exit_group)
#          on tests/programs/hello.c (QCatchSyscalls); and `catch syscall write` again with a
#          64-byte watch of a page set (the software path's system-call stops: checked on its
#          own), and with a watch of the environment strings on the stack (the single-step
#          method, whose steps would run the call without its stops).
#  vexec   `set follow-fork-mode child` on a vforked child that execs prog_hello: gdb detaches
#          the parent after the child's exec (an exec event of the followed child) and stops at
#          main of the new image.
#  clone   `catch syscall clone`, then stepi over the first of 4 raw clones (no CLONE_THREAD):
#          each clone is a thread of the program for gdb, runs, and the program ends.
#  watch   `set follow-fork-mode child` with `watch watched` set before the fork: gdb detaches the
#          parent, which runs on unwatched and unchanged (its waitpid sees the child's exit 3, it
#          reads back its own write), and the child's write stops it (1 -> 100). Checked against
#          the program's own words and gdb's (not against gdbserver's story: where this machine
#          does not deliver hardware hits, gdbserver's watchpoint never stops). The same with
#          gdb following the parent: the child, let go, writes and exits 3 unharmed (its hit,
#          made before gdb let it go, is not delivered to it as a signal).
# gdb's lines that tell what happened (catchpoints, attach/detach notes, breakpoint hits, the
# inferiors, printed values, exits) must equal gdbserver's, process ids aside.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
if ! command -v gdbserver >/dev/null; then
  skip_case - "every case (compared with Debian's gdbserver)" "Debian's gdbserver is not installed"
  exit $fail
fi
events=$P/prog_gdb_events

# run NAME SERVER PROGRAM-ARGS COMMANDS...: gdb in batch mode against SERVER (a command line that
# takes the program after it: PROGRAM-ARGS are prog_gdb_events's, or a program and its arguments
# when they start with /); output in $tmp/NAME.out, the program's own on $tmp/NAME.err.
run() {
  local name=$1 server=$2 args=$3 c
  shift 3
  [[ $args == /* ]] || args="$events $args"
  local gdb_args=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off'
                  -ex 'set width 0' -ex "target remote | $server $args")
  for c in "$@"; do gdb_args+=(-ex "$c"); done
  timeout 120 gdb "${gdb_args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
# The lines that tell what gdb saw, process and thread ids replaced by N (and the thread names
# gdbserver adds from /proc dropped), the connection column of `info inferiors` cut.
story() {
  grep -E '^(Catchpoint [0-9]+ \(|\[(Detaching|Attaching|New inferior|Inferior|Switching to Thread)|Thread [0-9.]+ .*hit |\$[0-9]+ = |[* ] +[0-9]+ +(process|<null>|Thread)|Could not read|Program (received|terminated)|process [0-9]+$|(cmdline|cwd|exe) = )' "$1" |
    sed -E 's/(process|Thread|pid) [0-9]+(\.[0-9]+)?/\1 N/g; s/ "prog_gdb_events"//; s/^([* ] +[0-9]+ +(process N|<null>)).*/\1/'
}
expect() {  # expect FILE REGEX DESCRIPTION: at least one line matches
  grep -qE -- "$2" "$1" || { bad "$3: no line matches '$2'"; sed 's/^/  | /' "$1" | tail -25 >&2; }
}

# same_story CASE STORY DIFF: STORY equals gdbserver's story of CASE. gdbserver's own session
# is not always the same story: under load its parent's exit can go unreported when both
# processes run at once (seen in `keep`). A story that differs is compared with up to two more
# gdbserver sessions, and the diff against the first is kept for the report.
same_story() {
  local c=$1 story=$2 difffile=$3 again cmds_name="${1}_cmds[@]"
  diff -u "$tmp/$c-gdbserver.story" "$story" >"$difffile" && return 0
  for again in 2 3; do
    run "$c-gdbserver$again" "gdbserver -" "${prog_of[$c]}" "${!cmds_name}"
    story "$tmp/$c-gdbserver$again.out" >"$tmp/$c-gdbserver$again.story"
    if cmp -s "$tmp/$c-gdbserver$again.story" "$story"; then
      echo "note: $c: gdbserver's session $again told the same story as hwarb's; its first did not" >&2
      return 0
    fi
  done
  return 1
}

catch_cmds=('catch fork' continue continue)
child_cmds=('set follow-fork-mode child' 'break in_child' continue 'info inferiors' continue)
keep_cmds=('set detach-on-fork off' 'set schedule-multiple on' 'break in_child' continue 'info inferiors'
           continue 'inferior 1' continue)
vfork_cmds=('catch vfork' continue stepi 'p $pc' stepi 'p $pc' continue)
signal_cmds=(continue 'p $_siginfo.si_signo' 'p $_siginfo.si_code'
             'p $_siginfo._sifields._sigfault.si_addr == &area.spare' 'info threads' 'info proc' kill)
syscall_cmds=('catch syscall write' continue continue 'catch syscall' continue continue)
vexec_cmds=('set follow-fork-mode child' 'break main' continue continue 'info inferiors' continue)
clone_cmds=('catch syscall clone' continue stepi delete continue)
cases=(catch child keep vfork signal syscall vexec clone)
declare -A prog_of=([catch]=fork [child]=fork [keep]=fork [vfork]=vfork [signal]="$P/prog_own_segv 3"
                    [syscall]="$P/prog_hello" [vexec]="vfork-exec $P/prog_hello" [clone]=clone)
for c in "${cases[@]}"; do
  cmds_name="${c}_cmds[@]"
  run "$c-gdbserver" "gdbserver -" "${prog_of[$c]}" "${!cmds_name}"
  story "$tmp/$c-gdbserver.out" >"$tmp/$c-gdbserver.story"
  [[ -s $tmp/$c-gdbserver.story ]] || bad "$c: gdbserver's session told nothing: $(tail -5 "$tmp/$c-gdbserver.out")"
done

for mode in "" "--software"; do
  m=${mode:-default}
  for c in "${cases[@]}"; do
    cmds_name="${c}_cmds[@]"
    run "$c$m" "$hwarb gdbserver $mode --stdio --" "${prog_of[$c]}" "${!cmds_name}"
    story "$tmp/$c$m.out" >"$tmp/$c$m.story"
    same_story "$c" "$tmp/$c$m.story" "$tmp/$c$m.diff" || {
      bad "$m: $c: gdb's story differs from gdbserver's (- gdbserver, + hwarb):"
      sed 's/^/  | /' "$tmp/$c$m.diff" >&2
    }
  done
  # The program's own words: the parent's waitpid saw the child's exit 3.
  expect "$tmp/catch$m.err" '^child status=3$' "$m: catch fork: the child's exit, seen by the parent"
  expect "$tmp/keep$m.err" '^child status=3$' "$m: detach-on-fork off: the child's exit, seen by the parent"
  expect "$tmp/vfork$m.err" '^child status=3$' "$m: catch vfork: the child's exit, seen by the parent"
  expect "$tmp/child$m.out" 'Inferior 2 \(process [0-9]+\) exited with code 03' "$m: follow-fork-mode child: the child's exit"
  expect "$tmp/vfork$m.out" '^\$2 = \(void \(\*\)\(\)\) 0x[0-9a-f]+ <__libc_vfork\+[0-9]+>' "$m: stepi over vfork: the parent's pc"
  expect "$tmp/signal$m.out" '^\$1 = 11$' "$m: \$_siginfo.si_signo of the program's SIGSEGV"
  expect "$tmp/signal$m.out" 'Thread [0-9.]+ "prog_own_segv"' "$m: info threads: the thread's name"
  expect "$tmp/signal$m.out" "^exe = '$P/prog_own_segv'" "$m: info proc: the executable"
  expect "$tmp/syscall$m.out" '^Catchpoint 1 \(returned from syscall write\)' "$m: catch syscall write: its return"
  expect "$tmp/syscall$m.out" '^Catchpoint 2 \(call to syscall exit_group\)' "$m: catch syscall: exit_group"
  # The same catchpoint with a 64-byte watch of libc's data set first: the software path (in
  # both modes: 64 bytes are more than four debug registers cover) protects its page and takes
  # every system-call stop for itself, and must leave gdb the ones it catches.
  run "wsyscall$m" "$hwarb gdbserver $mode --stdio --" "$P/prog_hello" 'break main' continue \
    'watch -l *(char (*)[64])&environ' 'catch syscall write' continue continue delete continue
  expect "$tmp/wsyscall$m.out" '^Catchpoint 3 \(call to syscall write\)' "$m: catch syscall under a software watch: the call"
  expect "$tmp/wsyscall$m.out" '^Catchpoint 3 \(returned from syscall write\)' "$m: catch syscall under a software watch: its return"
  expect "$tmp/wsyscall$m.out" '^\[Inferior 1 \(process [0-9]+\) exited normally\]' "$m: catch syscall under a software watch: the program's end"
  expect "$tmp/wsyscall$m.err" '^hello$' "$m: catch syscall under a software watch: the program's output"
  # And under the single-step method: a watch of the environment strings, on the stack, is
  # stepped instruction by instruction, and a step would run the write without its stops.
  run "ssyscall$m" "$hwarb gdbserver $mode --stdio --" "$P/prog_hello" 'break main' continue \
    'watch -l *(char (*)[64])environ[0]' 'catch syscall write' continue continue delete continue
  expect "$tmp/ssyscall$m.out" '^Catchpoint 3 \(call to syscall write\)' "$m: catch syscall under the single-step method: the call"
  expect "$tmp/ssyscall$m.out" '^Catchpoint 3 \(returned from syscall write\)' "$m: catch syscall under the single-step method: its return"
  expect "$tmp/ssyscall$m.out" '^\[Inferior 1 \(process [0-9]+\) exited normally\]' "$m: catch syscall under the single-step method: the program's end"
  expect "$tmp/ssyscall$m.err" '^hello$' "$m: catch syscall under the single-step method: the program's output"
  expect "$tmp/vexec$m.out" '^\[Detaching vfork parent process [0-9]+ after child exec\]' \
    "$m: follow-fork-mode child: the vforked child's exec"
  expect "$tmp/vexec$m.out" 'hit Breakpoint 1, main \(\) at .*hello\.c' "$m: the exec'd image's main"
  expect "$tmp/clone$m.err" '^clones=4$' "$m: stepi over a raw clone: every clone ran"
  run "watch$m" "$hwarb gdbserver $mode --stdio --" "fork-watch $tmp/parent$m" \
    'set follow-fork-mode child' 'watch watched' continue continue 'p watched' continue
  # The detached parent writes its file once its child has ended: up to 10 s after gdb's end.
  for _ in $(seq 50); do grep -qs '^parent watched=' "$tmp/parent$m" && break; sleep 0.2; done
  touch "$tmp/parent$m"
  expect "$tmp/parent$m" '^child status=3$' "$m: watch, follow the child: the detached parent's waitpid"
  expect "$tmp/parent$m" '^parent watched=10$' "$m: watch, follow the child: the detached parent's own value"
  expect "$tmp/watch$m.out" '^\[Detaching after fork from parent process [0-9]+\]' \
    "$m: watch, follow the child: the parent detached"
  expect "$tmp/watch$m.out" '^New value = 100$' "$m: watch, follow the child: the child's write stops it"
  expect "$tmp/watch$m.out" '^\$1 = 100$' "$m: watch, follow the child: the child's value"
  expect "$tmp/watch$m.out" 'Inferior 2 \(process [0-9]+\) exited with code 03' \
    "$m: watch, follow the child: the child's exit"
  run "watchp$m" "$hwarb gdbserver $mode --stdio --" "fork-watch $tmp/parentp$m" \
    'watch watched' continue continue continue
  touch "$tmp/parentp$m"
  expect "$tmp/parentp$m" '^child status=3$' "$m: watch, follow the parent: the child let go exits 3"
  expect "$tmp/parentp$m" '^parent watched=10$' "$m: watch, follow the parent: its own value"
  expect "$tmp/watchp$m.out" '^\[Detaching after fork from child process [0-9]+\]' \
    "$m: watch, follow the parent: the child detached"
  expect "$tmp/watchp$m.out" '^New value = 10$' "$m: watch, follow the parent: the parent's write"
  expect "$tmp/watchp$m.out" 'exited normally' "$m: watch, follow the parent: the program's end"
done

exit $fail
