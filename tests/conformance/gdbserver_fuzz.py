#!/usr/bin/env python3
"""A protocol fuzz test of `hwarb gdbserver --stdio`.

    python3 gdbserver_fuzz.py HWARB PROGRAMS_DIR [--rounds N] [--seed S] [--skip CAT,...] [-v]

Each round starts `HWARB gdbserver [--software] --stdio -- PROGRAMS_DIR/prog_gdb_target` (the
software path on odd rounds) with pipes, performs a valid handshake (qSupported, ?, on some rounds
QStartNoAckMode), takes a snapshot of what the client can see (the `g` registers, the program's
data and code bytes) and then sends a seeded mix of garbage: random bytes, packets with bad
checksums, truncated packets, unknown packets, m/x/M/X/g/G/p/P/Z/z/H/T/qXfer/vCont packets with
garbage arguments, 0x03 bytes, '-' (ack mode), and valid Z2/z2 of random ranges. Nothing it sends
may legitimately change the program: a write is only sent when the server must refuse it (a
malformed packet, an unmapped address, a register number out of range).

Then the snapshot must be unchanged, every watch/breakpoint the server accepted is removed, and
`vCont;c` (repeated over watch stops and the SIGINT stop a 0x03 sent while stopped makes at the
next resume, `vCont;C<sig>` over a signal of the program's own) must end in W07 with "total=936" on stderr. Every packet must get its answer within 5 s ('-' for a bad
checksum in ack mode; the reply once acks are off, as gdbserver uses such a packet anyway), no
garbage packet may resume the program or be accepted where it must be refused, and the server
must exit 0 when the client closes its input.

Every fifth round instead closes the connection while the program runs (a slow watch set, then
`vCont;c`, then close after a random delay): the server must exit 0 and the program must be gone.

Before the rounds (in both modes), extended mode packet by packet, without garbage:
`HWARB gdbserver --multi --stdio` with no program answers '!', '?' (W00), vRun (without any
program: E; PROG ARGS: T05; while one runs: T05, a second process beside it (multiprocess+),
which vKill ends; an empty PROG: the last program with new arguments), vAttach (pid 0, or a
process already debugged: E), vKill (OK, the process gone, W00 after),
D (OK, the program runs on to its output), k (no reply; the server stays), R (no reply; the
last program runs again) as gdbserver does.

Prints one summary line; exits 1 on any failure, with the seed, the round and its packet log tail.
`--skip` leaves out generator categories (to look past a known bug while exploring).
"""

import argparse
import os
import random
import select
import struct
import subprocess
import sys
import tempfile
import time

REPLY_TIMEOUT = 5.0
REG_COUNT = 149         # gdb_regs.h kGdbRegisterCount: no CPU has a register from there on
REGS_HEX = 560 * 2      # a full 'g' reply
U64 = (1 << 64) - 1
UNMAPPED = [0x0, 0x10, 0xfff, U64, U64 - 7, 0xdead0000000000, 0x800000000000]


class Failure(Exception):
    pass


class Hang(Failure):
    pass


# --- mirrors of the server's parsing, to know what a packet legitimately means ---------------

def parse_hex(text):
    """parse_hex_u64: None unless non-empty hex of at most 2^64-1."""
    if not text or any(c not in "0123456789abcdefABCDEF" for c in text):
        return None
    v = int(text, 16)
    return v if v <= U64 else None


def addr_len(text):
    comma = text.find(",")
    if comma < 0:
        return None
    a, n = parse_hex(text[:comma]), parse_hex(text[comma + 1:])
    return None if a is None or n is None else (a, n)


def from_hex_ok(text):
    return len(text) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in text)


def unescape(data):
    out = bytearray()
    i = 0
    while i < len(data):
        if data[i] == ord("}"):
            if i + 1 < len(data):
                out.append(data[i + 1] ^ 0x20)
            i += 2
        else:
            out.append(data[i])
            i += 1
    return bytes(out)


def maybe_mapped(addr, length):
    """True when [addr, addr+length) may touch user memory (then a write is not sent)."""
    end = addr + max(length, 1)
    return not (end <= 0x10000 or addr >= 0x800000000000)


def checksum(data):
    return sum(data) & 0xff


def frame(payload, good=True):
    if isinstance(payload, str):
        payload = payload.encode("latin-1")
    cs = checksum(payload)
    if not good:
        cs = (cs + 1 + random.randrange(255)) & 0xff
    return b"$" + payload + b"#" + b"%02x" % cs


# --- the connection ---------------------------------------------------------------------------

