"""What the run prints: plain lines, and one benchmark-style line per phase
(`phase NAME: 123.4 s`) so a slow step is seen at once; every phase's time is
also kept for the summary at the end."""

import sys
import threading
import time
from contextlib import contextmanager

TIMES = []
STARTED = time.monotonic()
# With cases run side by side (run.py --jobs), each thread's lines are
# prefixed with its case.
_LOCAL = threading.local()
_LOCK = threading.Lock()


def set_prefix(text):
    _LOCAL.prefix = text


def say(text):
    with _LOCK:
        print(getattr(_LOCAL, "prefix", "") + text, flush=True)


@contextmanager
def phase(name):
    start = time.monotonic()
    say(f"-- {name}")
    ok = False
    try:
        yield
        ok = True
    finally:
        took = time.monotonic() - start
        TIMES.append((name, took, ok))
        say(f"phase {name}: {took:.1f} s{'' if ok else ' (failed)'}")


def summary():
    say("== phases")
    for name, took, ok in TIMES:
        say(f"  {took:8.1f} s  {name}{'' if ok else '  FAILED'}")
    say(f"  {time.monotonic() - STARTED:8.1f} s  in all (wall clock; phases nest)")
    sys.stdout.flush()
