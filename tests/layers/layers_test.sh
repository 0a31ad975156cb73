#!/usr/bin/env bash
# The layers, checked on every include of every library and CLI source (tests, benchmarks and the
# test programs are exempt: a test may reach any layer to drive the one it tests).
#
# Each folder may include only the folders listed for it (itself included); the order is the one
# docs/architecture.md draws:
#
#   base, x86 -> arbiter -> pmu -> pmu/bts -> breakpoints -> ptrace_compat -> sim -> scenario
#   base, x86 -> gdb (the GDB remote protocol: no linux/ below it)
#   base -> linux/sys;  linux/sys -> linux/symbols
#   ptrace_compat, linux/sys -> linux/ptrace;  breakpoints, linux/sys -> linux/perf
#   linux/ptrace -> linux/soft_watch
#   linux/symbols, linux/perf, linux/soft_watch -> linux/session
#   linux/session -> linux/trace;  linux/session, gdb -> linux/gdbserver;  everything -> tools/hwarb
#   (linux/gdbserver also reads the link_map chain of linux/symbols)
# (scenario, the scenario language, stands above sim and beside the linux/ folders: neither side
# includes the other, and nothing but the CLI includes scenario; linux/trace and linux/gdbserver
# stand side by side too.) Each linux/ folder lists exactly the folders its code includes, so
# that a new arrow between them is a decision, made here.
#
# An include of "hwarb/linux/NAME" belongs to the linux/ folder whose include/hwarb/linux/NAME
# exists (they all keep the hwarb/linux/ prefix); a folder's tests/ (test fixtures) is exempt.
# Also: the CLI (tools/hwarb) and the scenario language (scenario) hold no ptrace or perf calls
# and no system headers for them.
# Usage: layers_test.sh SOURCE_DIR. Prints every violation; exits 1 if there is any.
set -uo pipefail
root=${1:?usage: layers_test.sh SOURCE_DIR}
cd "$root" || exit 2

declare -A allowed=(
  [base]="base"
  [x86]="base x86"
  [gdb]="base x86 gdb"
  [arbiter]="base x86 arbiter"
  [pmu]="base x86 arbiter pmu"
  [pmu/bts]="base x86 arbiter pmu pmu/bts"
  [breakpoints]="base x86 arbiter pmu pmu/bts breakpoints"
  [ptrace_compat]="base x86 arbiter pmu pmu/bts breakpoints ptrace_compat"
  [sim]="base x86 arbiter pmu pmu/bts breakpoints ptrace_compat sim"
  [scenario]="base x86 arbiter pmu pmu/bts breakpoints ptrace_compat sim scenario"
  [linux/sys]="base linux/sys"
  [linux/symbols]="base linux/sys linux/symbols"
  [linux/ptrace]="base x86 ptrace_compat linux/sys linux/ptrace"
  [linux/perf]="base x86 arbiter pmu breakpoints linux/sys linux/perf"
  [linux/soft_watch]="base x86 arbiter pmu breakpoints ptrace_compat linux/sys linux/ptrace linux/soft_watch"
  [linux/session]="base x86 arbiter breakpoints linux/sys linux/ptrace linux/symbols linux/perf linux/soft_watch linux/session"
  [linux/trace]="base x86 pmu/bts linux/ptrace linux/perf linux/session linux/trace"
  [linux/gdbserver]="base x86 gdb linux/sys linux/symbols linux/ptrace linux/perf linux/soft_watch linux/session linux/gdbserver"
  [tools/hwarb]="base x86 gdb arbiter pmu pmu/bts breakpoints ptrace_compat sim scenario linux/sys linux/ptrace linux/symbols linux/perf linux/soft_watch linux/session linux/trace linux/gdbserver tools/hwarb"
)
# The include prefix (hwarb/PREFIX/...) of each folder.
declare -A prefix_folder=(
  [base]=base [x86]=x86 [gdb]=gdb [arbiter]=arbiter [pmu]=pmu [bts]=pmu/bts [breakpoints]=breakpoints
  [ptrace_compat]=ptrace_compat [sim]=sim [cli]=tools/hwarb [scenario]=scenario
)

folder_of_file() {
  local f=$1
  if [[ $f == linux/*/* ]]; then
    f=${f#linux/}
    echo "linux/${f%%/*}"
    return
  fi
  for folder in pmu/bts tools/hwarb base x86 gdb arbiter pmu breakpoints ptrace_compat sim scenario; do
    [[ $f == "$folder"/* ]] && { echo "$folder"; return; }
  done
}

folder_of_include() {
  local inc=$1 prefix=${1#hwarb/}
  prefix=${prefix%%/*}
  if [ "$prefix" = linux ]; then
    local found=(linux/*/include/"$inc")
    if [ ${#found[@]} -eq 1 ] && [ -e "${found[0]}" ]; then
      echo "${found[0]%%/include/*}"
    elif [ ${#found[@]} -gt 1 ]; then
      echo "ambiguous:${found[*]}"
    else
      echo "unknown:$inc"
    fi
  else
    echo "${prefix_folder[$prefix]:-unknown:$prefix}"
  fi
}

bad=0
checked=0
while IFS=: read -r file inc; do
  case $file in *_test.cpp | *_test.h | *test_support.h | linux/*/tests/*) continue ;; esac
  from=$(folder_of_file "$file")
  [ -n "$from" ] || continue
  checked=$((checked + 1))
  if [ -z "${allowed[$from]+set}" ]; then
    echo "layers: $file is in $from, which has no list of allowed folders here"
    bad=1
    continue
  fi
  to=$(folder_of_include "$inc")
  if [[ " ${allowed[$from]} " != *" $to "* ]]; then
    echo "layers: $file includes $inc ($to), which $from may not use (allowed: ${allowed[$from]})"
    bad=1
  fi
done < <(find base x86 gdb arbiter pmu breakpoints ptrace_compat sim scenario linux tools \( -name '*.h' -o \
           -name '*.cpp' \) -print0 | sort -z |
         xargs -0 grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"hwarb/' |
         sed 's/^\([^:]*\):.*"\(hwarb\/[^"]*\)".*/\1:\2/')

# The CLI parses arguments and prints; the debugger under it makes the system calls. The scenario
# language drives the simulated machine only. (The scenario runner's ptrace is the simulated
# machine's: a member named ptrace is not a system call, so only the global ::ptrace( counts.)
cli_calls=$(grep -nE '#include[[:space:]]*[<"](sys/ptrace|sys/wait|sys/syscall|linux/perf_event|linux/hw_breakpoint|hwarb/linux/syscalls|hwarb/linux/stopped_child)\.h[>"]|(^|[^A-Za-z0-9_])::(ptrace|syscall|waitpid|wait4|kill|tgkill|perf_event_open)[[:space:]]*\(|native::(ptrace_[a-z_]+|perf_[a-z_]*open[a-z_]*|wait_for|send_signal)[[:space:]]*\(' \
  tools/hwarb/src/*.cpp tools/hwarb/src/*.h scenario/src/*.cpp scenario/src/*.h 2>/dev/null |
  grep -v '_test\.cpp:')
if [ -n "$cli_calls" ]; then
  echo "layers: the CLI or the scenario language makes ptrace/perf/wait calls (they belong in" \
    "linux/):"
  echo "$cli_calls"
  bad=1
fi

[ "$checked" -gt 100 ] || { echo "layers: only $checked includes found: wrong SOURCE_DIR?"; exit 1; }
[ $bad -eq 0 ] && echo "layers: $checked includes checked, every one points down"
exit $bad
