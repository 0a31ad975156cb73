#!/usr/bin/env bash
# The pictures of hwarb: pictures_test.sh HWARB PROGRAMS_DIR SOURCE_DIR
#  1. watch/trace --timeline: the file is valid trace-event JSON (trace_event_check.py: the
#     format's required fields), with a track per thread, every hit an instant event with its
#     access, instruction (symbol+offset, file:line) and old -> new values, hwarb's phases, call
#     slices for a branch trace, detach last for an attached target (Ctrl-C); a run of 2100
#     hits capped by --timeline-max 2000 with a note on stderr and on hwarb's track; an unwritable
#     FILE or a bad --timeline-max is a usage error before the program runs.
#  2. sim --svg: the SVG of examples/flexible_rotation.scn equals its golden
#     (flexible_rotation.svg here); an unwritable FILE is a usage error before the scenario runs.
#  3. report: the page of a watch --json run of the threaded writer holds its placements, sites
#     and threads, and no URL.
#  4. The SVG and the page rendered by headless Chromium (Debian's `chromium`): no console error,
#     the page's script ran (--dump-dom), and a screenshot that is not blank (png_ink.py). A
#     counted skip where chromium is not installed.
# PICTURES_UPDATE=1 rewrites the golden instead of comparing.
set -uo pipefail
hwarb=$1
programs=$2
src=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../conformance/cli_test_lib.sh
source "$src/tests/conformance/cli_test_lib.sh"; trap "" EXIT; echo TMP=$tmp >&2

check_events() {  # check_events FILE WHAT [ARGS...]: the trace-event checker's summary into $tmp/summary
  if ! python3 "$here/trace_event_check.py" "$1" "${@:3}" >"$tmp/summary" 2>"$tmp/check"; then
    echo "FAIL: $2: not valid trace-event JSON" >&2
    sed 's/^/  | /' "$tmp/check" >&2
    fail=1
    return 1
  fi
}
expect() {  # expect WHAT PYTHON-EXPRESSION: true of `s`, the checker's summary
  if ! python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" \
    "$tmp/summary"; then
    echo "FAIL: $1: not ($2)" >&2
    head -c 1500 "$tmp/summary" | sed 's/^/  | /' >&2
    echo >&2
    fail=1
  fi
}

# 1. Timelines.
for mode in "" "--software"; do
  m=${mode:-default}
  run 0 "$m: watch --timeline" watch $mode --timeline "$tmp/t.json" target:w -- \
    "$programs/prog_writer" 10
  has "$tmp/out" "sum=100" "$m: the program ran as usual"
  if check_events "$tmp/t.json" "$m: watch --timeline"; then
    expect "$m: 10 hits" 'len(s["hits"]) == 10'
    expect "$m: values" '[h["args"]["change"] for h in s["hits"]] == ["0x%x -> 0x%x" % (i, i + 1) for i in range(10)]'
    expect "$m: instruction" 'all(h["args"]["instruction"].startswith("set_target+0x") and "(writer.c:" in h["args"]["instruction"] for h in s["hits"])'
    expect "$m: access" 'all(h["args"]["access"] == "w" and h["name"] == "target:w" for h in s["hits"])'
    expect "$m: hits in time order" '[h["ts"] for h in s["hits"]] == sorted(h["ts"] for h in s["hits"])'
    expect "$m: phases" 'all(s["names"].get("X:" + p) == 1 for p in ("attach", "arm", "run"))'
    expect "$m: tracks" '"prog_writer" in s["processes"].values() and "hwarb" in s["processes"].values() and any(v == "prog_writer" for v in s["threads"].values())'
  fi
done

# Threads: a track per thread, each with its own hits.
run 0 "threads --timeline" watch --timeline "$tmp/t.json" slots/32:w -- "$programs/prog_threads" 4 25
if check_events "$tmp/t.json" "threads --timeline"; then
  expect "threads: 100 hits" 'len(s["hits"]) == 100'
  expect "threads: 4 writing threads, 25 hits each" 'sorted(__import__("collections").Counter(h["tid"] for h in s["hits"]).values()) == [25] * 4'
  expect "threads: each named" 'all(("%d/%d" % (h["pid"], h["tid"])) in s["threads"] for h in s["hits"])'
