#!/usr/bin/env python3
"""text_matches.py PID EXE: exit 0 when every executable mapping of EXE in process PID holds
exactly the file's bytes (no int3 or other change left behind by a debugger), else 1 saying why."""
import sys


def main():
    pid, exe = sys.argv[1], sys.argv[2]
    data = open(exe, "rb").read()
    name = exe.rsplit("/", 1)[-1]
    checked = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            parts = line.split()
            if len(parts) < 6 or (parts[5] != exe and not parts[5].endswith("/" + name)):
                continue
            if "x" not in parts[1]:
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
            mem.seek(start)
            live = mem.read(end - start)
            want = data[offset:offset + len(live)]
            if live[:len(want)] != want:
                print(f"FAIL: text of {name} differs from the file", file=sys.stderr)
                return 1
            checked += len(want)
    if checked == 0:
        print(f"FAIL: no text mapping of {name} found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
