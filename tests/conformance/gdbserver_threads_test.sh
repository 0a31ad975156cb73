#!/usr/bin/env bash
# `hwarb gdbserver` with real gdb (Debian's) as the client, in batch mode, on threads and signals
# against tests/programs/gdb_threads.c: gdbserver_threads_test.sh HWARB PROGRAMS_DIR
# Each case runs in the default mode and --software, and through Debian's gdbserver (`gdbserver
# -`) when it is installed: what gdbserver does is the reference.
#  signal   `signal SIGTRAP` in a thread stopped by another thread's breakpoint (not in a
#           signal-delivery stop) reaches the program's SIGTRAP handler, in that thread;
#  ^C       gdb interrupts (its `interrupt`, a second after `continue`) a program whose last
#           stop was the second thread's breakpoint: the stop is the main thread's, as
#           gdbserver's SIGINT to the process is the main thread's to take (gdb's testsuite,
#           continue-pending-status.exp: the thread at the breakpoint reported again starves
#           the other);
#  next     `next` in two threads running through one breakpoint: another thread's breakpoint
#           stop interrupts the first `next`, and the step trap it left behind is no SIGTRAP
#           reported to gdb at the following `next`;
#  twatch   a watch of the main thread alone (`awatch calls thread 1`) while four threads take
#           a mutex beside `calls` 250 times each and pass a breakpoint gdb ignores 1000 times: gdb steps each
#           thread over the breakpoint with the others stopped (a stop of another thread then
#           fails gdb's finish_step_over assertion), the other threads' hits are gdb's to pass
#           over, and under --software the futex calls on the watched page run with it open
#           (one thread's call ending must not protect it under another's: the program would
#           abort, "The futex facility returned an unexpected error code"). The only stop is
#           main's read of `calls`, 1000;
#  hbreak   `hbreak *ADDR` of the C library's printf at the program's first instruction, before
#           the loader maps the library (ADDR from a first session: addresses do not change
#           with randomization off): a debug register takes any address, so gdbserver accepts
#           it; hwarb without a free register plants its int3 when the library is mapped (and
#           again over the text the loader maps over the range it reserved). It stops in
#           printf, then the program ends as usual.
#  masked   `watch counter` of a worker thread that blocks every signal (SIGTRAP too) and adds
#           to it five times, 50 ms apart: a debug register's trap is forced on the thread, so
#           gdbserver stops at each add; a perf breakpoint's SIGTRAP is held by the mask, and
#           hwarb takes it from the hit's ring sample. Five stops, values 1 to 5. hwarb leaves
#           the program's SIGTRAP handler and mask as it set them; the kernel's forced trap
#           under gdbserver resets the handler to the default and unblocks SIGTRAP in the
#           worker (what the program prints says so).
#  clone    a breakpoint whose condition is false (evaluated by the server) on the `syscall`
#           instruction of the C library's clone3, under pthread_create: the server steps the
#           thread over it, and the step's clone stop announces the new thread before the
#           step's trap comes. The step ends in the trap, which is the server's own: the next
#           stop is the first thread's breakpoint in counted(), with no SIGTRAP to gdb.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_gdb_threads
src=$(dirname "${BASH_SOURCE[0]}")/../programs/gdb_threads.c
bump_line=$(grep -n 'bump_line \*/' "$src" | cut -d: -f1)

# gdb_run NAME SERVER COMMANDS...: gdb_batch against SERVER running $prog with $args; its output
# in $tmp/NAME.out, the program's on $tmp/NAME.err.
gdb_run() {
  gdb_batch "$2" "$prog $args" "$tmp/$1.out" "$tmp/$1.err" "${@:3}"
}
# miss FILE WHAT: a check of the session in FILE did not hold. For hwarb's servers that is a
# failure. Debian's gdbserver is the reference that shows the cases are gdb's ordinary
# behaviour; it is not under test, and it has races of its own (a `signal SIGTRAP` to a thread
# stopped inside clone3 is, about one run in ten, reported back to gdb as a SIGTRAP stop and
# never reaches the handler), so its miss is a counted skip.
miss() {
  if [[ $s == gdbserver ]]; then
    skip_case - "reference session: ${2#*: }" "Debian's gdbserver missed it this run"
  else
    bad "$2"
  fi
  sed 's/^/  | /' "$1" | tail -25 >&2
}
expect() {  # expect FILE REGEX DESCRIPTION: at least one line matches
  grep -qE -- "$2" "$1" || miss "$1" "$3: no line matches '$2'"
}
count() {  # count FILE REGEX N DESCRIPTION
  local n
  n=$(grep -cE -- "$2" "$1")
  [[ $n -eq $3 ]] || miss "$1" "$4: $n lines match '$2', expected $3"
}

# A breakpoint, its condition false, on the first `syscall` instruction from the stop on.
cat >"$tmp/syscall-bp.gdb" <<'EOF2'
python
frame = gdb.selected_frame()
for insn in frame.architecture().disassemble(frame.pc(), count=40):
    if insn['asm'].split()[0] == 'syscall':
        gdb.execute('break *%d if main == 0' % insn['addr'])
        break
end
EOF2

