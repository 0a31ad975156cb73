# skips.sh — sourced by the shell suites: how a part that cannot run here is reported.
#
#   skip_case FACILITY WHAT REASON
#
# prints "SKIP: SUITE: WHAT: REASON" and appends the line to $HWARB_SKIP_LOG (when set), where
# scripts/test counts it; FACILITY ("hits", "bts", or "-" for none that a runner can promise)
# named in HWARB_REQUIRE makes it a failure instead (sets fail=1). SUITE is the running script's
# name. The caller must not run the part.
skip_case() {
  local facility=$1 what=$2 reason=$3 suite
  suite=$(basename "$0" .sh)
  if [[ $facility != - && ,${HWARB_REQUIRE:-}, == *,"$facility",* ]]; then
    echo "FAIL: $suite: $what: HWARB_REQUIRE=$facility but $reason" >&2
    fail=1
    return
  fi
  local line="SKIP: $suite: $what: $reason"
  echo "$line" >&2
  if [[ -n ${HWARB_SKIP_LOG:-} ]]; then
    echo "$line" >>"$HWARB_SKIP_LOG" || { echo "FAIL: cannot append to $HWARB_SKIP_LOG" >&2; fail=1; }
  fi
}

# A name HWARB_REQUIRE may not hold fails the suite at once: a misspelt requirement never passes.
_required=${HWARB_REQUIRE:-}
for _facility in ${_required//,/ }; do
  case $_facility in
    hits | bts) ;;
    *)
      echo "FAIL: HWARB_REQUIRE: unknown facility '$_facility' (known: hits, bts)" >&2
      exit 2
      ;;
  esac
done
unset _facility _required