fi

# Attached, then Ctrl-C: the phases end with detach, which says how the target was left.
"$programs/prog_ticker" "$tmp/pid" 6000 >/dev/null 2>&1 &  # 6 s of ticks
spin=$!
for _ in $(seq 100); do [[ -s $tmp/pid ]] && break; sleep 0.05; done
"$hwarb" watch --timeline "$tmp/t.json" ticks:w -p "$spin" >/dev/null 2>"$tmp/err" &
watcher=$!
if handles "$watcher" 2; then
  sleep 0.5
  kill -INT "$watcher"
fi
wait "$watcher"
wait "$spin"  # it ends by itself, detached unmodified
spin=
if check_events "$tmp/t.json" "watch -p --timeline"; then
  expect "attached: phases" 'all(s["names"].get("X:" + p) == 1 for p in ("attach", "arm", "run", "detach"))'
  expect "attached: hits" 'len(s["hits"]) > 0'
fi
python3 -c 'import json,sys; d=[e for e in json.load(open(sys.argv[1])) if e.get("name") == "detach"]; sys.exit(0 if d and "detached" in d[0]["args"]["target"] else 1)' \
  "$tmp/t.json" || { echo "FAIL: attached: detach does not say how the target was left" >&2; fail=1; }

# A capped run: 2100 hits, the timeline capped at 2000 events (--timeline-max), said on stderr and
# on the track. (The default cap, 200000, is the same code with another number.)
run 0 "capped --timeline" watch --software -o /dev/null --timeline "$tmp/t.json" \
  --timeline-max 2000 counter:w -- "$programs/prog_bench_watch" counter 2100
count "$tmp/err" '^hwarb watch: --timeline .*: capped at 2000 events; [0-9]+ more not written$' 1 \
  "capped --timeline: the note on stderr"
if check_events "$tmp/t.json" "capped --timeline" --hits 10; then
  expect "capped: the note on hwarb's track" 's["names"].get("i:timeline capped") == 1 and any("capped at 2000 " in n for n in s["processes"].values())'
  expect "capped: hits written up to the cap" '1900 < s["hit_count"] < 2000'
fi
# A bad cap: a usage error naming --timeline-max and why; the program never runs.
for bad in "0:writes no event" "-5:is negative" "1k:is not a number of events" ":empty"; do
  value=${bad%%:*}
  run 2 "--timeline-max '$value'" watch --timeline "$tmp/t.json" --timeline-max "$value" \
    target:w -- "$programs/prog_writer" 3
  count "$tmp/err" "^hwarb watch: EINVAL: --timeline-max: .*${bad#*:}" 1 \
    "--timeline-max '$value': the message"
  count "$tmp/out" 'sum=' 0 "--timeline-max '$value': the program did not run"
done
run 2 "--timeline-max without --timeline" trace --timeline-max 5 -- "$programs/prog_writer" 3
count "$tmp/err" '^hwarb trace: EINVAL: --timeline-max: only with --timeline FILE$' 1 \
  "--timeline-max without --timeline: the message"

# An unwritable timeline: a usage error naming the option and errno; the program never runs.
run 2 "watch --timeline unwritable" watch --timeline /nonexistent-dir/t.json target:w -- \
  "$programs/prog_writer" 3
count "$tmp/err" '^hwarb watch: ENOENT: --timeline: file: create /nonexistent-dir/t.json' 1 \
  "watch --timeline unwritable: the message"
count "$tmp/out" 'sum=' 0 "watch --timeline unwritable: the program did not run"
run 2 "trace --timeline unwritable" trace --timeline /nonexistent-dir/t.json -- \
  "$programs/prog_calls" 3