class Server:
    def __init__(self, hwarb, prog, software, log, args=()):
        """prog None: `gdbserver --multi --stdio` without a program (extended mode)."""
        self.errf = tempfile.TemporaryFile()
        cmd = [hwarb, "gdbserver"] + (["--software"] if software else []) + \
              (["--stdio", "--", prog] + list(args) if prog else ["--multi", "--stdio"])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errf, bufsize=0)
        self.inp = self.proc.stdin.fileno()
        self.out = self.proc.stdout.fileno()
        self.buf = b""
        self.ack = True
        self.log = log
        self.child = None
        self.last_reply = ""

    def stderr_text(self):
        self.errf.seek(0)
        return self.errf.read().decode("latin-1", "replace")

    def child_pid(self):
        if self.child is None:
            for line in self.stderr_text().splitlines():
                if " is process " in line:
                    try:
                        self.child = int(line.split(" is process ")[1].split(";")[0])
                    except ValueError:
                        pass
        return self.child

    def write(self, data, what=None):
        self.log.append(">> " + (what or repr(data[:160])))
        try:
            os.write(self.inp, data)
        except BrokenPipeError:
            raise Failure("the server closed its input (crashed?) while sending %r" % data[:80])

    def fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([self.out], [], [], left)
        if not r:
            return False
        chunk = os.read(self.out, 65536)
        if not chunk:
            raise Failure("the server closed its output (exit status %s)" % self.proc.poll())
        self.buf += chunk
        return True

    def read_item(self, timeout=REPLY_TIMEOUT):
        """'+', '-', or ('packet', payload bytes); None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            while self.buf and self.buf[:1] not in (b"+", b"-", b"$"):
                self.log.append("<< stray byte %r" % self.buf[:1])
                raise Failure("stray byte %r from the server" % self.buf[:1])
            if self.buf[:1] in (b"+", b"-"):
                c, self.buf = self.buf[:1].decode(), self.buf[1:]
                return c
            if self.buf[:1] == b"$":
                h = self.buf.find(b"#")
                if h >= 0 and len(self.buf) >= h + 3:
                    payload, cs = self.buf[1:h], self.buf[h + 1:h + 3]
                    self.buf = self.buf[h + 3:]
                    if b"%02x" % checksum(payload) != cs:
                        raise Failure("the server sent a bad checksum: %r" % payload[:80])
                    if self.ack:
                        os.write(self.inp, b"+")
                    data = unescape(payload)
                    self.log.append("<< " + repr(data[:160]))
                    return ("packet", data)
            if not self.fill(deadline):
                return None

    def expect_reply(self, what, timeout=REPLY_TIMEOUT):
        """After a well-formed packet: '+' (ack mode), then the reply packet."""
        if self.ack:
            item = self.read_item(timeout)
            if item is None:
                raise Hang("no '+' within %gs for %s" % (timeout, what))
            if item != "+":
                raise Failure("expected '+' for %s, got %r" % (what, item))
        item = self.read_item(timeout)
        if item is None:
            raise Hang("no reply within %gs to %s" % (timeout, what))
        if not isinstance(item, tuple):
            raise Failure("expected a reply packet to %s, got %r" % (what, item))
        self.last_reply = item[1].decode("latin-1")
        return self.last_reply

    def request(self, payload, timeout=REPLY_TIMEOUT):
        self.write(frame(payload), "$%s" % payload[:150])
        return self.expect_reply(repr(payload[:80]), timeout)

    def quiet(self, seconds):
        """Nothing may arrive now (after bytes that must get no answer)."""
        if self.buf:
            raise Failure("unexpected bytes from the server: %r" % self.buf[:80])
        r, _, _ = select.select([self.out], [], [], seconds)
        if r:
            chunk = os.read(self.out, 65536)
            self.log.append("<< unexpected %r" % chunk[:160])
            raise Failure("unexpected output from the server: %r" % chunk[:80])

    def close_and_wait(self, timeout=10.0):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Hang("the server did not exit within %gs of the client closing" % timeout)

    def kill(self):
        pid = self.child_pid()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if pid is not None and program_alive(pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def program_alive(pid):
    """`pgrep -f prog_gdb_target` for one pid: the program (not a zombie, not a reused pid)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read()
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return b"prog_gdb_target" in cmd and state != "Z"


# --- the program's symbols (ELF, for valid watch ranges and the snapshot) --------------------

def elf_symbols(path):
    with open(path, "rb") as f:
        data = f.read()
    e_entry, = struct.unpack_from("<Q", data, 0x18)
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
            for i in range(e_shnum)]
    syms = {}
    for s in secs:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = secs[s[6]]
        for off in range(s[4], s[4] + s[5], 24):
            name, info, _, _, value, size = struct.unpack_from("<IBBHQQ", data, off)
            if info & 0xf == 1 and size:  # STT_OBJECT
                start = strtab[4] + name
                nm = data[start:data.index(b"\0", start)].decode()
                syms[nm] = (value, size)
    return e_entry, syms


# --- the garbage ------------------------------------------------------------------------------

def rhex(rng, lo=1, hi=16):
    return "".join(rng.choice("0123456789abcdef") for _ in range(rng.randint(lo, hi)))


def garbage_num(rng):
    return rng.choice([
        "0", "10", "ffffffffffffffff", "fffffffffffffffff", "10000000000000000",
        "-1", "-10", "", "zz", "0x10", "1 ", " 1", "%x" % rng.getrandbits(64), rhex(rng, 1, 40),
        "1" * rng.randint(17, 60), "abc", "FFFFFFFF", "7fffffff", "80000000", "100000000",
        rhex(rng, 1, 3) + "g", "+5", "1.5",
    ])


def garbage_len(rng):
    return rng.choice([garbage_num(rng), "0", "1", "8", "4000", "2001", "ffffffff", "7fffffffffffffff",
                       "ffffffffffffffff"])


def garbage_addr(rng):
    if rng.random() < 0.4:
        return "%x" % rng.choice(UNMAPPED)
    return garbage_num(rng)


