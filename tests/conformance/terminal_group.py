#!/usr/bin/env python3
"""The program a gdbserver starts from a terminal: in a process group of its own, which has the
terminal's foreground (Ctrl-C there reaches the program, and the terminal's hang-up at the
server's end reaches neither it nor what it leaves behind).

    terminal_group.py SERVER_WORDS... -- PROG

Runs `SERVER_WORDS 127.0.0.1:0 PROG` as the leader of a new session on a new pseudo-terminal,
waits for its "Listening on port" line, finds the program (the server's child), prints
"pgrp=own|shared foreground=program|other" and ends the server. Exit 0; 1 when the server did
not start the program within 20 s."""
import os
import pty
import select
import signal
import sys
import time


def main():
    sep = sys.argv.index("--")
    server, prog = sys.argv[1:sep], sys.argv[sep + 1]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(server[0], server + ["127.0.0.1:0", prog])
    out = b""
    child = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and child is None:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
        if b"istening on port" in out:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            child = int(kids[0]) if kids else None
    if child is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("no program started: %r" % out[-300:], file=sys.stderr)
        return 1
    with open("/proc/%d/stat" % child) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    pgrp, tpgid = int(fields[2]), int(fields[5])
    print("pgrp=%s foreground=%s" % ("own" if pgrp == child else "shared",
                                      "program" if tpgid == pgrp else "other"))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return 0


sys.exit(main())
