#!/usr/bin/env python3
"""read_symbol.py PID SYMBOL SIZE: prints the little-endian value of SYMBOL (a global of the
process's executable, found with nm and placed with /proc/PID/maps) as a decimal number."""
import subprocess
import sys

pid, symbol, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
exe = f"/proc/{pid}/exe"
path = subprocess.run(["readlink", "-f", exe], capture_output=True, text=True).stdout.strip()
value = None
for line in subprocess.run(["nm", path], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[2] == symbol:
        value = int(parts[0], 16)
if value is None:
    sys.exit(f"read_symbol: {symbol} not in {path}")
base = None
with open(f"/proc/{pid}/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and fields[5] == path and int(fields[2], 16) == 0:
            base = int(fields[0].split("-")[0], 16)
            break
if base is None:
    sys.exit(f"read_symbol: no mapping of {path} at offset 0")
with open(f"/proc/{pid}/mem", "rb") as mem:
    mem.seek(base + value)
    print(int.from_bytes(mem.read(size), "little"))
