#!/usr/bin/env bash
# Command-line behaviour of hwarb: cli_test.sh HWARB
# Help exits 0 and documents the scenario language; usage errors and unreadable files exit 2.
set -uo pipefail
hwarb=$1
# shellcheck source=cli_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"

run 0 "hwarb --help" --help
for s in "sim" "machine [cpus=N]" "bp NAME" "wide NAME" "modify NAME" "del NAME" \
  "cpu N offline|online" "bts|pt|lbr" "Exit status"; do
  has "$tmp/out" "$s"
done
run 0 "hwarb sim --help" sim --help
for s in "--explain" "FILE" "machine [cpus=N]" "task NAME [parent=P]" "bp NAME [task=T]" \
  "wide NAME" "modify NAME" "del NAME" "cpu N offline|online" "bts NAME" "pt NAME" \
  "ENOSPC" "FILE:LINE: message" "Exit status" "ptrace T attach [layout=x86_64|i386]" \
  "ptrace T peek REG" "ptrace T poke REG=HEX" "ptrace T cont" "ptrace T step" \
  "stopped SIGTRAP dr6=" "run-time scenario error"; do
  has "$tmp/out" "$s"
done
run 2 "no subcommand"
run 2 "unknown subcommand" frobnicate
run 2 "sim without a file" sim
run 2 "sim with an unknown option" sim --bogus x.scn
run 2 "unreadable file" sim "$tmp/does-not-exist.scn"
has "$tmp/err" "cannot read"
[[ -s $tmp/out ]] && { echo "FAIL: unreadable file printed on stdout" >&2; fail=1; }
# A directory and a file whose read fails are unreadable too (not an empty scenario).
run 2 "a directory" sim "$tmp"
has "$tmp/err" "hwarb sim: cannot read $tmp: Is a directory"
run 2 "a read error" sim /proc/self/mem
has "$tmp/err" "hwarb sim: cannot read /proc/self/mem: Input/output error"
# An endless file is read up to the size limit and refused at its line.
run 2 "an endless file" sim /dev/zero
has "$tmp/err" "/dev/zero:1: line longer than the limit of 4096 bytes"

# An empty scenario is valid and prints nothing.
: >"$tmp/empty.scn"
run 0 "empty scenario" sim "$tmp/empty.scn"
[[ -s $tmp/out ]] && { echo "FAIL: empty scenario printed something" >&2; fail=1; }

# A file without a final newline.
printf 'bp a cpu=0' >"$tmp/nonl.scn"
run 0 "no final newline" sim "$tmp/nonl.scn"
has "$tmp/out" "a ok"

# A run-time scenario error (an access by a task in a ptrace stop) exits 2 with FILE:LINE on
# stderr and nothing on stdout, like a parse error.
printf 'machine cpus=1\ntask t\nswitch cpu=0 task=t\nptrace t wait\naccess task=t cpu=0 r addr=0x10 len=1\n' \
  >"$tmp/stopped.scn"
run 2 "access in a ptrace stop" sim "$tmp/stopped.scn"
has "$tmp/err" "stopped.scn:5: access: task 't' is in a ptrace stop (SIGSTOP)"
[[ -s $tmp/out ]] && { echo "FAIL: a run-time scenario error printed on stdout" >&2; fail=1; }

# Output that cannot be written (stdout on a full device) is an error: exit 1, stdout and the
# errno named on stderr.
run_to /dev/full 1 "sim >/dev/full" sim "$tmp/nonl.scn"
count "$tmp/err" '^hwarb sim: stdout: ENOSPC: No space left on device$' 1 "sim >/dev/full: the output and the reason"
for format in "" "--json"; do
  run_to /dev/full 1 "probe $format >/dev/full" probe $format
  count "$tmp/err" '^hwarb probe: stdout: ENOSPC: No space left on device$' 1 "probe $format >/dev/full: the output and the reason"
done

[[ $fail -eq 0 ]] && echo "ok"
exit $fail
