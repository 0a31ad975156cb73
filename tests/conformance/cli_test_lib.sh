# cli_test_lib.sh — what the real-process CLI tests (watch_cli_test.sh and others) share;
# sourced after they set `hwarb`. Sets `tmp` (a directory removed at exit, with the process in
# `spin`, if any, killed) and `fail` (0; any failed check sets 1).
fail=0
checks_off=0  # 1 after a run withdrawn for lost hits (run_to): its output is not checked
refusal_wanted=0  # 1 while the runs are meant to be refused --hardware (no hits delivered here)
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
tmp=$(mktemp -d)
# Only the suite's own shell cleans up: a background job signalled between its fork and its exec
# (a test's SIGINT to a hwarb just started) is a copy of this shell that would run the trap too.
trap '[[ $BASHPID == "$$" ]] && rm -rf "$tmp"; [[ $BASHPID == "$$" && -n "${spin:-}" ]] && kill -9 "$spin" 2>/dev/null' EXIT

bad() {  # bad WHAT...: a failed check, said on standard error
  echo "FAIL: $*" >&2
  fail=1
}
run() {  # run WANT_RC DESCRIPTION ARGS...  (stdout -> $tmp/out, stderr -> $tmp/err)
  run_to "$tmp/out" "$@"
}
run_to() {  # run_to STDOUT WANT_RC DESCRIPTION ARGS...  (stdout -> STDOUT, e.g. /dev/full)
  # A --hardware run that hwarb still refuses after `settled`'s tries because its probe saw hits
  # lost is a counted skip (unless refusal_wanted), and the output checks (has, count) of that
  # run pass until the next.
  local to=$1 want=$2 what=$3
  shift 3
  checks_off=0
  settled "$to" "$tmp/err" "$hwarb" "$@"
  local rc=$?
  if [[ $rc -ne $want || $refusal_wanted -eq 0 ]] && delivery_refused "$rc" "$tmp/err" "$@"; then
    hardware_withdrawn "$tmp/err" "${what% (--hardware)}" ||
      skip_case hits "$what (default mode)" "$(grep -m1 -oE 'software mode, .*' "$tmp/err")"
    checks_off=1
    return
  fi
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $what: exit $rc, expected $want" >&2
    # Only a regular file is shown: /dev/full reads as endless zeros.
    [[ -f $to ]] && head -40 "$to" | sed 's/^/  out: /' >&2
    sed 's/^/  err: /' "$tmp/err" >&2
    fail=1
  fi
}
has() {  # has FILE TEXT [DESCRIPTION]
  [[ $checks_off -eq 1 ]] && return 0
  if ! grep -qF -- "$2" "$1"; then
    echo "FAIL: ${3:-output}: output lacks '$2'" >&2
    head -20 "$1" | sed 's/^/  | /' >&2
    fail=1
  fi
}
handles() {  # handles PID SIGNUM: waits (up to 20 s) until process PID has a handler for SIGNUM
  # A background job of a script starts with SIGINT ignored, and a loaded machine may take
  # seconds to start hwarb: a signal sent before hwarb installs its handler would be lost.
  local pid=$1 bit=$((1 << ($2 - 1))) mask
  for _ in $(seq 400); do
    mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
    [[ -n $mask ]] && (((16#$mask & bit) != 0)) && return 0
    sleep 0.05
  done
  echo "FAIL: process $pid never handled signal $2" >&2
  fail=1
  return 1
}
handles_quietly() {  # handles_quietly PID SIGNUM: as handles, false without a failure when
  # PID ends (or never handles SIGNUM within 20 s): the caller decides
  local pid=$1 bit=$((1 << ($2 - 1))) mask
  for _ in $(seq 400); do
    mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
    [[ -z $mask ]] && ! kill -0 "$pid" 2>/dev/null && return 1
    [[ -n $mask ]] && (((16#$mask & bit) != 0)) && return 0
    sleep 0.05
  done
  return 1
}
# Some KVM guests lose the breakpoint hits of one probe and deliver every hit of the next: hwarb
# then refuses --hardware for that one run, and the default mode runs in software. delivery_refused
# tells such a run; settled runs a command again (at most 3 runs, 0.2 s apart) while it is one.
delivery_refused() {  # delivery_refused RC ERRFILE ARGS...: true when hwarb's probe saw some
  # breakpoint hits lost (or had no canary to tell) and ARGS asked for --hardware (refused: exit
  # 1) or for neither mode (run in software) on a program of its own: an attached one (-p) has
  # run watched already, and cannot run again
  local rc=$1 err=$2
  shift 2
  [[ " $* " == *" --software "* ]] && return 1
  if [[ " $* " == *" --hardware "* ]]; then
    [[ $rc -eq 1 ]] &&
      grep -qE 'hardware mode not possible: (breakpoints open on this machine but their hits are not all|no canary could show)' "$err"
  else
    [[ " $* " != *" -p "* ]] && grep -qE 'software mode, .*\((breakpoints open on this machine but their hits are not all|no canary could show)' "$err"
  fi
}
settled() {  # settled OUTFILE ERRFILE COMMAND...: runs COMMAND (stdout to OUTFILE, stderr to
  # ERRFILE) again while delivery_refused; returns its last status
  local out=$1 err=$2 rc try
  shift 2
  for try in 1 2 3; do
    "$@" >"$out" 2>"$err"
    rc=$?
    [[ $refusal_wanted -eq 0 ]] && delivery_refused "$rc" "$err" "$@" || break
    [[ $try -lt 3 ]] && sleep 0.2
  done
  return "$rc"
}
bg_settled() {  # bg_settled OUT ERR COMMAND...: starts COMMAND in the background (stdout to OUT,
  # stderr to ERR), its pid in `bg_pid`, and waits (at most 20 s) until ERR names hwarb's mode or
  # COMMAND ended; one that ended refused as delivery_refused tells is started again (at most 3
  # times, 0.2 s apart). Any other end is left to the caller's wait.
  local out=$1 err=$2 try state
  shift 2
  for try in 1 2 3; do
    "$@" >"$out" 2>"$err" &
    bg_pid=$!
    for _ in $(seq 400); do
      grep -q ' mode, ' "$err" 2>/dev/null && return 0
      state=$(awk '{print $3}' "/proc/$bg_pid/stat" 2>/dev/null)
      [[ $state == Z || -z $state ]] && break
      sleep 0.05
    done
    delivery_refused 1 "$err" "$@" || return 0
    wait "$bg_pid"
    [[ $try -lt 3 ]] && sleep 0.2
  done
}
hardware_withdrawn() {  # hardware_withdrawn ERRFILE WHAT: true (a counted skip of WHAT, and
  # --hardware dropped from `modes` when set) when hwarb refused --hardware because this run's
  # probe found hits not delivered. Some KVM guests deliver every canary hit in one probe and
  # lose them in the next: the suite's own probe decided the modes, hwarb's decides each run.
  grep -q 'hardware mode not possible' "$1" 2>/dev/null || return 1
  skip_case hits "$2 (--hardware)" "$(grep -m1 -o 'hardware mode not possible.*' "$1")"
  if [[ -n ${modes+x} ]]; then
    local kept=() m
    for m in "${modes[@]}"; do [[ $m == --hardware ]] || kept+=("$m"); done
    modes=("${kept[@]}")
  fi
  return 0
}
lines() {  # lines FILE REGEX: prints how many lines match
  grep -cE -- "$2" "$1"
}
count() {  # count FILE REGEX WANT DESCRIPTION
  [[ $checks_off -eq 1 ]] && return 0
  local n
  n=$(lines "$1" "$2")
  if [[ $n -ne $3 ]]; then
    echo "FAIL: $4: $n lines match '$2', expected $3" >&2
    head -20 "$1" | sed 's/^/  | /' >&2
    fail=1
  fi
}
