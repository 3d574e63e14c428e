"""Probes for P6 (data.py): file I/O, RNG paths and real memory, driven next to the student code.

Every probe works in a fresh temporary folder (under the worker's TMPDIR) and returns plain
data: bytes of the files left behind, exception class names, tensors, measured memory.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _raised(exc: BaseException) -> dict:
    return {"types": [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__], "message": str(exc)[:300]}


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` with its bytes (the first MiB; more is never needed here)."""
    return {p.name: p.read_bytes()[: 1 << 20] for p in sorted(folder.iterdir()) if p.is_file()}


def save(module: Any, *, tokens: Any, dtype: Any = None, existing: bytes | None = None, as_str: bool = False,
         file_limit: int | None = None) -> dict:
    """``save_tokens(tokens, path[, dtype])`` in an empty folder (holding ``existing`` at ``path`` if given).

    ``file_limit``: lower RLIMIT_FSIZE to this many bytes during the call, so that writing more
    fails part-way with EFBIG, as a full disk would (Python ignores SIGXFSZ, so the write raises).
    Returns ``{"raised": None | {"types", "message"}, "files": {name: bytes}}``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "tokens.bin"
        if existing is not None:
            path.write_bytes(existing)
        limits = resource.getrlimit(resource.RLIMIT_FSIZE)
        raised = None
        try:
            if file_limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, limits[1]))
            target = str(path) if as_str else path
            if dtype is None:
                module.save_tokens(tokens, target)
            else:
                module.save_tokens(tokens, target, dtype=dtype)
        except Exception as exc:  # noqa: BLE001 - the exception is the answer
            raised = _raised(exc)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        return {"raised": raised, "files": _files(folder)}


def load(module: Any, *, content: bytes, dtype: Any = None) -> dict:
    """``load_tokens(path[, dtype])`` of a file holding ``content``: what came back, or what was raised."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokens.bin"
        path.write_bytes(content)
        try:
            loaded = module.load_tokens(path) if dtype is None else module.load_tokens(path, dtype=dtype)
        except Exception as exc:  # noqa: BLE001
            return {"raised": _raised(exc)}
        answer = {"raised": None, "memmap": isinstance(loaded, np.memmap), "type": type(loaded).__name__}
        if isinstance(loaded, np.ndarray):
            answer.update(writeable=bool(loaded.flags.writeable), dtype=loaded.dtype, values=np.array(loaded))
        del loaded
        return answer


def _tokens(values: np.ndarray, folder: Path, as_file: bool) -> np.ndarray:
    if not as_file:
        return values
    path = folder / "tokens.bin"
    values.tofile(path)
    return np.memmap(path, dtype=values.dtype, mode="r")


def batches(module: Any, *, tokens: np.ndarray, batch_size: Any, context_length: Any, seeds: list,
            as_file: bool = False, device: str = "cpu") -> list:
    """One ``get_batch(tokens, B, L, device, np.random.default_rng(seed))`` per seed, each after
    reseeding numpy's and torch's global RNGs differently (so only the generator can make two equal).

    ``as_file``: pass the tokens as a read-only memmap of a file instead of an in-memory array.
    """
    with tempfile.TemporaryDirectory() as tmp:
        source = _tokens(tokens, Path(tmp), as_file)
        out = []
        for number, seed in enumerate(seeds):
            np.random.seed(1000 + number)
            torch.manual_seed(1000 + number)
            out.append(tuple(module.get_batch(source, batch_size, context_length, device, np.random.default_rng(seed))))
        del source
        return out


def global_batches(module: Any, *, tokens: np.ndarray, batch_size: int, context_length: int, seeds: list) -> list:
    """One ``get_batch(tokens, B, L, "cpu")`` (no generator) after each ``np.random.seed(seed)``;
    torch's global RNG is reseeded differently each time, so only numpy's can make two equal."""
    out = []
    for number, seed in enumerate(seeds):
        torch.manual_seed(2000 + number)
        np.random.seed(seed)
        out.append(tuple(module.get_batch(tokens, batch_size, context_length, "cpu")))
    return out


