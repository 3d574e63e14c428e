"""Containment of student code: the one entry point that starts, runs and stops workers.

A ``Worker`` starts its process on its first request (or ``start``; ``launch`` stages and
confines it) and talks to it over two pipes (``channel``; never stdin/stdout: those are
captured, truncated and otherwise ignored, ``output``). Each request has a wall-clock limit.
Memory is capped by a per-worker cgroup where the host gives one (``cgroup``: the kernel counts
memfds and tmpfs files, and limits the process count); only where there is none, a watchdog
samples the process tree and kills a worker that grows past its cap (``watchdog``: resident
memory, memfds and private tmpfs files). On a timeout, crash, memory kill or protocol violation the
whole process tree (its cgroup, and, when dropped to a dedicated uid, every process of that
uid) is killed and the next request starts a fresh worker from a fresh copy.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

import psutil

from .. import wire
from ..confined.config import Withheld
from ..backend import Exchange, GpuUsage, OnCallback, WorkerFailure
from . import gpu, level, pagecache, pauses, tree
from .channel import Broken, Channel
from .launch import EXCHANGE, Launched, launch, syscall_filter
from .limits import Limits, secret_paths
from .output import Output
from .running import RUNNING
from .watchdog import MemoryWatch, become_subreaper, kill_tree, reap_orphans

T = TypeVar("T")


class Worker:
    """A contained worker process for one submission, restarted as needed."""

    def __init__(self, package: Path, limits: Limits = Limits(), masks: list[Path] = (),
                 readonly: list[Path] = (), withheld: Withheld | None = None) -> None:
        self.package = package
        self.withheld = withheld
        self.limits = limits
        self.masks = list(dict.fromkeys(str(Path(p).resolve()) for p in [*masks, *secret_paths(), package]))
        self.readonly = [str(Path(p).resolve()) for p in readonly]
        self.isolation: dict[str, str] = {}
        self.import_error: wire.Raised | None = None
        self.restarts = 0
        self.fatal_imports: dict[str, str] = {}  # module -> how importing it ended the worker
        self._run: Launched | None = None
        self._pid: int | None = None  # the worker process found in the running tree (worker_pid), until it stops
        become_subreaper()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float) -> None:
        """Have the worker running with its package imported (the import runs on ``timeout``); a
        worker that spoke out of turn is replaced."""
        self._started(timeout)

    def _started(self, timeout: float) -> float:
        """``start``; the deadline a request goes on with: one started for it shares its clock with
        the package's import."""
        if "__init__" in self.fatal_imports:
            raise WorkerFailure(f"{self.fatal_imports['__init__']} (not imported again)")
        if self._run is not None and self._channel.pending():
            self.stop()  # it spoke out of turn between requests, or died: a fresh one answers
            self.restarts += 1
        if self._run is not None:
            return time.monotonic() + timeout
        self._launch()
        deadline = time.monotonic() + timeout
        try:
            self._await_ready(deadline)
        except WorkerFailure as exc:
            self.fatal_imports["__init__"] = str(exc)
            raise
        return deadline

    def _launch(self) -> None:
        """Start the process, its output drain and memory watch; read what confinement it obtained."""
        run = self._run = launch(self.package, self.limits, self.masks, self.readonly, self.withheld)
        self._pid = None
        self._channel = Channel(run.request_w, run.response_r)
        self._output = Output(self.limits.output_bytes)
        self._meter = tree.Meter(run.proc.pid, run.cgroup, run.uid)
        self._watch = MemoryWatch(run.proc, self.limits.memory_bytes, run.uid, self._kill_tree)
        self._threads = [threading.Thread(target=self._output.drain, args=(run.output,), daemon=True)]
        if run.cgroup is None:  # the kernel's count is exact where a cgroup caps the tree
            self._threads.append(self._watch.thread())
        for thread in self._threads:
            thread.start()
        hello = self._receive(time.monotonic() + self.limits.start_seconds, "starting the worker")
        self.isolation = {key: str(value) for key, value in dict(hello.get("isolation", {})).items()}
        confinement = ("bubblewrap" if run.wrapped else "rlimits only"
                       if self.isolation.get("network", "").startswith("host") else "hand-written namespaces")
        self.isolation["mechanism"] = level.mechanism(confinement, syscall_filter() is not None, run.cgroup)
        self.isolation["memory"] = run.cgroup.describe() if run.cgroup else (
            f"watched ten times a second: resident memory, memfds and private tmpfs files, "
            f"{self.limits.memory_bytes >> 20} MiB (no cgroup on this host)")

    def _await_ready(self, deadline: float) -> None:
        """The package's own import is student code: it runs on the first request's clock."""
        ready = self._receive(deadline, "importing your package")
        try:
            self.import_error = wire.decode(ready["import_error"]) if "import_error" in ready else None
        except wire.WireError as exc:
            raise self._fail(f"the worker broke the protocol while importing your package ({exc})") from None

    def _kill_tree(self) -> None:
        run = self._run
        if run is None:
            return
        if run.holder is None:
            kill_tree(run.proc.pid, run.uid, run.cgroup)
            return
        # Forked: the worker's parent, outside the sandbox, outlives it to reap it (an orphan re-parented to
        # this process, a subreaper, would leave the sandbox's first process waiting for it as this waits for
        # that one), then ends as it did; the holder's sandbox ends with the holder.
        for root in tree.children(run.proc.pid) or {run.proc.pid}:
            kill_tree(root, run.uid, run.cgroup)
        run.holder.kill()

    def stop(self) -> None:
        """Kill the worker and everything it started; remove its folder."""
        run = self._run
        if run is None:
            return
        self._kill_tree()
        run.proc.wait()
        RUNNING.discard(run.proc.pid)
        if run.holder is not None:
            run.holder.wait()
            RUNNING.discard(run.holder.pid)
        reap_orphans()
        self._channel.close()
        for thread in self._threads:
            thread.join(timeout=5)
        run.output.close()
        self._meter.close()
        shutil.rmtree(run.base, ignore_errors=True)
        if run.uid is not None:  # what it left in the host's shared memory (where it had no private one)
            for path in tree.owned_files(Path("/dev/shm"), run.uid):
                path.unlink(missing_ok=True)
        if run.cgroup is not None:
            run.cgroup.remove()
        if run.claim is not None:
            run.claim.release()
        self._run = None

    close = stop

    def sibling(self, withheld: Withheld | None = None) -> Worker:
        """A second worker for the same package, limits and masks, sharing nothing with this one
        (its own process tree, folder, exchange, uid and cgroup), running without the library code
        ``withheld`` names (``confined.config.Withheld``); started on its first request."""
        return Worker(self.package, self.limits, masks=[Path(p) for p in self.masks],
                      readonly=[Path(p) for p in self.readonly], withheld=withheld)

    # -- protocol --------------------------------------------------------------------------

    def _fail(self, what: str) -> WorkerFailure:
        """Stop the worker and describe why, with the end of what it printed."""
        run = self._run
        ended = run.proc.poll() if run is not None else None  # how it ended by itself, before it is killed
        if ended is not None and ended > 128 and run.wrapped:  # bubblewrap ends with 128 + the worker's signal
            ended = 128 - ended
        memory = self._watch.killed or (run is not None and run.cgroup is not None and run.cgroup.oom_killed())
        self.stop()
        self.restarts += 1
        if memory:
            what = f"used more than {self.limits.memory_bytes >> 20} MiB of memory and was stopped"
        elif ended is not None and ended < 0 and "died" in what:
            try:
                what += f" (killed by signal {signal.Signals(-ended).name})"
            except ValueError:
                what += f" (killed by signal {-ended})"
        elif ended is not None and "died" in what:
            what += f" (exit status {ended})"
        output = self._output.tail().strip()
        return WorkerFailure(what + (f"; its last output: {output}" if output else ""))

    def _receive(self, deadline: float, what: str) -> dict:
        try:
            return self._channel.receive(deadline, what)
        except Broken as exc:
            if exc.ended:
                try:
                    self._run.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            raise self._fail(str(exc)) from None

    def _send(self, message: dict, deadline: float, what: str) -> None:
        try:
            self._channel.send(message, deadline, what)
        except Broken as exc:
            raise self._fail(str(exc)) from None

    def exchange(self) -> Exchange:
        """The folder this worker shares with the judge (the worker must be running: a restart
        gives a fresh, empty one)."""
        if self._run is None:
            raise WorkerFailure("the worker is not running")
        return Exchange(host=self._run.base / "work" / EXCHANGE, inside=EXCHANGE)

    def worker_pid(self) -> int | None:
        """The worker process as the judge sees it (for measuring it from outside through /proc):
        the oldest process of the worker's tree that runs this interpreter and holds the request
        pipe (not bubblewrap, which holds it too); None when not running. Found once per start (a walk
        of every process on the host) and kept while that process lives."""
        if self._run is None or self._run.proc.poll() is not None:
            return None
        if self._pid is not None and psutil.pid_exists(self._pid):
            return self._pid
        self._pid = self._find_pid()
        return self._pid

    def _find_pid(self) -> int | None:
        pipe = f"pipe:[{os.fstat(self._run.request_w).st_ino}]"
        for process in sorted(tree.processes(self._run.proc.pid), key=_created):
            try:
                if process.cmdline()[:2] != [sys.executable, "-I"]:
                    continue
                if any(os.readlink(f"/proc/{process.pid}/fd/{fd}") == pipe for fd in os.listdir(f"/proc/{process.pid}/fd")):
                    return process.pid
            except (OSError, psutil.Error):
                continue
        return None

    def measure(self, reset_peak: bool = False) -> tree.Usage | None:
        """What the worker's whole tree has used, read from outside it (``containment.tree``); None
        when not running. ``reset_peak``: the next reading's peak starts from this one."""
        if self._run is None or self._run.proc.poll() is not None:
            return None
        return self._meter.read(reset_peak)

    def measure_files(self) -> int | None:
        """Bytes on disk of the files the worker's tree wrote in the exchange folder, the one place it may write
        to disk, whether it holds them open, maps them or left them there (``tree.held_files_bytes``); None
        when not running."""
        pids = self._pids()
        return None if pids is None else tree.held_files_bytes(pids, self._run.base / "work" / EXCHANGE, self._run.uid)

    def measure_gpu(self) -> GpuUsage | None:
        """What the worker's processes hold for the GPU (``containment.gpu``: their device memory as
        the NVIDIA driver lists it, their pinned host mappings in /proc); None when not running."""
        pids = self._pids()
        return None if pids is None else gpu.usage(pids)

    def evict_page_cache(self, fd: int) -> None:
        """Drop the clean pages of the judge's file behind ``fd`` from the page cache (``containment.pagecache``)."""
        pagecache.evict(fd)

    def page_cache_bytes(self, fd: int) -> int:
        """How many bytes of the judge's file behind ``fd`` are in the page cache now (``containment.pagecache``:
        ``mincore`` on the judge's own mapping), whoever brought them in, the worker's tree included."""
        return pagecache.cached_bytes(fd)

    def _pids(self) -> set[int] | None:
        """Every process of the worker: its cgroup's, else its tree's; None when not running."""
        run = self._run
        if run is None or run.proc.poll() is not None:
            return None
        return run.cgroup.pids() if run.cgroup is not None else tree.pids(run.proc.pid)  # the first is a file's read

    def pause(self, stopped: bool) -> None:
        """SIGSTOP (``stopped``) or SIGCONT every process of the worker's tree and cgroup: time passes
        for it without it running, at moments it cannot foresee (none when it is not running)."""
        for pid in self._pids() or ():
            try:
                os.kill(pid, signal.SIGSTOP if stopped else signal.SIGCONT)
            except ProcessLookupError:
                continue

    def paused_call(self, call: Callable[[], T], stop_seconds: float, running_share: float) -> tuple[T, float]:
        """``call()``'s value while the worker's tree is stopped and continued by ``pause`` on the judge's
        schedule (``pauses.paused``), and the share of its wall time the worker stood still."""
        return pauses.paused(call, self.pause, stop_seconds, running_share)

    def request(self, message: dict, timeout: float, on_callback: OnCallback | None = None) -> dict:
        """Send one request and return its answer (a frame of type "result" with the request's id).

        While it runs, the submission may call a judge callback: ``on_callback`` answers each
        ``callback`` frame with a ``return`` frame (it may send nested requests meanwhile), and
        the request's clock starts again after it.

        A module whose import ended or hung the worker once is not imported again: later
        requests into it fail at once with the same reason (importing is deterministic, and a
        restart per call would spend the submission's whole time budget)."""
        module = str(message.get("target") or "").partition(".")[0]
        if module in self.fatal_imports:
            raise WorkerFailure(f"{self.fatal_imports[module]} (not imported again)")
        deadline = self._started(timeout)
        what = f"running {message.get('target') or message.get('$type')}"
        self._send(message, deadline, what)
        answer = self._answer(module, deadline, what)
        while answer.get("$type") == "callback" and on_callback is not None:
            reply = on_callback(answer)
            deadline = time.monotonic() + timeout
            self._send(reply, deadline, what)
            answer = self._receive(deadline, what)
        if answer.get("$type") != "result" or answer.get("id") != message.get("id"):
            raise self._fail(f"the worker answered out of turn while {what}; it was stopped")
        # Where no cgroup counts memory, the watchdog samples: a burst between two samples is
        # caught here, before the answer counts (a result made over the cap is refused).
        if self._run is not None and self._run.cgroup is None and self._watch.stopped_over():
            raise self._fail(what)
        return answer

    def _answer(self, module: str, deadline: float, what: str) -> dict:
        """The first answer past the announcements of a module's import; a module whose import ends
        the worker is remembered (``fatal_imports``)."""
        importing, announced = None, 0
        try:
            answer = self._receive(deadline, what)
            while answer.get("$type") in ("importing", "imported") and announced < 2:
                announced += 1
                importing = str(answer.get("module")) if answer["$type"] == "importing" else None
                answer = self._receive(deadline, f"importing {importing}.py" if importing else what)
        except WorkerFailure as exc:
            if importing == module:
                self.fatal_imports[module] = str(exc)
            raise
        return answer


def _created(process: psutil.Process) -> float:
    try:
        return process.create_time()
    except psutil.Error:
        return 0.0
