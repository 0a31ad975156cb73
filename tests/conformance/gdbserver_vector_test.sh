#!/usr/bin/env bash
# The AVX and AVX-512 registers through `hwarb gdbserver` (target.xml features
# org.gnu.gdb.i386.avx, .avx512, .pkeys; 'p'/'P' on the XSAVE area, NT_X86_XSTATE):
# gdbserver_vector_test.sh HWARB PROGRAMS_DIR
# tests/programs/vector_regs.c loads ymm0, zmm1, xmm17 and k1 and stops at vectors_loaded; then
#  gdb     in both modes: `p $ymm0`, `$zmm1`, `$xmm17`, `$k1` are the values the program loaded;
#          `set var` of an element of $ymm2 and of $zmm1 reaches the program (it prints them).
#          Compared with Debian's gdbserver: its AVX values are the same; its AVX-512 values are
#          checked too, and where they are not the program's (gdbserver 13.1 reads AVX-512 at
#          Intel's fixed XSAVE offsets, where this CPU's differ) that is a counted skip.
#  lldb    `register read ymm0 xmm17 k1` and `register write ymm2` (lldb-server 14 has no
#          AVX-512 registers at all: only its ymm0 is compared).
# A CPU without AVX (or without AVX-512F, for those parts) is a counted skip.
# shellcheck source=gdb_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gdb_test_lib.sh" "$@"
prog=$P/prog_vector_regs
if ! grep -qw avx /proc/cpuinfo; then
  skip_case - "AVX registers" "this CPU has no AVX"
  exit $fail
fi
avx512=0
grep -qw avx512f /proc/cpuinfo && avx512=1

# gdb_session NAME TARGET: the gdb commands against TARGET (a `target remote |` command line);
# gdb's output in $tmp/NAME.out, the program's in $tmp/NAME.err.
gdb_session() {
  timeout 120 gdb -nx -batch -ex 'set confirm off' -ex 'set pagination off' -ex 'set width 0' \
    -ex "target remote | $2" -ex 'break vectors_loaded' -ex continue \
    -ex 'p $ymm0.v8_int32' -ex 'p $zmm1.v16_int32' -ex 'p $xmm17.v4_int32' -ex 'p/x $k1' \
    -ex 'p $ymm2.v8_int32' -ex 'set var $ymm2.v8_int32[7] = 77' \
    -ex 'set var $zmm1.v16_int32[15] = 999' -ex 'p $ymm2.v8_int32' -ex continue \
    >"$tmp/$1.out" 2>"$tmp/$1.err"
}
line() {  # line FILE N: gdb's value $N
  sed -n "s/^\\\$$2 = //p" "$1" | head -1
}
check() {  # check WHAT GOT WANT
  [[ $2 == "$3" ]] || { bad "$1: '$2', expected '$3'"; }
}

ymm0='{1, 2, 3, 4, 5, 6, 7, 8}'
zmm1='{101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116}'
xmm17='{201, 202, 203, 204}'
for mode in "" "--software"; do
  m=hwarb${mode}
  gdb_session "$m" "$hwarb gdbserver $mode --stdio -- $prog"
  check "$m: \$ymm0" "$(line "$tmp/$m.out" 1)" "$ymm0"
  check "$m: \$ymm2 before" "$(line "$tmp/$m.out" 5)" '{0, 0, 0, 0, 0, 0, 0, 0}'
  check "$m: \$ymm2 set" "$(line "$tmp/$m.out" 6)" '{0, 0, 0, 0, 0, 0, 0, 77}'
  grep -qx 'ymm2\[7\]=77' "$tmp/$m.err" || bad "$m: the program's ymm2 after the write"
  if [[ $avx512 == 1 ]]; then
    check "$m: \$zmm1" "$(line "$tmp/$m.out" 2)" "$zmm1"
    check "$m: \$xmm17" "$(line "$tmp/$m.out" 3)" "$xmm17"
    check "$m: \$k1" "$(line "$tmp/$m.out" 4)" 0x5a5a
    grep -qx 'zmm1\[15\]=999' "$tmp/$m.err" || bad "$m: the program's zmm1 after the write"
  else
    skip_case - "$m: AVX-512 registers" "this CPU has no AVX-512F"
  fi
  grep -q 'exited normally' "$tmp/$m.out" || bad "$m: the program's exit"
  [[ $fail == 0 ]] || { sed 's/^/  | /' "$tmp/$m.out" "$tmp/$m.err" | tail -30 >&2; }
