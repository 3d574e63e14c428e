"""The in-process debugging backend: the submission runs inside the judge, through the worker's
own dispatcher (``grader.confined``). For debugging the kit only: never grade with it.

The only module outside ``grader/confined`` that imports it; the diagnosis's replay (the kit's
own code, never a submission) reuses the loader and dispatcher from here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from .. import wire
from ..backend import Exchange, GpuUsage, OnCallback, Usage, WorkerFailure
from ..confined.dispatch import Dispatcher
from ..confined.worker import CallbackFailed, load_package
from ..containment import gpu, pagecache
from ..containment.tree import Meter, held_files_bytes

__all__ = ["Dispatcher", "InProcess", "load_package"]

T = TypeVar("T")


class _DirectChannel:
    """In-process stand-in for the worker's pipe channel: callbacks go straight to the judge."""

    def __init__(self) -> None:
        self.on_callback: OnCallback | None = None

    def announce(self, module: str, starting: bool) -> None:
        pass

    def callback(self, number: int, args: tuple, kwargs: dict) -> Any:
        frame = wire.crossed({"$type": "callback", "callback": number, "args": wire.encode(list(args)),
                              "kwargs": wire.encode(kwargs)})
        answer = wire.crossed(self.on_callback(frame))
        if "raised" in answer:
            raise CallbackFailed(str(wire.decode(answer["raised"])))
        return wire.decode(answer.get("value"))


class InProcess:
    """Runs the submission inside the judge. For debugging the kit only: never grade with it."""

    isolation = {"mode": "in-process (UNSAFE: no isolation; for debugging the kit only)"}
    restarts = 0

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.import_error: wire.Raised | None = None
        try:
            load_package(folder)
        except BaseException as exc:  # noqa: BLE001
            self.import_error = wire.decode(wire.encode_exception(exc))
        self.channel = _DirectChannel()
        self.dispatcher = Dispatcher(self.channel, str(folder))
        self._exchange: Path | None = None
        self._meter = Meter(os.getpid())

    def start(self, timeout: float) -> None:
        """Already running: the package was imported when this backend was made."""

    def worker_pid(self) -> int:
        return os.getpid()

    def measure(self, reset_peak: bool = False) -> Usage:
        return self._meter.read(reset_peak)

    def measure_files(self) -> int:
        """The unnamed files this process holds in its exchange folder (it has no uid of its own)."""
        return held_files_bytes({os.getpid()}, self.exchange().host, None)

    def measure_gpu(self) -> GpuUsage:
        """This process's own (the judge's, the submission's with it)."""
        return gpu.usage({os.getpid()})

    def evict_page_cache(self, fd: int) -> None:
        pagecache.evict(fd)

    def page_cache_bytes(self, fd: int) -> int:
        return pagecache.cached_bytes(fd)

    def paused_call(self, call: Callable[[], T], stop_seconds: float, running_share: float) -> tuple[T, float]:
        """Refused: the judge cannot stop the process it runs in (a timing that must follow a pause fails here)."""
        raise WorkerFailure("the submission runs in the judge's own process (--in-process), which the judge "
                            "cannot stop: a paused call needs a worker")

    def exchange(self) -> Exchange:
        if self._exchange is None:
            self._exchange = Path(tempfile.mkdtemp(prefix="kit-exchange-"))
        return Exchange(host=self._exchange, inside=str(self._exchange))

    def sibling(self, withheld: Any = None) -> InProcess:
        """Another dispatcher in this same process: module state is shared, and nothing is withheld (debugging only)."""
        return InProcess(self.folder)

    def request(self, message: dict, timeout: float, on_callback: OnCallback | None = None) -> dict:
        # Framed and parsed both ways, so values cross exactly as they would from a worker.
        self.channel.on_callback = on_callback
        return wire.crossed(self.dispatcher.handle(wire.crossed(message)))

    def close(self) -> None:
        if self._exchange is not None:
            shutil.rmtree(self._exchange, ignore_errors=True)