def sep(rng):
    return rng.choice([",", ",", ",", "", ",,", ";", ":"])


class Fuzzer:
    def __init__(self, rng, srv, symbols, bias, skip, stats):
        self.rng = rng
        self.srv = srv
        self.syms = symbols
        self.bias = bias
        self.skip = skip
        self.stats = stats
        self.inserted = {}   # (type, addr, len) -> the Z payload that set it
        self.open_packet = False

    def data_range(self):
        rng = self.rng
        lo = min(v for v, _ in self.syms.values()) + self.bias
        hi = max(v + s for v, s in self.syms.values()) + self.bias
        addr = rng.randrange(lo - 64, hi + 64)
        return addr, rng.choice([1, 2, 4, 8, rng.randint(1, 64), rng.randint(1, 4096)])

    # Each generator returns (category, bytes to send, kind, payload) where kind is
    #   'packet' (a reply is due), 'badsum', 'silent' (no reply is due).
    def gen_random_bytes(self):
        rng = self.rng
        n = rng.randint(1, 64)
        # No '$' (a random packet could be a real command) and no '-' (a resend, tested apart).
        pool = [b for b in range(256) if b not in (ord("$"), ord("-"))]
        return "random", bytes(rng.choice(pool) for _ in range(n)), "silent", None

    def gen_interrupt(self):
        return "interrupt", b"\x03" * self.rng.randint(1, 3), "silent", None

    def gen_badsum(self):
        p = self.safe_payload()
        return ("badsum" if self.srv.ack else "badsum_noack"), frame(p, good=False), "badsum", p

    def gen_truncated(self):
        p = self.safe_payload()
        cut = self.rng.randint(0, len(p))
        # The next packet's '$' abandons it: no answer is due.
        return "truncated", b"$" + p[:cut].encode("latin-1"), "silent", None

    def gen_nack(self):
        return "nack", b"-", "nack", None

    def gen_unknown(self):
        rng = self.rng
        p = rng.choice(["j", "y", "!", "A", "b", "bc", "bs", "i", "I", "R00", "r", "t",
                        "O", "e", "E01", "N", "vFoo", "vFile:open:", "vRun", "vAttach;1",
                        "vStopped", "qTStatus", "qOffsets", "qFoo", "QFoo:1",
                        "qGetTLSAddr:1,2,3", "QPassSignals:", "QProgramSignals:", "qCRC:0,10",
                        "qSearch:memory:0;10;ff", "QAllow:", "qL1", "qP0", "Qbtrace:off",
                        "QNonStop:0", "qThreadExtraInfo,1", "QEnvironmentReset", "~", "\x7f"])
        if p == "!":
            self.extended = True
        elif p == "R00" and getattr(self, "extended", False):
            # After '!' the server is in extended mode, where R restarts the program with no
            # reply (the extended-mode checks before the rounds cover that).
            p = "y"
        if rng.random() < 0.5:
            p += rhex(rng, 0, 12)
        return "unknown", frame(p), "packet", p

    def safe_payload(self):
        rng = self.rng
        return rng.choice([
            "?", "qC", "g", "m%s,%s" % (garbage_addr(rng), garbage_len(rng)), "p%x" % rng.randint(0, 200),
            "qAttached", "qfThreadInfo", "vCont?", "qUnknownThing", "M10,1:zz", "z9,0,0",
        ])

    def gen_mutated(self):
        rng = self.rng
        kind = rng.choice(["m", "x", "M", "X", "g", "G", "p", "P", "Z", "z", "H", "T", "qXfer",
                           "vCont", "qMemoryRegionInfo"])
        if kind in self.skip:
            return None
        p = getattr(self, "mut_" + kind.replace("?", ""))()
        if p is None:
            return None
        return kind, frame(p), "packet", p

    def mut_m(self):
        rng = self.rng
        return "m" + garbage_addr(rng) + sep(rng) + garbage_len(rng)

    def mut_x(self):
        return "x" + self.mut_m()[1:]

    def mut_M(self):
        rng = self.rng
        a, n = garbage_addr(rng), garbage_len(rng)
        data = rng.choice([rhex(rng, 0, 40), rhex(rng, 1, 9) + "z", "", "0", "xyz",
                           "00" * min(parse_hex(n) or 0, 64)])
        p = "M" + a + sep(rng) + n + rng.choice([":", ":", "", "::"]) + data
        # A write the server could legitimately carry out: only to an unmapped address.
        rest = p[1:]
        colon = rest.find(":")
        if colon >= 0:
            al = addr_len(rest[:colon])
            body = rest[colon + 1:]
            if al and from_hex_ok(body) and len(body) // 2 == al[1] and al[1] > 0:
                if maybe_mapped(al[0], al[1]):
                    p = "M10" + "," + "%x" % al[1] + ":" + body
        return p

    def mut_X(self):
        rng = self.rng
        a, n = garbage_addr(rng), garbage_len(rng)
        raw = bytes(rng.choice([0x7d, 0x23 ^ 0x20, 0x41, 0, 0xff, 0x2a]) for _ in range(rng.randint(0, 12)))
        raw = raw.replace(b"$", b"}").replace(b"#", b"}")
        p = ("X" + a + sep(rng) + n + rng.choice([":", ":", ""])).encode() + raw
        rest = p[1:]
        colon = rest.find(b":")
        if colon >= 0:
            al = addr_len(rest[:colon].decode("latin-1"))
            data = unescape(rest[colon + 1:])
            if al and len(data) == al[1] and al[1] > 0 and maybe_mapped(al[0], al[1]):
                p = b"X10," + b"%x" % al[1] + b":" + rest[colon + 1:]
        return p.decode("latin-1")

    def mut_g(self):
        return "g" + rhex(self.rng, 0, 8)

    def mut_G(self):
        rng = self.rng
        body = rng.choice([rhex(rng, 1, 64), rhex(rng, REGS_HEX, REGS_HEX + 8), "zz", "",
                           "0" * (REGS_HEX + 2), rhex(rng, 1, 20) + "q"])
        # A G of valid hex no longer than all registers is a real write: make it odd.
        if body and from_hex_ok(body) and len(body) <= REGS_HEX:
            body += rng.choice(["0", "g", "-"])
        return "G" + body

    def mut_p(self):
        rng = self.rng
        r = rng.choice(["%x" % rng.randint(REG_COUNT, 0x1000), "100000000", "100000001",
                        "ffffffff", "fffffffe", "80000000", "-1", "", "zz", "3c",
                        "%x" % rng.randint(0, REG_COUNT - 1), garbage_num(rng)])
        tail = rng.choice(["", "", ";thread:" + garbage_num(rng), ";thread:", ";"])
        return "p" + r + tail

    def mut_P(self):
        rng = self.rng
        r = rng.choice(["%x" % rng.randint(REG_COUNT, 0x1000), "100000000", "100000010",
                        "ffffffff", "80000000", "-1", "", "zz", "%x" % rng.randint(0, REG_COUNT - 1),
                        garbage_num(rng)])
        v = rng.choice(["0" * 16, "41" * 8, rhex(rng, 1, 40), "", "zz" * 8, "0" * 20, "0" * 32])
        p = "P" + r + rng.choice(["=", "=", "", "=="]) + v
        n = parse_hex(r)
        if n is not None and n < REG_COUNT and "=" in p:
            # A register that exists: never a value it could take (odd digit count).
            p += "0"
            if len(p.split("=", 1)[1]) % 2 == 0:
                p += "0"
        return p

    def mut_Z(self, letter="Z"):
        rng = self.rng
        t = rng.choice(["0", "1", "2", "3", "4", "5", "9", "a", "", "22", "-"])
        a = garbage_addr(rng)
        n = rng.choice([garbage_len(rng), "1", "8", "0"])
        tail = rng.choice(["", "", ";X2,0a", ";cmds:1,", ";"])
        # A watch length from 16 MiB to 1 TiB makes the default (debug register) path allocate
        # gigabytes before it answers (a hang, or the OOM killer on a small machine): such lengths
        # become 2^40 and more, which fail at once.
        ln = parse_hex(n)
        if ln is not None and (1 << 24) <= ln < (1 << 40):
            n = "%x" % (ln | (1 << 40))
        return letter + t + rng.choice([",", ",", ""]) + a + sep(rng) + n + tail

    def mut_z(self):
        return self.mut_Z("z")

    def mut_H(self):
        rng = self.rng
        return "H" + rng.choice(["g", "c", "x", "", "G"]) + rng.choice(
            ["", "-1", "0", "p-1.-1", "p1.", "p", garbage_num(rng)])

    def mut_T(self):
        rng = self.rng
        return "T" + rng.choice(["", "0", "-1", "p1.1", "ffffffff", "100000000", garbage_num(rng),
                                 "%x" % (self.tid + (1 << 32)), "%x" % (self.tid + 1)])

    def mut_qXfer(self):
        rng = self.rng
        obj = rng.choice(["features", "auxv", "exec-file", "threads", "libraries", "", "memory-map",
                          "features:", "siginfo"])
        op = rng.choice(["read", "read", "write", "", "rea"])
        annex = rng.choice(["target.xml", "", "../etc/passwd", "i386.xml", "x" * 300])
        off = rng.choice(["0", garbage_num(rng), "ffffffffffffffff", "fffffffffffffff0"])
        ln = rng.choice(["1000", garbage_len(rng), "0", "ffffffffffffffff"])
        return "qXfer:%s:%s:%s:%s%s%s" % (obj, op, annex, off, sep(rng), ln)

    def mut_qMemoryRegionInfo(self):
        return "qMemoryRegionInfo:" + garbage_addr(self.rng)

    def bad_signal(self):
        """A signal number that is none (0 would be a plain continue, 1..64 a real signal)."""
        while True:
            v = garbage_num(self.rng)
            n = parse_hex(v)
            if n is None or n > 64:
                return v

    def mut_vCont(self):
        rng = self.rng
        return "vCont" + rng.choice([
            "", "?x", ";", ";;", ";x", ";C", ";Czz", ";C:1", ";S", ";Szz:1", ";C100", ";S100",
            ";Cfffffffffffffffff", ";c:zz", ";c:", ";s:", ";cc", ";c;x", ";Cz;c", ";r0",
            ";C" + self.bad_signal(), ";S" + self.bad_signal() + ":-1", ";s:" + "zz", ";c:p", ";C-1",
            ";" + rhex(rng, 2, 4), ";t", ";t:-1", ";c:1", ";s:1", ";c:%x" % (self.tid + 1),
            ";c:ffffffff", ";c:%x" % (self.tid + (1 << 32)), ";s:%x" % (self.tid + (1 << 32)),
        ])

    def gen_edge(self):
        """The edges every round tries a few of: lengths and numbers at the ends of their range."""
        rng = self.rng
        p = rng.choice([
            "Z2,0,ffffffffffffffff", "Z3,1000,ffffffffffffffff", "Z4,ffffffff,7fffffffffffffff",
            "Z2,%x,10000000000" % (rng.getrandbits(40) << 8), "Z2,ffffffffffffffff,1",
            "Z2,ffffffffffffffff,2", "Z2,0,0", "Z1,0,2", "Z0,0,1", "Z0,ffffffffffffffff,1",
            "m0,ffffffffffffffff", "mffffffffffffffff,ffffffffffffffff", "x0,0",
            "p100000000", "P100000000=0000000000000000", "p%x" % REG_COUNT, "pffffffff",
            "vCont;t", "vCont;t:-1", "vCont;c:1", "vCont;c:ffffffff",
            "vCont;c:%x" % (self.tid + (1 << 32)), "vCont;cc", "T%x" % (self.tid + (1 << 32)),
            "qXfer:features:read:target.xml:ffffffffffffffff,ffffffffffffffff",
            "qMemoryRegionInfo:ffffffffffffffff", "Gz", "M0,ffffffffffffffff:00",
        ])
        return "edge", frame(p), "packet", p

    def gen_watch(self):
        """A valid Z2 (or Z3/Z4) of a random range; or the z of one set before."""
        rng = self.rng
        if self.inserted and rng.random() < 0.4:
            key = rng.choice(sorted(self.inserted))
            p = "z%s,%x,%x" % key
            return "watch", frame(p), "packet", p
        t = rng.choice("2223344")
        if rng.random() < 0.7:
            a, n = self.data_range()
        else:
            a, n = rng.getrandbits(48), rng.randint(1, 256)
        p = "Z%s,%x,%x" % (t, a, n)
        return "watch", frame(p), "packet", p

    def action(self):
        rng = self.rng
        gens = [(self.gen_random_bytes, 3), (self.gen_interrupt, 1), (self.gen_badsum, 2),
                (self.gen_truncated, 2), (self.gen_unknown, 2), (self.gen_mutated, 10),
                (self.gen_watch, 3)]
        if self.srv.ack:
            gens.append((self.gen_nack, 1))
        if self.open_packet:
            # A truncated packet is open: only a '$' (the next packet) may follow, else the bytes
            # would go on as its payload.
            gens = [(self.gen_badsum, 1), (self.gen_unknown, 1), (self.gen_mutated, 5),
                    (self.gen_watch, 1), (self.gen_truncated, 1)]
        while True:
            g = rng.choices([g for g, _ in gens], [w for _, w in gens])[0]
            got = g()
            if got is not None and got[0] not in self.skip:
                self.open_packet = got[0] == "truncated"
                return got

    # --- judging the answers ------------------------------------------------------------------
    def run_edge(self):
        if "edge" not in self.skip:
            self.run_one(self.gen_edge())

    def run_one(self, given=None):
        cat, data, kind, payload = given or self.action()
        self.stats["sent"] += 1
        self.stats.setdefault("cat_" + cat, 0)
        self.stats["cat_" + cat] += 1
        srv = self.srv
        if kind == "silent":
            srv.write(data, "%s %r" % (cat, data[:100]))
            return
        if kind == "nack":
            srv.write(data, "nack '-'")
            item = srv.read_item()
            if item is None:
                raise Hang("no resend within 5s after '-'")
            if not isinstance(item, tuple) or item[1].decode("latin-1") != srv.last_reply:
                raise Failure("'-' resent %r, not the last reply %r" % (item, srv.last_reply[:80]))
            return
        if kind == "badsum":
            srv.write(data, "badsum %r" % data[:100])
            if srv.ack:
                item = srv.read_item()
                if item is None:
                    raise Hang("no '-' within 5s for a bad checksum")
                if item != "-":
                    raise Failure("a bad checksum got %r, not '-'" % (item,))
                return
            # Acks are off: gdbserver uses the packet anyway; a client waits for its answer.
            srv.expect_reply("a packet with a bad checksum (no-ack mode)")
            return
        srv.write(data, "%s $%s" % (cat, payload[:150]))
        reply = srv.expect_reply("%s packet %r" % (cat, payload[:80]))
        self.judge(cat, payload, reply)

    def judge(self, cat, p, reply):
        refused = reply == "" or reply.startswith("E")
        if reply[:1] in ("T", "S", "W", "X") and not p.startswith("?"):
            raise Failure("garbage packet %r answered with a stop reply %r: the program ran"
                          % (p[:80], reply[:80]))
        if p.startswith("p") or p.startswith("P"):
            spec = p[1:].split(";thread:")[0]
            r = parse_hex(spec.split("=")[0])
            if (r is None or r >= REG_COUNT) and not refused:
                raise Failure("%s of register %r (not a register) answered %r, not an error"
                              % (p[0], spec.split("=")[0], reply[:40]))
        if p.startswith("P") and reply == "OK":
            raise Failure("a refused-by-construction register write %r answered OK" % p[:80])
        if p.startswith("G") and not refused:
            raise Failure("a malformed G %r answered %r" % (p[:60], reply[:40]))
        if (p.startswith("M") or p.startswith("X")) and reply == "OK":
            rest = p[1:]
            colon = rest.find(":")
            al = addr_len(rest[:colon]) if colon >= 0 else None
            if al is None or al[1] != 0:
                raise Failure("a write that must be refused %r answered OK" % p[:80])
        if p.startswith("T") and reply == "OK":
            t = p[1:]
            if t.startswith("p"):
                t = t.split(".")[-1] if "." in t else t[1:]
            if parse_hex(t) != self.tid and t != "-1":
                raise Failure("T for a thread that does not exist (%r) answered OK" % p)
        if p[:1] in ("Z", "z") and not refused and reply != "OK":
            raise Failure("%r answered %r" % (p[:60], reply[:40]))
        if p[:1] == "Z" and reply == "OK":
            rest = p[1:]
            spec = rest[2:].split(";")[0]
            al = addr_len(spec) if len(rest) >= 2 and rest[1] == "," else None
            if al is None or rest[0] not in "01234":
                raise Failure("a malformed %r answered OK" % p[:60])
            t = rest[0]
            n = 1 if t == "1" else al[1]
            self.inserted[(t, al[0], n)] = p
        if p[:1] == "z" and reply == "OK":
            rest = p[1:]
            al = addr_len(rest[2:].split(";")[0]) if len(rest) >= 2 and rest[1] == "," else None
            if al is not None:
                t = rest[0]
                n = 1 if t in "01" else al[1]
                if t in "01":
                    for k in [k for k in self.inserted if k[0] == t and k[1] == al[0]]:
                        del self.inserted[k]
                else:
                    self.inserted.pop((t, al[0], n), None)


