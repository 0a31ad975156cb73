#!/usr/bin/env python3
"""read_symbol.py PID SYMBOL SIZE: prints the little-endian value of SYMBOL (a global of the
process's executable, found with nm and placed with /proc/PID/maps) as a decimal number.
symbol_address(PID, SYMBOL) is the address alone, for other test scripts."""
import subprocess
import sys


def symbol_address(pid, symbol):
    path = subprocess.run(["readlink", "-f", f"/proc/{pid}/exe"], capture_output=True,
                          text=True).stdout.strip()
    value = None
    for line in subprocess.run(["nm", path], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == symbol:
            value = int(parts[0], 16)
    if value is None:
        sys.exit(f"read_symbol: {symbol} not in {path}")
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path and int(fields[2], 16) == 0:
                return int(fields[0].split("-")[0], 16) + value
    sys.exit(f"read_symbol: no mapping of {path} at offset 0")


def main():
    pid, symbol, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(symbol_address(pid, symbol))
        print(int.from_bytes(mem.read(size), "little"))


if __name__ == "__main__":
    main()