done

if command -v gdbserver >/dev/null; then
  gdb_session ref "gdbserver - $prog"
  for n in 1 5 6; do
    check "Debian's gdbserver: \$$n as hwarb's" "$(line "$tmp/ref.out" $n)" "$(line "$tmp/hwarb.out" $n)"
  done
  if [[ $avx512 == 1 && "$(line "$tmp/ref.out" 2)" != "$zmm1" ]]; then
    skip_case - "Debian's gdbserver: AVX-512 registers as hwarb's" \
      "its \$zmm1 is $(line "$tmp/ref.out" 2) (this CPU's XSAVE layout is not the one gdbserver 13.1 assumes)"
  elif [[ $avx512 == 1 ]]; then
    for n in 2 3 4; do
      check "Debian's gdbserver: \$$n as hwarb's" "$(line "$tmp/ref.out" $n)" "$(line "$tmp/hwarb.out" $n)"
    done
  fi
else
  skip_case - "the comparison with Debian's gdbserver" "gdbserver is not installed"
fi

# lldb over TCP (it has no stdio transport): the registers as lldb names and shows them.
lldb_session() {  # lldb_session NAME SERVER-COMMAND...
  local name=$1 port
  shift
  port=$((20000 + RANDOM % 20000))
  "$@" "127.0.0.1:$port" -- "$prog" >"$tmp/$name.server" 2>&1 &
  local server=$!
  local hexport
  hexport=$(printf ':%04X 00000000:0000 0A' "$port")  # listening, in /proc/net/tcp's format
  for _ in $(seq 50); do
    grep -q "$hexport" /proc/net/tcp && break
    sleep 0.1
  done
  timeout 120 lldb -b -o "gdb-remote 127.0.0.1:$port" -o 'breakpoint set -n vectors_loaded -K false' \
    -o continue -o 'register read ymm0' -o 'register read xmm17' -o 'register read k1' \
    -o "register write ymm2 \"{$(printf '0x00 %.0s' $(seq 28))0x4d 0x00 0x00 0x00}\"" \
    -o continue >"$tmp/$name.out" 2>&1
  for _ in $(seq 100); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$server" 2>/dev/null
  wait "$server"
}
bytes() {  # bytes INT32...: lldb's {0x.. ...} of little-endian int32s
  local out="" v
  for v in "$@"; do out+=$(printf '0x%02x 0x%02x 0x%02x 0x%02x ' $((v & 255)) $((v >> 8 & 255)) 0 0); done
  echo "{${out% }}"
}
if command -v lldb >/dev/null; then
  lldb_session lldb-hwarb "$hwarb" gdbserver
  reg() { sed -n "s/^ *$2 = //p" "$1" | head -1; }
  check "lldb: ymm0" "$(reg "$tmp/lldb-hwarb.out" ymm0)" "$(bytes 1 2 3 4 5 6 7 8)"
  if [[ $avx512 == 1 ]]; then
    check "lldb: xmm17" "$(reg "$tmp/lldb-hwarb.out" xmm17)" "$(bytes 201 202 203 204)"
    check "lldb: k1" "$(reg "$tmp/lldb-hwarb.out" k1)" 0x0000000000005a5a
  fi
  grep -qx 'ymm2\[7\]=77' "$tmp/lldb-hwarb.server" || bad "lldb: the program's ymm2 after the write"
  if command -v lldb-server >/dev/null; then
    lldb_session lldb-ref lldb-server gdbserver
    check "lldb-server: ymm0 as hwarb's" "$(reg "$tmp/lldb-ref.out" ymm0)" \
      "$(reg "$tmp/lldb-hwarb.out" ymm0)"
  fi
  [[ $fail == 0 ]] || { sed 's/^/  | /' "$tmp/lldb-hwarb.out" "$tmp/lldb-hwarb.server" | tail -30 >&2; }
else
  skip_case - "the lldb session" "lldb is not installed"
fi
exit $fail