_MEASURE = r"""
import gc, importlib, importlib.util, json, os, sys
import numpy as np, torch
folder, package, path, batches, batch_size, context_length, ready = sys.argv[1:8]
report = {}
try:
    spec = importlib.util.spec_from_file_location(package, os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[package] = pkg
    try:
        spec.loader.exec_module(pkg)
    except BaseException:
        pass  # as in the worker: a failing __init__.py is noted once in the report; its modules are graded
    data = importlib.import_module(package + ".data")
except BaseException as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"[:300]}))
    raise SystemExit(0)

def evict():
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

def kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])

def reset_peak():
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        report["peak_reset"] = True
    except OSError:
        report["peak_reset"] = False
    return kib("VmRSS") if report["peak_reset"] else kib("VmHWM")

rng = np.random.default_rng(0)
try:  # one-time costs (lazy imports, allocator pools) are not charged to the file
    data.get_batch(np.arange(4096, dtype=np.uint16), 2, 8, "cpu", np.random.default_rng(1))
except BaseException:
    pass
with open(ready + ".tmp", "w") as f:  # tells the parent where growth starts counting
    f.write(str(kib("VmRSS")))
os.replace(ready + ".tmp", ready)

evict()
base = reset_peak()
try:
    tokens = data.load_tokens(path)
    report["load_type"] = type(tokens).__name__
    report["load_len"] = int(len(tokens))
    report["load_ends"] = [int(tokens[0]), int(tokens[-1])]
    report["load_growth_mib"] = (kib("VmHWM") - base) / 1024
    del tokens
except BaseException as exc:
    report["load_error"] = f"{type(exc).__name__}: {exc}"[:300]

evict()
tokens = np.memmap(path, dtype=np.uint16, mode="r")
base = reset_peak()
try:
    for _ in range(int(batches)):
        x, y = data.get_batch(tokens, int(batch_size), int(context_length), "cpu", rng)
    report["batch_growth_mib"] = (kib("VmHWM") - base) / 1024
    report["batch_shape"] = list(x.shape)
except BaseException as exc:
    report["batch_error"] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps(report))
"""


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(module: Any, *, size: int = 1 << 30, batches: int = 20, batch_size: int = 8, context_length: int = 256,
           stop_mib: float = 768.0, timeout: float = 80.0) -> dict:
    """Peak resident memory that ``load_tokens`` and ``batches`` x ``get_batch`` add, measured in a fresh process.

    A sparse token file of ``size`` bytes (no disk used; capped by the worker's file-size limit)
    is made in a temporary folder; a new Python process imports the submission by path, evicts
    the file from the page cache, resets its peak RSS (/proc/self/clear_refs), then (1) calls
    ``load_tokens`` and reads two tokens, (2) samples from ``np.memmap`` of the file, reading
    VmHWM after each. The process is stopped as soon as it has grown by ``stop_mib`` (a reader
    of the whole file would otherwise take seconds and GiBs). Returns its report (growths in
    MiB, errors; ``stopped_mib`` when stopped) and ``size``.
    """
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY:
        size = min(size, soft)
    size -= size % 2
    folder = Path(module.__file__).resolve().parent
    package = module.__name__.rpartition(".")[0]
    with tempfile.TemporaryDirectory() as tmp:
        path, ready = Path(tmp) / "big.bin", Path(tmp) / "ready"
        with open(path, "wb") as f:
            f.truncate(size)
        with open(Path(tmp) / "out", "w+") as out, open(Path(tmp) / "err", "w+") as err:
            proc = subprocess.Popen([sys.executable, "-I", "-c", _MEASURE, str(folder), package, str(path), str(batches),
                                     str(batch_size), str(context_length), str(ready)],
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=tmp)
            deadline, base, stopped = time.monotonic() + timeout, 0, None
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    return {"size": size, "error": f"the measuring process did not finish within {timeout:.0f} s"}
                if not base and ready.exists():
                    base = int(ready.read_text() or 0)
                if base and _rss_kib(proc.pid) - base > stop_mib * 1024:
                    stopped = (_rss_kib(proc.pid) - base) / 1024
                    proc.kill()
                    proc.wait()
                    return {"size": size, "stopped_mib": max(stopped, stop_mib)}
                time.sleep(0.01)
            out.seek(0)
            err.seek(0)
            lines, errors = out.read().strip().splitlines(), err.read().strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = (errors or [f"exit status {proc.returncode}"])[-1]
            return {"size": size, "error": f"the measuring process failed: {tail[:300]}"}
    report["size"] = size
    return report


def cuda_transfers(module: Any, *, tokens: np.ndarray, batch_size: int, context_length: int, seed: int) -> dict:
    """``get_batch(..., "cuda", rng)`` with every host-to-GPU copy recorded.

    Wraps ``Tensor.to``, ``Tensor.cuda`` and ``Tensor.copy_`` for the call and records each
    copy from a CPU tensor to a CUDA one: whether the source was pinned and whether
    ``non_blocking`` was asked for. Returns the transfers, the batch (on the CPU) and its devices.
    """
    module.get_batch(tokens, batch_size, context_length, "cuda", np.random.default_rng(seed))  # warm-up
    torch.cuda.synchronize()
    transfers: list[dict] = []
    originals = {name: torch.Tensor.__dict__.get(name) for name in ("to", "cuda", "copy_")}
    base = {name: getattr(torch.Tensor, name) for name in originals}

    def non_blocking_of(args: tuple, kwargs: dict) -> bool:
        return bool(kwargs.get("non_blocking", False)) or any(a is True for a in args)

    def to(self, *args, **kwargs):
        out = base["to"](self, *args, **kwargs)
        if self.device.type == "cpu" and isinstance(out, torch.Tensor) and out.device.type == "cuda":
            transfers.append({"method": "to", "pinned": bool(self.is_pinned()), "non_blocking": non_blocking_of(args, kwargs)})
        return out

    def cuda(self, *args, **kwargs):
        out = base["cuda"](self, *args, **kwargs)
        if self.device.type == "cpu":
            transfers.append({"method": "cuda", "pinned": bool(self.is_pinned()), "non_blocking": non_blocking_of(args, kwargs)})
        return out

    def copy_(self, src, *args, **kwargs):
        if self.device.type == "cuda" and isinstance(src, torch.Tensor) and src.device.type == "cpu":
            transfers.append({"method": "copy_", "pinned": bool(src.is_pinned()), "non_blocking": non_blocking_of(args, kwargs)})
        return base["copy_"](self, src, *args, **kwargs)

    try:
        torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_ = to, cuda, copy_
        x, y = module.get_batch(tokens, batch_size, context_length, "cuda", np.random.default_rng(seed))
    finally:
        for name, original in originals.items():
            if original is None:
                with contextlib.suppress(AttributeError):
                    delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)
    torch.cuda.synchronize()
    return {"transfers": transfers, "devices": [str(x.device), str(y.device)], "x": x.cpu(), "y": y.cpu()}