count "$tmp/err" '^hwarb trace: ENOENT: --timeline: file: create /nonexistent-dir/t.json' 1 \
  "trace --timeline unwritable: the message"
count "$tmp/out" 'total=' 0 "trace --timeline unwritable: the program did not run"
run 2 "watch -a --timeline" watch -a --timeline "$tmp/t.json" target:w -- "$programs/prog_writer" 3
count "$tmp/err" '^hwarb watch: --timeline: not with -a or -C$' 1 "watch -a --timeline: the message"

# A branch trace: call slices per function, nested on the thread's track.
run 0 "trace --timeline" trace --software --json -o "$tmp/branches" --timeline "$tmp/t.json" \
  -- "$programs/prog_calls" 3
if check_events "$tmp/t.json" "trace --timeline"; then
  expect "trace: work called 3 times" 's["names"].get("X:work") == 3'
  expect "trace: main" 's["names"].get("X:main", 0) >= 1'
  expect "trace: phases" 'all(s["names"].get("X:" + p) == 1 for p in ("attach", "arm", "run"))'
fi

# 2. sim --svg, and its golden.
(cd "$src/examples" && "$hwarb" sim flexible_rotation.scn --svg "$tmp/slots.svg") \
  >"$tmp/out" 2>"$tmp/err" || {
  echo "FAIL: sim --svg: exit $?" >&2
  sed 's/^/  err: /' "$tmp/err" >&2
  fail=1
}
if [[ ${PICTURES_UPDATE:-} == 1 ]]; then
  cp "$tmp/slots.svg" "$here/flexible_rotation.svg"
elif ! diff -u "$here/flexible_rotation.svg" "$tmp/slots.svg" >"$tmp/diff"; then
  echo "FAIL: sim --svg: differs from its golden flexible_rotation.svg" >&2
  head -40 "$tmp/diff" >&2
  fail=1
fi
has "$tmp/slots.svg" "gdb_w3 ENOSPC — cpu 0 shared pool: 4 slots" "sim --svg: the refusal's reason"
run 2 "sim --svg unwritable" sim "$src/examples/flexible_rotation.scn" --svg /nonexistent-dir/s.svg
count "$tmp/err" '^hwarb sim: ENOENT: --svg: file: create /nonexistent-dir/s.svg' 1 \
  "sim --svg unwritable: the message"
count "$tmp/out" ' ok$' 0 "sim --svg unwritable: the scenario did not run"

# 3. report.
run 0 "watch --json for report" watch --json -o "$tmp/run.json" slots/32:w -- \
  "$programs/prog_threads" 4 25
run 0 "report" report "$tmp/run.json" -o "$tmp/run.html"
has "$tmp/run.html" '<th>placement</th>' "report: placements"
has "$tmp/run.html" '<td><code>slots/32:w</code></td>' "report: the expression"
count "$tmp/run.html" '<td><code>worker\+0x[0-9a-f]+ \(threads.c:[0-9]+\)</code></td>' 1 \
  "report: the one site"
count "$tmp/run.html" '^<text [^>]*>tid [0-9]+ \(25\)</text>$' 4 "report: four threads of 25 hits"
count "$tmp/run.html" 'https?:|src=|href=' 0 "report: no URL"
echo "not a run" >"$tmp/bad.json"
run 2 "report of no records" report "$tmp/bad.json" -o "$tmp/bad.html"
count "$tmp/err" '^hwarb report: EINVAL: no hwarb watch --json records in ' 1 \
  "report of no records: the message"
[[ ! -e $tmp/bad.html ]] || { echo "FAIL: report of no records: it wrote a page" >&2; fail=1; }
run 2 "report of a directory" report "$tmp" -o "$tmp/bad.html"
count "$tmp/err" "^hwarb report: [A-Z]+: cannot read $tmp: Is a directory\$" 1 \
  "report of a directory: the message"
run 2 "report unwritable" report "$tmp/run.json" -o /nonexistent-dir/r.html
count "$tmp/err" '^hwarb report: ENOENT: --output: file: create /nonexistent-dir/r.html' 1 \
  "report unwritable: the message"