def snapshot(srv, fz, entry):
    """What the program's next steps depend on, as the client sees it."""
    parts = [srv.request("g")]
    for name, (v, s) in sorted(fz.syms.items()):
        parts.append(name + "=" + srv.request("m%x,%x" % (v + fz.bias, s)))
    parts.append("code=" + srv.request("m%x,40" % entry))
    return parts


def handshake(srv, rng):
    # Plain thread ids (no multiprocess+): the garbage below is made for that form.
    r = srv.request("qSupported:swbreak+;hwbreak+;vContSupported+" +
                    (";error-message+" if rng.random() < 0.3 else ""))
    if "PacketSize=" not in r:
        raise Failure("qSupported answered %r" % r[:80])
    stop = srv.request("?")
    if not stop.startswith("T05"):
        raise Failure("'?' answered %r" % stop[:80])
    if rng.random() < 0.5:
        if srv.request("QStartNoAckMode") != "OK":
            raise Failure("QStartNoAckMode refused")
        srv.ack = False
    tid = int(stop.split("thread:")[1].split(";")[0], 16)
    auxv = srv.request("qXfer:auxv:read::0,1000")
    raw = auxv[1:].encode("latin-1")
    entry = None
    for i in range(0, len(raw) - 15, 16):
        k, v = struct.unpack_from("<QQ", raw, i)
        if k == 9:
            entry = v
    if entry is None:
        raise Failure("no AT_ENTRY in qXfer:auxv")
    return tid, entry


