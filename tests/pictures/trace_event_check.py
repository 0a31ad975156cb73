#!/usr/bin/env python3
"""Checks a Chrome trace-event JSON file (what `hwarb watch/trace --timeline` writes) against the
format's required fields, and prints what it holds as JSON on stdout (counts by phase and name,
the tracks, the hits' args) for the caller's own checks.

  trace_event_check.py FILE [--hits N]

--hits N keeps only the first N hits in the summary ("hit_count" has them all), for a large file
whose summary is read several times.

The trace-event format (its JSON array form, or an object with traceEvents): every event is an
object with a string "ph"; every event has "pid"; all but metadata ("M") have a numeric "ts" and
"tid"; "X" has a numeric "dur" >= 0; "i"/"I" have a scope "s" of t, p or g when given; "B"/"E"
pair up per thread; "M" is process_name, thread_name, process_sort_index or
thread_sort_index with an args object (names: a string "name"); "args" is an object. Exit 1 with
every violation on stderr.
"""
import collections
import json
import sys

PHASES = set("BEXiIMCbenstfPOND") | {"(", ")"}


def main():
    path = sys.argv[1]
    keep = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--hits" else None
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    bad = []
    if not isinstance(events, list):
        print(f"{path}: not a list of events", file=sys.stderr)
        return 1
    by_ph = collections.Counter()
    names = collections.Counter()
    processes, threads = {}, {}
    stacks = collections.defaultdict(list)
    hits = []
    for n, e in enumerate(events):
        where = f"event {n}"
        if not isinstance(e, dict):
            bad.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            bad.append(f"{where}: ph {ph!r}")
            continue
        by_ph[ph] += 1
        if not isinstance(e.get("pid"), int):
            bad.append(f"{where}: pid {e.get('pid')!r}")
        if "args" in e and not isinstance(e["args"], dict):
            bad.append(f"{where}: args is not an object")
        if ph == "M":
            if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index", "process_labels"):
                bad.append(f"{where}: metadata name {e.get('name')!r}")
            args = e.get("args", {})
            if e.get("name", "").endswith("_name"):
                if not isinstance(args.get("name"), str):
                    bad.append(f"{where}: metadata without a string args.name")
                elif e["name"] == "process_name":
                    processes[e["pid"]] = args["name"]
                else:
                    if not isinstance(e.get("tid"), int):
                        bad.append(f"{where}: thread_name without tid")
                    threads[f"{e['pid']}/{e.get('tid')}"] = args["name"]
            continue
        if not isinstance(e.get("tid"), int):
            bad.append(f"{where}: tid {e.get('tid')!r}")
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            bad.append(f"{where}: ts {e.get('ts')!r}")
        if ph != "E" and not isinstance(e.get("name"), str):
            bad.append(f"{where}: name {e.get('name')!r}")
        names[f"{ph}:{e.get('name')}"] += 1
        if ph == "X" and (not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0):
            bad.append(f"{where}: dur {e.get('dur')!r}")
        if ph in "iI" and e.get("s", "t") not in ("t", "p", "g"):
            bad.append(f"{where}: scope {e.get('s')!r}")
        key = (e.get("pid"), e.get("tid"))
        if ph == "B":
            stacks[key].append(e.get("name"))
        if ph == "E":
            if not stacks[key]:
                bad.append(f"{where}: E without B on {key}")
            else:
                stacks[key].pop()
        if ph == "i" and e.get("cat") == "hit":
            hits.append({"pid": e["pid"], "tid": e["tid"], "ts": e["ts"], "name": e["name"],
                         "args": e.get("args", {})})
    for key, stack in stacks.items():
        if stack:
            bad.append(f"thread {key}: B without E: {stack}")
    for b in bad[:50]:
        print(f"{path}: {b}", file=sys.stderr)
    if bad:
        print(f"{path}: {len(bad)} violations of the trace-event format", file=sys.stderr)
        return 1
    json.dump({"events": len(events), "by_ph": by_ph, "names": names, "processes": processes,
               "threads": threads, "hit_count": len(hits), "hits": hits[:keep]}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
