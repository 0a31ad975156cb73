#!/usr/bin/env bash
# install_test.sh SOURCE_DIR BUILD_DIR PROGRAMS_DIR — see CMakeLists.txt here.
set -uo pipefail
src=$1
build=$2
programs=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# shellcheck source=../support/skips.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/skips.sh"
bad() {
  echo "FAIL: $*" >&2
  fail=1
}

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; bad "cmake --install"; exit 1; }
for f in include/hwarb/version.h include/hwarb/breakpoints/watchpoint.h \
         lib/cmake/hwarb/hwarbConfig.cmake lib/cmake/hwarb/hwarbConfigVersion.cmake \
         lib/cmake/hwarb/hwarbTargets.cmake lib/pkgconfig/hwarb.pc bin/hwarb; do
  [[ -e $prefix/$f ]] || bad "not installed: $f"
done

# find_package: the examples, built out of tree against the prefix only.
if cmake -S "$src/examples/cpp" -B "$tmp/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
     >"$tmp/configure.log" 2>&1 && cmake --build "$tmp/examples" >"$tmp/build.log" 2>&1; then
  "$tmp/examples/sim_watchpoint" >"$tmp/sim.out" 2>&1 || bad "sim_watchpoint: $(cat "$tmp/sim.out")"
  grep -q '^watch 1 hit: 0x0 -> 0x11223344$' "$tmp/sim.out" || bad "sim_watchpoint output: $(cat "$tmp/sim.out")"
  "$tmp/examples/ptrace_dr" >"$tmp/dr.out" 2>&1 || bad "ptrace_dr: $(cat "$tmp/dr.out")"
  "$tmp/examples/real_watchpoint" "$programs/prog_forker" child 5 >"$tmp/real.out" 2>&1 ||
    bad "real_watchpoint: $(cat "$tmp/real.out")"
  grep -q '^5 writes; exit status 3$' "$tmp/real.out" || bad "real_watchpoint output: $(cat "$tmp/real.out")"
  "$tmp/examples/debugger_loop" "$programs/prog_forker" child 5 >"$tmp/loop.out" 2>&1 ||
    bad "debugger_loop: $(cat "$tmp/loop.out")"
  [[ $(grep -c '^stopped: tid [0-9]* wrote [123] at ip 0x' "$tmp/loop.out") -eq 3 ]] &&
    grep -q '^watch removed$' "$tmp/loop.out" && grep -q '^3 writes seen; exit status 3$' "$tmp/loop.out" ||
    bad "debugger_loop output: $(cat "$tmp/loop.out")"
  # A multi-threaded program: the watch is removed while its other threads run.
  "$tmp/examples/debugger_loop" "$programs/prog_futex_counter" 4 200 >"$tmp/loop4.out" 2>&1 ||
    bad "debugger_loop (4 threads): $(cat "$tmp/loop4.out")"
  grep -q '^3 writes seen; exit status 0$' "$tmp/loop4.out" ||
    bad "debugger_loop (4 threads) output: $(cat "$tmp/loop4.out")"
else
  cat "$tmp/configure.log" "$tmp/build.log" | tail -30
  bad "examples/cpp did not build against the installed hwarb"
fi

# A version the package is not compatible with is refused.
mkdir -p "$tmp/v9"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(v LANGUAGES CXX)\nfind_package(hwarb 9.0 REQUIRED)\n' \
  >"$tmp/v9/CMakeLists.txt"
if cmake -S "$tmp/v9" -B "$tmp/v9/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  bad "find_package(hwarb 9.0) was accepted"
fi
# An unknown component is refused.
printf 'cmake_minimum_required(VERSION 3.25)\nproject(c LANGUAGES CXX)\nfind_package(hwarb 0.1 REQUIRED COMPONENTS nosuch)\n' \
  >"$tmp/v9/CMakeLists.txt"
if cmake -S "$tmp/v9" -B "$tmp/v9/build2" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  bad "find_package(hwarb COMPONENTS nosuch) was accepted"
fi

# pkg-config: the simulated-machine example with the flags hwarb.pc gives.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
if flags=$(pkg-config --cflags --libs hwarb 2>"$tmp/pc.err"); then
  # shellcheck disable=SC2086
  if g++ -o "$tmp/sim_pc" "$src/examples/cpp/sim_watchpoint.cpp" $flags 2>"$tmp/pc.build"; then
    "$tmp/sim_pc" >/dev/null 2>&1 || bad "sim_watchpoint built with pkg-config failed"
  else
    tail -20 "$tmp/pc.build"
    bad "sim_watchpoint did not build with pkg-config"
  fi
else
  bad "pkg-config hwarb: $(cat "$tmp/pc.err")"
fi

# The Debian package, installed for real (root with dpkg only).
if [[ $(id -u) -eq 0 ]] && command -v dpkg >/dev/null && command -v cpack >/dev/null; then
  (cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1) ||
    { tail -20 "$tmp/cpack.log"; bad "cpack -G DEB"; }
  deb=$(ls "$tmp"/hwarb_*.deb 2>/dev/null | head -1)
  if [[ -n $deb ]]; then
    if dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1; then
      /usr/bin/hwarb probe >"$tmp/probe.out" 2>&1 || bad "installed hwarb probe: $(cat "$tmp/probe.out")"
      grep -q '^breakpoint PMU:' "$tmp/probe.out" || bad "installed hwarb probe said: $(cat "$tmp/probe.out")"
      dpkg -r hwarb >/dev/null 2>&1 || bad "dpkg -r hwarb"
      [[ ! -e /usr/bin/hwarb ]] || bad "/usr/bin/hwarb left after dpkg -r"
    else
      tail -20 "$tmp/dpkg.log"
      bad "dpkg -i $(basename "$deb")"
    fi
  else
    bad "cpack made no .deb"
  fi
else
  skip_case - "the Debian package installed with dpkg" "needs root, dpkg and cpack"
fi
exit $fail
