#!/usr/bin/env bash
# `hwarb gdbserver` in non-stop mode with real gdb (Debian's) as the client:
# gdbserver_nonstop_test.sh HWARB PROGRAMS_DIR
# gdb runs interactively under expect (batch mode runs no event loop between commands, and
# non-stop's stops come while gdb waits at its prompt) with `set non-stop on`, against
# `prog_gdb_threads spin` (two threads spin, one of them calls tick() and writes
# tick_page.ticks now and then; main waits in pthread_join). Each case runs in the default mode,
# --software, and through Debian's gdbserver (`gdbserver -`) when it is installed: what gdbserver
# does is the reference.
#  breakpoint  `continue -a &`: tick's breakpoint stops the one thread, `info threads` shows
#              the two others running, and the other spinner's counter goes on meanwhile;
#  interrupt   `interrupt -a`: every thread stops (none running in `info threads`);
#  one thread  `thread 1` + `continue &`: it alone runs; `interrupt` stops it;
#  watch       `watch tick_page.ticks` + `continue -a &`: the write stops its thread with old
#              and new values while the other spinner runs on.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_gdb_threads
command -v expect >/dev/null || { skip_case - "non-stop sessions" "expect is not installed"; exit $fail; }


# The session: its checks print "CHECK ok|miss: WHAT" on lines of their own.
cat >"$tmp/session.exp" <<'EOF'
set timeout 30
log_user 1
set target [lindex $argv 0]
set env(TERM) dumb
spawn gdb -nx -q -ex "set confirm off" -ex "set pagination off" -ex "set width 0" \
  -ex "set height 0" -ex "set style enabled off" -ex "set non-stop on" \
  -ex "target remote | $target"
proc check {ok what} {
  send_user "\nCHECK [expr {$ok ? "ok" : "miss"}]: $what\n"
}
# Sends a command and returns what gdb printed up to its next prompt (what gdb printed before,
# stops that came while it waited at its prompt, is dropped first).
proc run {cmd} {
  expect -timeout 0 -re ".+" { exp_continue }
  send "$cmd\n"
  expect {
    -re "\r\n\\(gdb\\) " { return $expect_out(buffer) }
    timeout { return "" }
  }
}
# `info threads` until no thread runs (their stops come asynchronously): the last listing.
proc all_stopped {} {
  for {set i 0} {$i < 50} {incr i} {
    set out [run "info threads"]
    if {![string match "*(running)*" $out] && [string match "*Thread*" $out]} { return $out }
    after 200
  }
  return $out
}
proc counter {expr} {
  set out [run "print $expr"]
  if {[regexp {\$[0-9]+ = ([0-9]+)} $out -> v]} { return $v }
  return -1
}
# While one thread is stopped: the two others run, and the other spinner's counter goes on.
proc others_run {what} {
  after 300
  set out [run "info threads"]
  check [expr {[regexp -all {\(running\)} $out] == 2}] "$what: two threads run meanwhile"
  set a [counter "spins\[0\]"]
  after 300
  set b [counter "spins\[0\]"]
  check [expr {$a >= 0 && $b >= 0 && $b != $a}] "$what: the other spinner runs on ($a, then $b)"
}
expect {
  -re "\\(gdb\\) $" {}
  timeout { check 0 "gdb's first prompt"; exit 1 }
}
run "break tick"
send "continue -a &\n"
expect {
  -re {Thread [0-9]+ [^\r\n]* hit Breakpoint 1, tick} { check 1 "breakpoint: the stop" }
  timeout { check 0 "breakpoint: the stop" }
}
others_run breakpoint
run "delete"
run "interrupt -a"
set out [all_stopped]
check [expr {![string match "*(running)*" $out]}] "interrupt: every thread stopped"
run "thread 1"
run "continue &"
after 300
set out [run "info threads"]
check [expr {[regexp -all {\(running\)} $out] == 1 && [regexp {\n\* 1 [^\n]*\(running\)} $out]}] \
  "one thread: thread 1 alone runs"
run "interrupt"
set out [all_stopped]
check [expr {![string match "*(running)*" $out]}] "one thread: interrupt stops it"
run "watch tick_page.ticks"
send "continue -a &\n"
expect {
  -re {atchpoint 2: tick_page.ticks\r\n\r\nOld value = ([0-9]+)\r\nNew value = ([0-9]+)} {
    check [expr {$expect_out(2,string) == $expect_out(1,string) + 1}] "watch: the write's values"
  }
  timeout { check 0 "watch: the stop" }
}
others_run watch
run "delete"
run "interrupt -a"
all_stopped
send "kill\n"
expect -re "\\(gdb\\) $"
send "quit\n"
expect eof
EOF

for s in "${servers[@]}"; do
  case $s in
    hwarb) target="$hwarb gdbserver --stdio -- $prog spin" ;;
    hwarb-software) target="$hwarb gdbserver --software --stdio -- $prog spin" ;;
    gdbserver) target="gdbserver - $prog spin" ;;
  esac
  timeout 300 expect "$tmp/session.exp" "$target" >"$tmp/$s.out" 2>&1
  oks=$(grep -c '^CHECK ok' "$tmp/$s.out")
  if [[ $oks -ne 9 ]] || grep -q '^CHECK miss' "$tmp/$s.out"; then
    if [[ $s == gdbserver ]]; then
      skip_case - "reference session" "Debian's gdbserver missed a check this run"
    else
      bad "$s: $oks of 9 checks held"
    fi
    grep -E '^CHECK' "$tmp/$s.out" | sed 's/^/  | /' >&2
    tr -d '\r' <"$tmp/$s.out" | tail -30 | sed 's/^/  | /' >&2
  fi
done
exit $fail