# 4. Rendered by headless Chromium.
chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
  skip_case - "rendering in Chromium" "chromium is not installed (scripts/setup installs it)"
else
  render() {  # render FILE WIDTHxHEIGHT WHAT MIN_FRACTION: a screenshot ($tmp/shot.png) with no
    # console error and at least MIN_FRACTION of its pixels not white
    local file=$1 size=$2 what=$3
    rm -f "$tmp/shot.png"
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
      --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 \
      --window-size="${size/x/,}" --screenshot="$tmp/shot.png" "file://$file" \
      >"$tmp/chrome.out" 2>"$tmp/chrome.err"
    if [[ ! -s $tmp/shot.png ]]; then
      echo "FAIL: $what: Chromium took no screenshot" >&2
      tail -20 "$tmp/chrome.err" | sed 's/^/  | /' >&2
      fail=1
      return
    fi
    if grep -E 'CONSOLE|Uncaught|SyntaxError|Failed to load' "$tmp/chrome.err" >"$tmp/console"; then
      echo "FAIL: $what: errors in the console" >&2
      sed 's/^/  | /' "$tmp/console" >&2
      fail=1
    fi
    python3 "$here/png_ink.py" "$tmp/shot.png" --min-fraction "$4" >"$tmp/ink" || {
      echo "FAIL: $what: the screenshot is blank ($(cat "$tmp/ink"))" >&2
      fail=1
    }
  }
  render "$tmp/slots.svg" 1300x620 "sim --svg in Chromium" 0.05
  render "$tmp/run.html" 1200x900 "report in Chromium" 0.02
  # The page's script ran: its sortable table is ready.
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
    --dump-dom "file://$tmp/run.html" >"$tmp/dom" 2>/dev/null
  has "$tmp/dom" 'data-script="ran"' "report in Chromium: the script ran"
  # Sorting: a click on "hits" puts the busiest site first, a second click the quietest.
  cat >"$tmp/sites.json" <<'JSON'
{"event":"hit","expr":"target:w","tid":11,"ip":"0x1","addr":"0x10","access":"w","old":"0x0","new":"0x1","time":0.001,"symbol":"set_target+0x4 (writer.c:21)"}
{"event":"hit","expr":"target:w","tid":11,"ip":"0x2","addr":"0x10","access":"w","old":"0x1","new":"0x2","time":0.002,"symbol":"main+0x10 (writer.c:40)"}
{"event":"hit","expr":"target:w","tid":11,"ip":"0x1","addr":"0x10","access":"w","old":"0x2","new":"0x3","time":0.003,"symbol":"set_target+0x4 (writer.c:21)"}
JSON
  "$hwarb" report "$tmp/sites.json" -o "$tmp/sites.html"
  cat >>"$tmp/sites.html" <<'HTML'
<script>
var th = document.querySelectorAll("#sites th")[3];
var first = function () { return document.querySelector("#sites tbody tr td code").textContent; };
th.click();
var down = first();
th.click();
document.body.setAttribute("data-sorted", down + "|" + first());
</script>
HTML
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
    --dump-dom "file://$tmp/sites.html" >"$tmp/dom" 2>/dev/null
  has "$tmp/dom" 'data-sorted="set_target+0x4 (writer.c:21)|main+0x10 (writer.c:40)"' \
    "report in Chromium: a click sorts the sites"
  # The picture's failure shows: a blank page is caught.
  echo '<html><body></body></html>' >"$tmp/blank.html"
  saved=$fail
  render "$tmp/blank.html" 400x300 "blank page" 0.001 2>"$tmp/blank.err"
  if grep -q 'the screenshot is blank' "$tmp/blank.err"; then
    fail=$saved
  else
    echo "FAIL: a blank page passed the pixel check" >&2
    fail=1
  fi
fi

if [[ $fail -ne 0 ]]; then
  echo "pictures_test: FAILED" >&2
  exit 1
fi
echo "pictures_test: ok"
