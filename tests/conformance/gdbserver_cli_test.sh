#!/usr/bin/env bash
# gdbserver's command line, served by `hwarb gdbserver`: gdbserver_cli_test.sh HWARB PROGRAMS_DIR
#   hwarb gdbserver [--once] [--attach] COMM [PROG ARGS | PID]
# The same gdb session (Debian's gdb, batch mode) against Debian's gdbserver and against hwarb
# with the same command line must show the same program output; the forms gdbserver has and
# hwarb does not serve (UDP) are usage errors (exit 2) naming them, as are
# the malformed ones and a host name that does not resolve, and nothing is run then. IPv6
# (tcp6:[::1]) is served where the machine has an IPv6 loopback.
set -uo pipefail
hwarb=$(realpath "$1")
P=$(realpath "$2")
tmp=$(mktemp -d)
fail=0
# The suite's own shell only: a job signalled between its fork and its exec is a copy of it.
trap '[[ $BASHPID == "$$" ]] && rm -rf "$tmp"' EXIT
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
# shellcheck source=../support/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/ports.sh"
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
for tool in gdb gdbserver; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool is not installed (scripts/setup installs it)" >&2; exit 1; }
done

# serve NAME SERVER ARGS...: starts SERVER ARGS in the background (stderr to $tmp/NAME.srv,
# stdout to $tmp/NAME.prog), waits for its port, and runs gdb's session against it: `continue`
# to the program's end. gdb's output in $tmp/NAME.gdb. gdb connects to $connect_host (default
# 127.0.0.1).
serve() {
  local name=$1 port=
  shift
  "$@" >"$tmp/$name.prog" 2>"$tmp/$name.srv" &
  local server=$!
  port=$(listening_port "$tmp/$name.srv" "$server")
  if [[ -z $port ]]; then
    bad "$name: no port: $(cat "$tmp/$name.srv")"
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    return
  fi
  timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex "target remote ${connect_host:-127.0.0.1}:$port" -ex continue >"$tmp/$name.gdb" 2>&1
  timeout 30 tail --pid="$server" -f /dev/null
  wait "$server"
  echo $? >"$tmp/$name.rc"
}

# 1. PROG ARGS after COMM, with options and a "--" of the program's own: both servers run
# /bin/echo with the same argv, the program's output on the server's stdout.
serve ref_echo gdbserver --once 127.0.0.1:0 /bin/echo -e 'a\tb' -- -p 1
serve hw_echo "$hwarb" gdbserver --once 127.0.0.1:0 /bin/echo -e 'a\tb' -- -p 1
printf 'a\tb -- -p 1\n' >"$tmp/want_echo"
cmp -s "$tmp/ref_echo.prog" "$tmp/want_echo" ||
  bad "gdbserver's echo printed '$(cat "$tmp/ref_echo.prog")' (the reference is wrong)"
cmp -s "$tmp/hw_echo.prog" "$tmp/ref_echo.prog" ||
  bad "PROG ARGS: hwarb's echo printed '$(cat "$tmp/hw_echo.prog")', gdbserver's '$(cat "$tmp/ref_echo.prog")'"
grep -q 'exited normally' "$tmp/hw_echo.gdb" || bad "PROG ARGS: gdb: $(tail -3 "$tmp/hw_echo.gdb")"

# 1b. IPv6, gdbserver's tcp6: form: gdb connects to [::1].
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
  connect_host='tcp6:[::1]' serve hw_v6 "$hwarb" gdbserver --once 'tcp6:[::1]:0' /bin/echo over-ipv6
  grep -qx 'over-ipv6' "$tmp/hw_v6.prog" || bad "tcp6: the program printed '$(cat "$tmp/hw_v6.prog")'"
  grep -q 'exited normally' "$tmp/hw_v6.gdb" || bad "tcp6: gdb: $(tail -3 "$tmp/hw_v6.gdb")"
else
  skip_case - "tcp6: gdb over [::1]" "this machine has no IPv6 loopback"
fi
[[ $(cat "$tmp/hw_echo.rc" 2>/dev/null) == 0 ]] || bad "PROG ARGS: hwarb exited $(cat "$tmp/hw_echo.rc" 2>/dev/null)"

# 2. gdbserver's "tcp:" prefix and a program found in the working directory.
cp "$P/prog_hello" "$tmp/hello_here"
(cd "$tmp" && serve hw_tcp "$hwarb" gdbserver tcp:127.0.0.1:0 hello_here)
grep -q '^hello$' "$tmp/hw_tcp.prog" || bad "tcp: prefix: program output '$(cat "$tmp/hw_tcp.prog")'"

# 3. stdio as COMM: `target remote | hwarb gdbserver stdio PROG ARGS`; the program's output goes
# to stderr (stdout is the protocol).
timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' \
  -ex "target remote | $hwarb gdbserver stdio /bin/echo over stdio" -ex continue \
  >"$tmp/stdio.gdb" 2>"$tmp/stdio.err"
