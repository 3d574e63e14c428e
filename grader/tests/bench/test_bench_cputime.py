"""grader.bench.cputime counts a whole tree's CPU time, a process that left its parent included
(as a worker behind bubblewrap's PID namespace does), which RUSAGE_CHILDREN misses."""

from __future__ import annotations

import resource
import sys
import time

import pytest

from grader.bench.cputime import TreeCPU

# The child starts a grandchild in a new session and exits at once; the grandchild, reparented
# to init (never reaped through this process), burns about 0.5 CPU-seconds and writes a mark.
ORPHAN = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass
    open(sys.argv[1], "w").write("done")
    os._exit(0)
"""


def test_a_process_that_left_its_parent_is_counted(tmp_path):
    tree = TreeCPU()
    if tree.folder is None:
        pytest.skip("no writable cgroup here: " + tree.how)
    mark = tmp_path / "mark"
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, reaped = tree.used(), usage.ru_utime + usage.ru_stime
    try:
        tree.popen([sys.executable, "-c", ORPHAN, str(mark)]).wait()
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the grandchild's last instructions after writing the mark
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert tree.used() - before >= 0.45
        assert usage.ru_utime + usage.ru_stime - reaped < 0.45  # what the kit's benches counted before
    finally:
        tree.close()
