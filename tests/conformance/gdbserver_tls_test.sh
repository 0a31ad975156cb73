#!/usr/bin/env bash
# `hwarb gdbserver` and thread-local variables (qGetTLSAddr) with real gdb (Debian's) as the
# client, in batch mode, against tests/programs/tls_counter.c: gdbserver_tls_test.sh HWARB
# PROGRAMS_DIR. Each case runs in the default mode and --software, and through Debian's gdbserver
# (`gdbserver -`) when it is installed; gdb's account must be the same word for word.
#  threads  3 threads hold, each with its own tls_counter (1, 2, 3) and errno (101, 102, 103;
#           libc's thread-local, so a library's block): `print` in every thread, the main
#           thread's copies (0), and the same through `thread N` one by one;
#  early    `print tls_counter` at the first instruction, before the dynamic linker has loaded
#           libc: gdb's "Cannot find thread-local storage" error, as under gdbserver.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_tls_counter
ready_line=$(grep -n 'ready_line \*/' "$(dirname "${BASH_SOURCE[0]}")/../programs/tls_counter.c" |
  cut -d: -f1)
# What gdb says of the values and the threads (NAME.out, then its errors), process and thread
# ids aside.
account() {
  cat "$1" "${1%.out}.err" |
    grep -E '^\$[0-9]+ = |^Thread [0-9]+ \(|^\[Switching to thread|Cannot find thread-local|qGetTLSAddr' |
    sed -E 's/Thread [0-9]+\.[0-9]+/Thread P.T/g; s/thread [0-9]+ \(Thread [^)]*\)/thread N/'
}

servers=(hwarb hwarb-software)
if command -v gdbserver >/dev/null; then
  servers+=(gdbserver)
else
  skip_case - "the comparison with Debian's gdbserver (the reference)" "gdbserver is not installed"
fi
for s in "${servers[@]}"; do
  gdb_batch "$s" "$prog 3 1 hold" "$tmp/threads-$s.out" "$tmp/threads-$s.err" \
    "break $ready_line" continue 'thread apply all print tls_counter' \
    'thread apply all print errno' 'thread 2' 'print tls_counter' 'print errno' 'thread 4' \
    'print tls_counter' 'print errno' 'thread 1' 'print tls_counter' kill
  gdb_batch "$s" "$prog 3 1 hold" "$tmp/early-$s.out" "$tmp/early-$s.err" 'print tls_counter' \
    'print errno' kill
done

# The expected values, whatever the server.
want_threads='$1 = 3
$2 = 2
$3 = 1
$4 = 0
$5 = 103
$6 = 102
$7 = 101
$8 = 0
$9 = 1
$10 = 101
$11 = 3
$12 = 103
$13 = 0'
for s in hwarb hwarb-software; do
  got=$(account "$tmp/threads-$s.out" | grep '^\$')
  if [[ $got != "$want_threads" ]]; then
    bad "$s: each thread's tls_counter and errno"
    sed 's/^/  | /' "$tmp/threads-$s.out" "$tmp/threads-$s.err" | tail -40 >&2
  fi
  account "$tmp/early-$s.out" | grep -q 'Cannot find thread-local storage' || {
    bad "$s: before libc: gdb's 'Cannot find thread-local storage'"
    sed 's/^/  | /' "$tmp/early-$s.out" "$tmp/early-$s.err" >&2
  }
  if [[ " ${servers[*]} " == *" gdbserver "* ]]; then
    for c in threads early; do
      if ! diff <(account "$tmp/$c-gdbserver.out") <(account "$tmp/$c-$s.out") >"$tmp/$c-$s.diff"; then
        bad "$s: $c: gdb's account differs from Debian's gdbserver's (< gdbserver, > $s)"
        sed 's/^/  | /' "$tmp/$c-$s.diff" >&2
      fi
    done
  fi
done
exit $fail