def run_to_end(srv, stats, stale_ok, watched=None):
    """vCont;c until W07: over watch stops (only on `watched`, 5 of them) and the program's own
    signals."""
    hits = 0
    deadline = time.monotonic() + 60
    reply = srv.request("vCont;c", 30)
    stops = 0
    while True:
        if reply.startswith("W"):
            if reply != "W07":
                raise Failure("the program ended with %r, not W07" % reply)
            if watched is not None and hits != 5:
                raise Failure("%d stops of the watch on counter, not 5" % hits)
            return
        if reply.startswith("X"):
            raise Failure("the program was killed: %r" % reply)
        if not reply.startswith("T"):
            raise Failure("vCont;c answered %r" % reply[:80])
        stops += 1
        stats["stops"] += 1
        sig = reply[1:3]
        if watched is not None and ("watch:%x;" % watched) in reply:
            hits += 1
        elif sig == "05" and ("watch:" in reply or "break:" in reply) and not stale_ok:
            raise Failure("a watch/breakpoint stop after every one was removed: %r" % reply[:80])
        if time.monotonic() > deadline or stops > 20000:
            raise Failure("no W07 after %d stops" % stops)
        # SIGINT (02) is the stop a 0x03 asked for (one sent while stopped interrupts the next
        # resume, as a Ctrl-C crossing a stop reply does): not the program's, not passed on, as
        # gdb's `handle SIGINT nopass`.
        reply = srv.request("vCont;c" if sig in ("05", "02") else "vCont;C" + sig, 30)