grep -q '^over stdio$' "$tmp/stdio.err" || bad "stdio: program output missing: $(tail -3 "$tmp/stdio.err")"
grep -q 'exited normally' "$tmp/stdio.gdb" || bad "stdio: gdb: $(tail -3 "$tmp/stdio.gdb")"

# 4. --attach COMM PID: gdb attaches, detaches; the program runs on to its own end.
"$P/prog_ticker" "$tmp/tick.pid" 100 0 50000 >"$tmp/tick.out" 2>&1 &
ticker=$!
for _ in $(seq 200); do [[ -s $tmp/tick.pid ]] && break; sleep 0.02; done
"$hwarb" gdbserver --attach 127.0.0.1:0 "$ticker" >/dev/null 2>"$tmp/attach.srv" &
server=$!
port=$(listening_port "$tmp/attach.srv")
timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex "target remote 127.0.0.1:$port" \
  -ex 'info threads' -ex detach >"$tmp/attach.gdb" 2>&1
wait "$server"
wait "$ticker"
rc=$?
[[ $rc -eq 0 ]] || bad "--attach: the program exited $rc"
grep -q '^ticks=100$' "$tmp/tick.out" || bad "--attach: program output '$(cat "$tmp/tick.out")'"
grep -q 'detached' "$tmp/attach.srv" || bad "--attach: the server said: $(cat "$tmp/attach.srv")"

# 4b. --wrapper WRAPPER... --: the program runs through the wrapper (env sets a variable it
# prints), against gdbserver and hwarb alike; without the wrapper the variable is unset.
# The same with gdbserver's testing option --disable-packet=T,threads (S stop replies, no thread
# packets): gdb copes with either server alike.
for server in gdbserver "$hwarb gdbserver"; do
  [[ $server == gdbserver ]] && ! command -v gdbserver >/dev/null && continue
  for disable in "" --disable-packet=T,threads; do
    timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' \
      -ex "target remote | $server $disable --wrapper env HWARB_WRAPPED=yes -- stdio /usr/bin/printenv HWARB_WRAPPED" \
      -ex continue >"$tmp/wrap.gdb" 2>"$tmp/wrap.err"
    grep -qx 'yes' "$tmp/wrap.err" || bad "--wrapper ($server $disable): program output: $(tail -3 "$tmp/wrap.err")"
    grep -q 'exited normally' "$tmp/wrap.gdb" || bad "--wrapper ($server $disable): gdb: $(tail -3 "$tmp/wrap.gdb")"
  done
done