# gdb's `interrupt` a second after the `continue` that follows (gdb batch mode has no ^C).
cat >"$tmp/interrupt.gdb" <<'EOF2'
python
import threading, time
def _interrupt_later():
    time.sleep(1)
    gdb.post_event(lambda: gdb.execute("interrupt"))
threading.Thread(target=_interrupt_later).start()
end
continue
EOF2
for s in "${servers[@]}"; do
  args=trap gdb_run "sig-$s" "$s" 'break worker_started' continue 'break on_trap' 'thread 1' \
    'signal SIGTRAP' 'info threads' continue
  expect "$tmp/sig-$s.out" '^Thread 1 .*hit Breakpoint 2, on_trap' "$s: signal SIGTRAP: the handler's breakpoint"
  expect "$tmp/sig-$s.out" '^\* 1 +Thread ' "$s: signal SIGTRAP: in thread 1"
  expect "$tmp/sig-$s.err" '^traps=1$' "$s: signal SIGTRAP: the handler ran once"
  expect "$tmp/sig-$s.out" 'exited with code 01' "$s: signal SIGTRAP: the program's exit"

  args=bump gdb_run "int-$s" "$s" 'break bumper if arg != 0' continue delete "source $tmp/interrupt.gdb" kill
  if grep -qE '^Thread 2 .*hit Breakpoint 1, bumper' "$tmp/int-$s.out"; then
    expect "$tmp/int-$s.out" '^Thread 1 .*received signal SIGINT' "$s: ^C: the main thread's stop"
  else
    # Thread 1's stops at the breakpoint (its condition false, each a round trip to gdb) can keep
    # thread 2 from its own hit for gdb's whole 120 s under a loaded sanitizer build (about 1 run
    # in 3 there): an open defect of the server's scheduling of held stops, counted here.
    skip_case - "$s: ^C" "the second thread never reached its conditional breakpoint within gdb's time"
  fi

  args=bump gdb_run "next-$s" "$s" "break $bump_line" continue next next next next kill
  count "$tmp/next-$s.out" 'SIGTRAP' 0 "$s: next in two threads at one breakpoint: no spurious SIGTRAP"
  expect "$tmp/next-$s.out" 'hit Breakpoint 1, bumper' "$s: next in two threads at one breakpoint: the breakpoint"

  args='count 250' gdb_run "twatch-$s" "$s" 'awatch calls thread 1' 'break counted' 'ignore 2 1000' \
    continue 'info breakpoints' kill
  count "$tmp/twatch-$s.out" 'internal-error|received signal' 0 "$s: thread watch: no gdb error, no signal"
  expect "$tmp/twatch-$s.out" '^Value = 1000$' "$s: thread watch: main's read of calls"
  expect "$tmp/twatch-$s.out" 'already hit 1000 times' "$s: thread watch: every breakpoint hit passed"

  args='count 2' gdb_run "clone-$s" "$s" 'break main' continue 'break __clone3' continue delete \
    "source $tmp/syscall-bp.gdb" 'break counted' continue 'info breakpoints' kill
  count "$tmp/clone-$s.out" 'SIGTRAP' 0 "$s: a false condition on clone3's syscall: no SIGTRAP"
  expect "$tmp/clone-$s.out" '^Breakpoint 3 at ' "$s: a false condition on clone3's syscall: the breakpoint"
  expect "$tmp/clone-$s.out" 'hit Breakpoint 4, counted' "$s: a false condition on clone3's syscall: the next stop"

  gdb_batch "$s" "$P/prog_masked_worker 5 50000" "$tmp/masked-$s.out" "$tmp/masked-$s.err" \
    'break main' continue 'watch counter' continue continue continue continue continue continue
  count "$tmp/masked-$s.out" '^New value = [1-5]$' 5 "$s: a thread that blocks SIGTRAP: a stop at each add"
  expect "$tmp/masked-$s.out" '^New value = 5$' "$s: a thread that blocks SIGTRAP: the last add"
  expect "$tmp/masked-$s.out" 'exited normally' "$s: a thread that blocks SIGTRAP: the program's end"
  if [[ $s == gdbserver ]]; then
    expect "$tmp/masked-$s.err" '^counter=5 handler=changed worker-blocks-trap=no$' \
      "$s: a thread that blocks SIGTRAP: the forced trap's changes to the handler and mask"
  else
    expect "$tmp/masked-$s.err" '^counter=5 handler=own worker-blocks-trap=yes$' \
      "$s: a thread that blocks SIGTRAP: the program's handler and mask untouched"
  fi

  args=count gdb_run "where-$s" "$s" 'break main' continue 'print/x (long)&printf' kill
  at=$(sed -n 's/^\$1 = \(0x[0-9a-f]*\)$/\1/p' "$tmp/where-$s.out")
  if [[ -z $at ]]; then
    miss "$tmp/where-$s.out" "$s: hbreak: printf's address"
  else
    args=count gdb_run "hbreak-$s" "$s" "hbreak *$at" continue 'info breakpoints' continue
    expect "$tmp/hbreak-$s.out" '^Breakpoint 1, .*printf' "$s: hbreak before the library is mapped: the stop in printf"
    expect "$tmp/hbreak-$s.out" 'exited normally' "$s: hbreak before the library is mapped: the program's end"
    expect "$tmp/hbreak-$s.err" '^calls=4000$' "$s: hbreak before the library is mapped: the program's output"
  fi
done
exit $fail
