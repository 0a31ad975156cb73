#!/usr/bin/env bash
# ctest conformance.gdb_testsuite: gdb 13.1's own testsuite, the CI subset (ci-subset beside
# this file), under Debian's gdbserver and both modes of `hwarb gdbserver`:
#   gdb_testsuite_test.sh HWARB BUILD_DIR
# Fails when a test that passes under Debian's gdbserver does not pass under a hwarb board and is
# not in known-exceptions. Without gdb's source (`apt-get source gdb` needs the network) the
# whole suite is a counted skip. gdb's source is kept in $HWARB_GDB_SRC (default:
# BUILD_DIR/gdb-testsuite/src), the runs in BUILD_DIR/gdb-testsuite/ci.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail=0
# shellcheck source=../support/skips.sh
source "$here/../support/skips.sh"
export HWARB_GDB_SRC=${HWARB_GDB_SRC:-$2/gdb-testsuite/src}
"$here/../../scripts/gdb-testsuite" --subset ci --hwarb "$1" --out "$2/gdb-testsuite/ci"
rc=$?
if [[ $rc -eq 3 ]]; then
  skip_case - "gdb 13.1 testsuite (CI subset, 3 boards)" \
    "gdb's source or dejagnu cannot be had here (apt-get failed: no network?)"
  exit $fail
fi
exit $rc
