"""The host's memory while a worker tries to exhaust it outside its resident set.

For each containment mode this host gives (bubblewrap, hand-written namespaces, no namespaces),
and with or without a cgroup, a worker capped at ``--cap-mb`` writes ``--gib`` GiB into a memfd,
then into files on /dev/shm and /tmp. The host's memory in use (MemTotal - MemAvailable, sampled
every 20 ms) is printed before and at its peak, and how far the peak went past the cap:

    python -m grader.bench.hostmemory                 # cap 1024 MiB, 3 GiB each
    python -m grader.bench.hostmemory --cap-mb 512 --gib 2
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from grader import wire
from grader.bench import records
from grader.containment import bubblewrap
from grader.containment import cgroup as cgroups
from grader.backend import WorkerFailure
from grader.containment.limits import Limits
from grader.containment.worker import Worker

BALLOON = '''
import os
import time


def balloon(where, gib):
    fd = os.memfd_create("balloon") if where == "memfd" else os.open(os.path.join(where, "balloon.bin"),
                                                                      os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"x" * (64 << 20)
    for _ in range(16 * gib):
        os.write(fd, chunk)
    time.sleep(5)
    return "held"
'''


def _in_use() -> int:
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (int(fields["MemTotal"].split()[0]) - int(fields["MemAvailable"].split()[0])) << 10


class Peak:
    """The host's memory in use, sampled in a thread until stopped."""

    def __init__(self) -> None:
        self.base = self.peak = _in_use()
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while self._running:
            self.peak = max(self.peak, _in_use())
            time.sleep(0.02)

    def stop(self) -> int:
        self._running = False
        self._thread.join()
        return self.peak - self.base


def run(package: Path, limits: Limits, where: str, gib: int) -> tuple[str, int]:
    worker = Worker(package, limits)
    try:
        worker.request({"$type": "call", "id": 0, "target": "tricks.balloon", "args": wire.encode(["/tmp", 0]),
                        "kwargs": wire.encode({})}, 120)  # started and imported before measuring
        peak = Peak()
        try:
            answer = worker.request({"$type": "call", "id": 1, "target": "tricks.balloon",
                                     "args": wire.encode([where, gib]), "kwargs": wire.encode({})}, 120)
            ended = "NOT STOPPED" if "value" in answer else "raised"
        except WorkerFailure as exc:
            ended = "stopped: " + str(exc)[:50]
        return ended, peak.stop()
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap-mb", type=int, default=1024)
    parser.add_argument("--gib", type=int, default=3)
    args = parser.parse_args(argv)
    bench = records.start("hostmemory", argv)
    rows = {}
    package = Path(tempfile.mkdtemp(prefix="kit-bench-")) / "assignment"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tricks.py").write_text(BALLOON)
    modes = {"bubblewrap": {}, "hand-written namespaces": {"bubblewrap": False}, "no namespaces": {"namespaces": False}}
    if bubblewrap.why_not_usable():
        del modes["bubblewrap"]
    real_create = cgroups.create
    print(f"cap {args.cap_mb} MiB, {args.gib} GiB written; host memory in use rose by (peak - before):")
    for name, options in modes.items():
        for with_cgroup in (True, False):
            cgroups.create = real_create if with_cgroup else (lambda *a: None)
            limits = Limits(memory_bytes=args.cap_mb << 20, disk_bytes=(args.gib + 1) << 30,
                            **options)
            for where in ("memfd", "/dev/shm", "/tmp"):
                ended, rise = run(package, limits, where, args.gib)
                print(f"  {name:24} {'cgroup' if with_cgroup else 'watchdog':8} {where:9} "
                      f"{rise >> 20:6d} MiB ({rise / (args.cap_mb << 20):.2f}x the cap)  {ended}", flush=True)
                rows[f"{name}, {'cgroup' if with_cgroup else 'watchdog'}, {where}"] = {
                    "rise MiB": rise >> 20, "x the cap": round(rise / (args.cap_mb << 20), 2), "ended": ended}
    cgroups.create = real_create
    bench.write(f"the host's memory while a worker capped at {args.cap_mb} MiB writes {args.gib} GiB outside it",
                {"most x the cap": max(row["x the cap"] for row in rows.values())}, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