def round_normal(args, rnd, rng, log, stats, e_entry, syms, log_stderr):
    software = rnd % 2 == 1
    srv = Server(args.hwarb, os.path.join(args.programs, "prog_gdb_target"), software, log)
    try:
        tid, entry = handshake(srv, rng)
        bias = entry - e_entry
        fz = Fuzzer(rng, srv, syms, bias, args.skip, stats)
        fz.tid = tid
        before = snapshot(srv, fz, entry)
        for _ in range(rng.randint(20, args.actions)):
            fz.run_one()
            if rng.random() < 0.03:
                fz.run_edge()
        # A packet after the garbage: it is answered, with nothing stray before it.
        st = srv.request("?")
        if not st.startswith("T05"):
            raise Failure("'?' after the garbage answered %r" % st[:80])
        srv.quiet(0.05)
        after = snapshot(srv, fz, entry)
        for b, a in zip(before, after):
            if b != a:
                raise Failure("the program changed under garbage: %r became %r" % (b[:120], a[:120]))
        all_ok = True
        for key in sorted(fz.inserted):
            r = srv.request("z%s,%x,%x" % key)
            stats["removed"] += 1
            if r != "OK":
                all_ok = False
                raise Failure("removing %r (set by %r) answered %r" % (key, fz.inserted[key], r))
        watched = None
        if rnd % 3 == 2:
            # The server still serves a real watch after the garbage: `counter` is written 5 times.
            watched = syms["counter"][0] + bias
            # The server's event log from here on, for a failure's stderr tail.
            reply = srv.request("qRcmd," + "set debug 1".encode().hex())
            while reply.startswith("O") and reply != "OK":
                item = srv.read_item(REPLY_TIMEOUT)
                if not isinstance(item, tuple):
                    raise Failure("after qRcmd's output, %r" % (item,))
                reply = item[1].decode("latin-1")
            if reply != "OK":
                raise Failure("monitor set debug 1 answered %r" % reply[:80])
            if srv.request("Z2,%x,8" % watched) != "OK":
                raise Failure("a valid watch on counter was refused after the garbage")
        run_to_end(srv, stats, stale_ok=not all_ok, watched=watched)
        err = srv.stderr_text()
        rc = srv.close_and_wait()
        if rc != 0:
            raise Failure("the server exited %d\n%s" % (rc, err[-600:]))
        if "total=936" not in srv.stderr_text().splitlines():
            raise Failure("no 'total=936' from the program:\n%s" % srv.stderr_text()[-600:])
    finally:
        srv.kill()
        log_stderr.extend(srv.stderr_text().splitlines())
        srv.errf.close()


