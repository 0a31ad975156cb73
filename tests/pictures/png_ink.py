#!/usr/bin/env python3
"""Decodes a PNG (8-bit RGB or RGBA, not interlaced: what Chromium's screenshots are) with zlib
alone and prints how many of its pixels are not white (any channel below 235) and how many
pixels it has, "INK TOTAL WIDTHxHEIGHT".

  png_ink.py FILE.png [--min-fraction F]

With --min-fraction, exit 1 when fewer than F of the pixels are not white (a blank page).
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, "
                         f"interlace {interlace}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        kind = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    path = sys.argv[1]
    minimum = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--min-fraction" else None
    width, height, bpp, rows = decode(path)
    ink = 0
    for line in rows:
        for x in range(0, width * bpp, bpp):
            if min(line[x], line[x + 1], line[x + 2]) < 235:
                ink += 1
    total = width * height
    print(f"{ink} {total} {width}x{height}")
    if minimum is not None and ink < minimum * total:
        print(f"{path}: {ink} of {total} pixels are not white, fewer than {minimum:.4f}: blank",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