# 4c. Without --once, a client that disconnects leaves the stopped program to the next one, as
# gdbserver "reopens the connection": gdb stops at main, disconnects, connects again and finds
# the program where it left it, then runs it to its end; both servers alike.
for server in gdbserver "$hwarb gdbserver"; do
  name=reconnect_${server%% *}
  name=${name##*/}
  $server 127.0.0.1:0 "$P/prog_hello" >"$tmp/$name.prog" 2>"$tmp/$name.srv" &
  srv=$!
  port=$(listening_port "$tmp/$name.srv")
  timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
    -ex "target remote 127.0.0.1:$port" -ex 'break main' -ex continue -ex disconnect \
    -ex "target remote 127.0.0.1:$port" -ex 'p $pc' -ex continue "$P/prog_hello" \
    >"$tmp/$name.gdb" 2>&1
  timeout 30 tail --pid="$srv" -f /dev/null
  wait "$srv" 2>/dev/null
  grep -qE '^\$1 = .* <main\+[0-9]+>' "$tmp/$name.gdb" ||
    bad "reconnect ($server): the second client's pc: $(grep -E '^\$1|rror' "$tmp/$name.gdb")"
  grep -q 'exited normally' "$tmp/$name.gdb" || bad "reconnect ($server): gdb: $(tail -3 "$tmp/$name.gdb")"
  grep -qx hello "$tmp/$name.prog" || bad "reconnect ($server): program output '$(cat "$tmp/$name.prog")'"
done

# 4d. A signal to a server waiting for its next client (the last one disconnected with a watch
# set in an attached program): it ends as with a client (exit 0, "interrupted"), the program let
# go unharmed, its watch and int3s gone.
"$P/prog_ticker" "$tmp/term.pid" 3000 0 1000 >"$tmp/term.out" 2>&1 &
ticker=$!
for _ in $(seq 200); do [[ -s $tmp/term.pid ]] && break; sleep 0.05; done
"$hwarb" gdbserver --multi --attach 127.0.0.1:0 "$ticker" >/dev/null 2>"$tmp/term.srv" &
srv=$!
port=$(listening_port "$tmp/term.srv")
timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' -ex 'set confirm off' \
  -ex "target extended-remote 127.0.0.1:$port" -ex 'watch -l ticks' -ex continue -ex disconnect \
  "$P/prog_ticker" >"$tmp/term.gdb" 2>&1
for _ in $(seq 200); do grep -q 'waiting for the next one' "$tmp/term.srv" && break; sleep 0.05; done
kill -TERM "$srv"
wait "$srv"
rc=$?
[[ $rc -eq 0 ]] || bad "SIGTERM while waiting for a client: exit $rc: $(tail -2 "$tmp/term.srv")"
grep -q 'hwarb gdbserver: interrupted' "$tmp/term.srv" ||
  bad "SIGTERM while waiting for a client: $(tail -2 "$tmp/term.srv")"
wait "$ticker"
rc=$?
[[ $rc -eq 0 ]] && grep -qx 'ticks=3000' "$tmp/term.out" ||
  bad "SIGTERM while waiting for a client: the program exited $rc: $(cat "$tmp/term.out")"

# 5. Usage errors: exit 2, a message naming the field, and no program started.
refused() {  # refused TEXT ARGS...: `hwarb gdbserver ARGS` exits 2 saying TEXT
  local text=$1
  shift
  timeout 30 "$hwarb" gdbserver "$@" >"$tmp/ref.out" 2>"$tmp/ref.err"
  local rc=$?
  [[ $rc -eq 2 ]] || bad "gdbserver $*: exit $rc (want 2)"
  grep -qF -- "$text" "$tmp/ref.err" || bad "gdbserver $*: stderr '$(cat "$tmp/ref.err")' lacks '$text'"
  grep -q 'is process' "$tmp/ref.err" && bad "gdbserver $*: a program was started"
}
refused "--disable-packet: 'foo' is not one of" --disable-packet=foo 127.0.0.1:0 /bin/true
refused 'only TCP is served' 'udp:127.0.0.1:0' /bin/true
refused "host: 'no-such-host.invalid': cannot resolve name" no-such-host.invalid:0 /bin/true
refused "--attach: PID 'x' is not a process id" --attach 127.0.0.1:0 x
refused '--attach: give exactly one PID' --attach 127.0.0.1:0 1 2
refused "after COMM and -p or -t" 127.0.0.1:0 -p 1 /bin/true
refused 'contradicts' --disable-randomization --no-disable-randomization 127.0.0.1:0 /bin/true
refused "is not a number from 0 to 65535" 127.0.0.1:99999 /bin/true
refused "--debug-format: EINVAL: 'often' is not all, none or timestamp" --debug-format=often \
  127.0.0.1:0 /bin/true
refused "--debug-file: ENOENT" --debug-file="$tmp/no/such/dir/log" 127.0.0.1:0 /bin/true

# 5b. gdbserver's debugging options: --debug and --remote-debug log the events and the packets
# (each line timed with --debug-format=timestamp) to --debug-file, not among the program's
# output or the server's own lines; the session is the same as without them.
timeout 120 gdb -nx -batch -ex 'set remotetimeout 30' \
  -ex "target remote | $hwarb gdbserver --debug --remote-debug --event-loop-debug --debug-format=timestamp --debug-file=$tmp/debug.log stdio $P/prog_hello" \
  -ex continue >"$tmp/debug.gdb" 2>"$tmp/debug.err"
grep -q 'exited normally' "$tmp/debug.gdb" || bad "--debug: gdb: $(tail -3 "$tmp/debug.gdb")"
grep -qx hello "$tmp/debug.err" || bad "--debug: program output '$(cat "$tmp/debug.err")'"
grep -q 'remote:' "$tmp/debug.err" && bad "--debug: packets logged on stderr, not in --debug-file"
grep -aqE '^[0-9]+\.[0-9]{6} hwarb gdbserver: remote: received vCont;c' "$tmp/debug.log" ||
  bad "--debug-file: no timed vCont;c in: $(head -3 "$tmp/debug.log")"
grep -aqE '^[0-9]+\.[0-9]{6} hwarb gdbserver: [^r]' "$tmp/debug.log" ||
  bad "--debug-file: no event lines in: $(head -3 "$tmp/debug.log")"

# 6. gdbserver's --selftest: the words of a gdbserver built without its unit tests (which gdb's
# testsuite takes as "unsupported"), exit 0, nothing started; Debian's gdbserver says the same.
for server in "$hwarb gdbserver" gdbserver; do
  command -v "${server%% *}" >/dev/null || continue
  out=$(timeout 30 $server --selftest 2>&1)
  rc=$?
  [[ $rc -eq 0 && $out == "Selftests have been disabled for this build." ]] ||
    bad "$server --selftest: exit $rc, output '$out'"
done

# 7. Started from a terminal, the program leads a process group of its own, which has the
# terminal's foreground, as under Debian's gdbserver (a detached child then outlives the
# server's end, which hangs up the terminal).
group=$(dirname "${BASH_SOURCE[0]}")/terminal_group.py
want=$(timeout 60 python3 "$group" gdbserver -- "$P/prog_spin")
got=$(timeout 60 python3 "$group" "$hwarb" gdbserver -- "$P/prog_spin")
[[ $want == "pgrp=own foreground=program" ]] ||
  bad "Debian's gdbserver from a terminal: '$want', not 'pgrp=own foreground=program'"
[[ $got == "$want" ]] || bad "hwarb gdbserver from a terminal: '$got', gdbserver: '$want'"

[[ $fail -eq 0 ]] && echo "gdbserver_cli_test: all cases passed"
exit $fail