def round_close(args, rnd, rng, log, stats, e_entry, syms, log_stderr):
    """The client goes away while the program runs with a watch set."""
    software = rnd % 2 == 1
    srv = Server(args.hwarb, os.path.join(args.programs, "prog_gdb_target"), software, log,
                 [str(rng.choice([5, 2000, 200000]))])
    try:
        tid, entry = handshake(srv, rng)
        bias = entry - e_entry
        fz = Fuzzer(rng, srv, syms, bias, args.skip, stats)
        fz.tid = tid
        for _ in range(rng.randint(0, 20)):
            fz.run_one()
        # A watch that slows the program (the page of `counter`) without stopping it, sometimes
        # one that stops it.
        name = rng.choice(["arr", "secret", "counter"])
        v, s = syms[name]
        t = "3" if name == "arr" else rng.choice("234")
        r = srv.request("Z%s,%x,%x" % (t, v + bias + (36 if name == "arr" else 0), 4))
        if r != "OK":
            raise Failure("a valid watch on %s answered %r" % (name, r))
        pid = srv.child_pid()
        srv.write(frame("vCont;c"), "$vCont;c")
        time.sleep(rng.choice([0, 0.001, 0.005, 0.02, 0.1]))
        rc = srv.close_and_wait()
        if rc != 0:
            raise Failure("after the client went away mid-run the server exited %d\n%s"
                          % (rc, srv.stderr_text()[-600:]))
        if pid is None:
            raise Failure("no 'is process N' line on stderr")
        for _ in range(40):
            if not program_alive(pid):
                break
            time.sleep(0.05)
        else:
            raise Failure("the program (pid %d) is still there after the server ended" % pid)
    finally:
        srv.kill()
        log_stderr.extend(srv.stderr_text().splitlines())
        srv.errf.close()


