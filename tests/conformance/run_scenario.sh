#!/usr/bin/env bash
# Runs one conformance scenario: run_scenario.sh HWARB FILE.scn [--explain]
#
#  - FILE.scn with FILE.expected: `hwarb sim FILE.scn` (with --explain when the file name starts
#    with explain_) must exit 0, print exactly FILE.expected on stdout and nothing on stderr.
#  - FILE.scn with FILE.stderr (errors/): it must exit 2, print nothing on stdout and exactly
#    FILE.stderr on stderr.
# The scenario runs from its own directory, so messages name it as FILE.scn.
set -uo pipefail
hwarb=$1
scn=$2
dir=$(dirname "$scn")
base=$(basename "$scn" .scn)
args=(sim)
[[ $base == explain_* || ${3:-} == --explain ]] && args+=(--explain)
args+=("$base.scn")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$dir" && "$hwarb" "${args[@]}" >"$tmp/out" 2>"$tmp/err")
rc=$?
fail=0

if [[ -f $dir/$base.stderr ]]; then
  want_rc=2
  want_out=/dev/null
  want_err=$dir/$base.stderr
elif [[ -f $dir/$base.expected ]]; then
  want_rc=0
  want_out=$dir/$base.expected
  want_err=/dev/null
else
  echo "no $base.expected or $base.stderr beside $scn" >&2
  exit 1
fi

if [[ $rc -ne $want_rc ]]; then
  echo "exit status $rc, expected $want_rc" >&2
  fail=1
fi
if ! diff -u --label expected --label actual "$want_out" "$tmp/out" >&2; then
  echo "stdout differs (above)" >&2
  fail=1
fi
if ! diff -u --label expected --label actual "$want_err" "$tmp/err" >&2; then
  echo "stderr differs (above)" >&2
  fail=1
fi
[[ $fail -eq 0 ]] && echo "ok: ${args[*]}"
exit $fail
