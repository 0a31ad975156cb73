# gdb_test_lib.sh — what every conformance test with gdb as the client starts with; sourced
# with the test's arguments: source gdb_test_lib.sh HWARB PROGRAMS_DIR
# It sets strict mode, $hwarb and $P (both absolute: a case may run gdb from another
# directory), a scratch directory $tmp removed at exit, $fail (0) with bad() to record a
# failure, skip_case (tests/support/skips.sh), $servers (hwarb in both modes, then Debian's
# gdbserver, the reference, when it is installed: a counted skip otherwise), and ends the test as
# a failure when gdb is missing (scripts/setup installs it).
set -uo pipefail
hwarb=$(realpath "$1")
P=$(realpath "$2")
tmp=$(mktemp -d)
# The suite's own shell only: a job signalled between its fork and its exec is a copy of it.
trap '[[ $BASHPID == "$$" ]] && rm -rf "$tmp"' EXIT
fail=0
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
command -v gdb >/dev/null || { echo "FAIL: gdb is not installed (scripts/setup installs it)" >&2; exit 1; }
# gdb_batch SERVER PROGRAM OUT ERR COMMANDS...: gdb in batch mode (remotetimeout 30, no confirm,
# pagination or width) against SERVER — "hwarb", "hwarb-software" (--software) or "gdbserver"
# (Debian's, the reference) — running PROGRAM (a command line: the program and its arguments),
# then COMMANDS; gdb's output in OUT, its errors and the program's output in ERR.
gdb_batch() {
  local server=$1 program=$2 out=$3 err=$4
  shift 4
  local target
  case $server in
    hwarb) target="$hwarb gdbserver --stdio -- $program" ;;
    hwarb-software) target="$hwarb gdbserver --software --stdio -- $program" ;;
    gdbserver) target="gdbserver - $program" ;;
  esac
  local cmds=(-nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' -ex 'set pagination off'
              -ex 'set width 0' -ex "target remote | $target")
  for c in "$@"; do cmds+=(-ex "$c"); done
  timeout 240 gdb "${cmds[@]}" >"$out" 2>"$err"
}
servers=(hwarb hwarb-software)
if command -v gdbserver >/dev/null; then
  servers+=(gdbserver)
else
  skip_case - "the cases through Debian's gdbserver (the reference)" "gdbserver is not installed"
fi