def extended_packets(hwarb, prog, software):
    """Extended mode packet by packet (no garbage): `hwarb gdbserver --multi --stdio` without a
    program, as gdbserver 13.1 answers. Failure on the first wrong answer."""
    log = []
    srv = Server(hwarb, None, software, log)

    def want(payload, check, what):
        reply = srv.request(payload, timeout=30)
        if not check(reply):
            raise Failure("%s: %r answered %r" % (what, payload[:60], reply[:80]))
        return reply

    def hexs(text):
        return text.encode().hex()

    def pid_of(stop):  # T05thread:pPID.TID;...
        return int(stop.split("thread:p")[1].split(".")[0], 16)

    try:
        want("qSupported:multiprocess+;swbreak+;vContSupported+",
             lambda r: "QDisableRandomization+" in r, "qSupported")
        want("!", lambda r: r == "OK", "extended mode on")
        want("?", lambda r: r == "W00", "no process yet")
        want("qfThreadInfo", lambda r: r == "l", "no threads yet")
        want("g", lambda r: r.startswith("E"), "registers without a process")
        want("vRun;", lambda r: r.startswith("E"), "vRun without any program")
        want("vAttach;0", lambda r: r.startswith("E"), "vAttach of pid 0")
        want("QDisableRandomization:1", lambda r: r == "OK", "QDisableRandomization")
        first = pid_of(want("vRun;%s;%s" % (hexs(prog), hexs("3")), lambda r: r.startswith("T05"),
                            "vRun PROG 3"))
        # With multiprocess+, another vRun adds a process beside the first (gdb's inferior 2);
        # an attach to a process already debugged is refused.
        beside = pid_of(want("vRun;%s" % hexs(prog), lambda r: r.startswith("T05"),
                             "vRun while one runs (a second process)"))
        if beside == first:
            raise Failure("the second vRun gave the first process's pid")
        want("vAttach;%x" % first, lambda r: r.startswith("E"), "vAttach of a process debugged")
        want("vKill;%x" % beside, lambda r: r == "OK", "vKill of the second process")
        if program_alive(beside):
            raise Failure("the killed second process %d is still there" % beside)
        want("vKill;%x" % first, lambda r: r == "OK", "vKill")
        want("?", lambda r: r == "W00", "no process after vKill")
        if program_alive(first):
            raise Failure("the killed process %d is still there" % first)
        # An empty PROG: the last program run, with the arguments given now.
        second = pid_of(want("vRun;;%s" % hexs("2"), lambda r: r.startswith("T05"), "vRun ;2"))
        if second == first:
            raise Failure("vRun gave the killed process's pid again")
        want("vCont;c", lambda r: r.startswith("W07"), "the program's own end (exit 7)")
        third = pid_of(want("vRun;", lambda r: r.startswith("T05"), "vRun again"))
        want("D;%x" % third, lambda r: r == "OK", "detach")
        want("?", lambda r: r == "W00", "no process after D")
        srv.write(frame("k"), "$k")
        if srv.read_item(30) != "+":
            raise Failure("k was not acknowledged")
        srv.quiet(0.5)  # no reply to k, and the server stays
        want("qfThreadInfo", lambda r: r == "l", "after k without a process")
        # R (a restart without vRun): the last program again, without a reply.
        srv.write(frame("R00"), "$R00")
        if srv.read_item(30) != "+":
            raise Failure("R was not acknowledged")
        srv.quiet(0.5)
        restarted = pid_of(want("?", lambda r: r.startswith("T05"), "a process after R"))
        want("vKill;%x" % restarted, lambda r: r == "OK", "vKill after R")
        rc = srv.close_and_wait(30)
        if rc != 0:
            raise Failure("the server exited %s" % rc)
        # Runs 2 (counter 2: total=933) and 3 (the default 5, detached: total=936) printed.
        deadline = time.monotonic() + 30
        while "total=936" not in srv.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        err = srv.stderr_text()
        if "total=933" not in err or "total=936" not in err:
            raise Failure("the runs' output is missing: %r" % err[-300:])
    except Failure as e:
        for line in log[-20:]:
            print("  | " + line, file=sys.stderr)
        srv.kill()
        raise Failure("extended mode%s: %s" % (" (--software)" if software else "", e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hwarb")
    ap.add_argument("programs")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--actions", type=int, default=120, help="most garbage items per round")
    ap.add_argument("--skip", default="", help="categories to leave out, comma-separated")
    ap.add_argument("--keep-going", action="store_true", help="run every round despite failures")
    ap.add_argument("--only", type=int, default=None, help="run only this round (to replay one)")
    ap.add_argument("--tail", type=int, default=25, help="log lines shown for a failed round")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    args.skip = set(x for x in args.skip.split(",") if x)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    e_entry, syms = elf_symbols(os.path.join(args.programs, "prog_gdb_target"))
    syms = {k: v for k, v in syms.items() if k in ("counter", "block", "arr", "secret", "slots")}
    stats = {"sent": 0, "stops": 0, "removed": 0}
    failures = []
    t0 = time.monotonic()
    if args.only is None:
        for software in (False, True):
            try:
                extended_packets(args.hwarb, os.path.join(args.programs, "prog_gdb_target"),
                                 software)
            except Failure as e:
                failures.append((-1, e, []))
                print("FAIL: %s" % e, file=sys.stderr)
    for rnd in range(args.rounds):
        if args.only is not None and rnd != args.only:
            continue
        rng = random.Random("%d/%d" % (seed, rnd))
        random.seed("%d/%d/frame" % (seed, rnd))
        log = []
        log_stderr = []
        close = rnd % 5 == 4
        try:
            (round_close if close else round_normal)(args, rnd, rng, log, stats, e_entry, syms,
                                                      log_stderr)
        except Failure as e:
            failures.append((rnd, e, log))
            print("FAIL: seed %d round %d (%s%s): %s" % (seed, rnd, "close, " if close else "",
                  "--software" if rnd % 2 else "default", e), file=sys.stderr)
            for line in log[-args.tail:]:
                print("  | " + line, file=sys.stderr)
            for line in log_stderr[-60:]:
                print("  stderr| " + line, file=sys.stderr)
            if not args.keep_going:
                break
        if args.v:
            print("round %d done" % rnd, file=sys.stderr)
    cats = " ".join("%s=%d" % (k[4:], v) for k, v in sorted(stats.items()) if k.startswith("cat_"))
    print("gdbserver_fuzz: seed %d, %d rounds run, %d failed, %d garbage items (%s), %d watches "
          "removed, %d stops, %.1fs" % (seed, rnd + 1, len(failures), stats["sent"], cats,
                                       stats["removed"], stats["stops"], time.monotonic() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
