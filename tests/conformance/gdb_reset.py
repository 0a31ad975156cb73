#!/usr/bin/env python3
"""gdb_reset.py PORT PID: a GDB remote client that connects to a server on 127.0.0.1:PORT
serving process PID (a prog_spin), plants a breakpoint (Z0) at tick() and a write watch (Z2) on
`ticks`, continues until the process stops, then resets the connection (RST: SO_LINGER 0),
as a client that crashes or loses its network does. Exit 0 when it got that far."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_symbol import symbol_address  # noqa: E402


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""

    def packet(self, payload):
        data = payload.encode()
        self.sock.sendall(b"$" + data + b"#%02x" % (sum(data) & 0xFF))
        return self.reply()

    def reply(self):
        while True:
            start = self.buf.find(b"$")
            end = self.buf.find(b"#", start + 1) if start >= 0 else -1
            if start >= 0 and end >= 0 and len(self.buf) >= end + 3:
                payload = self.buf[start + 1:end]
                self.buf = self.buf[end + 3:]
                self.sock.sendall(b"+")
                return payload.decode(errors="replace")
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("gdb_reset: the server closed the connection")
            self.buf += chunk

    def reset(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    tick = symbol_address(pid, "tick")
    ticks = symbol_address(pid, "ticks")
    c = Client(port)
    c.packet("qSupported:swbreak+;hwbreak+")
    for request in (f"Z0,{tick:x},1", f"Z2,{ticks:x},8"):
        answer = c.packet(request)
        if answer != "OK":
            sys.exit(f"gdb_reset: {request}: {answer}")
    stop = c.packet("vCont;c")
    if not stop.startswith("T"):
        sys.exit(f"gdb_reset: vCont;c: {stop}")
    c.reset()


if __name__ == "__main__":
    main()
