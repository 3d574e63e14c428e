"""What a worker may use and see: its limits, the paths hidden from it, the interpreter it is
shown, and the environment variables passed to it."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..options import OMP_WAIT_POLICY, GradingOptions
from ..paths import GRADER

PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
              "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Limits:
    start_seconds: float = 120.0
    memory_bytes: int = GradingOptions.memory_mb << 20
    output_bytes: int = 64 << 10
    file_bytes: int = 1 << 30
    disk_bytes: int = 1 << 30  # the worker's private /tmp (and /dev/shm): memory, not disk
    processes: int = 512  # tasks, threads included
    # GRADER_CONFINEMENT=namespaces (the hand-written ones even where bubblewrap runs) or =none (what a
    # host that refuses namespaces gives: uid drop and limits only) picks a weaker mode, to compare modes.
    namespaces: bool = field(default_factory=lambda: os.environ.get("GRADER_CONFINEMENT") != "none")
    bubblewrap: bool = field(default_factory=lambda: os.environ.get("GRADER_CONFINEMENT") not in ("none", "namespaces"))
    # the worker's "code is reached by its name" audit hook (tests/_by_name.py): off only where the kit's own
    # tests probe the kernel surface from inside a worker with ctypes
    code_by_name: bool = True

    @classmethod
    def of(cls, options: GradingOptions) -> Limits:
        """A worker's limits under ``options`` (its memory cap; each call's clock is the judge's, per request)."""
        return cls(memory_bytes=options.memory_mb << 20)


def secret_paths() -> list[Path]:
    """What no worker may see: the grader (hidden suites, drivers), the reference, and
    the kit checkout's history. The worker's root holds none of them unless the Python
    installation does (a kit installed into site-packages); then they are covered."""
    paths = [GRADER, GRADER.parent / ".git"]
    spec = importlib.util.find_spec("solutions")
    if spec is not None and spec.submodule_search_locations:
        paths += [Path(p).resolve() for p in spec.submodule_search_locations]
    return paths


def interpreter_paths() -> list[str]:
    """Folders the worker must see (read-only) to run this interpreter, its packages and libraries."""
    import einops
    import numpy
    import torch

    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {str(Path(module.__file__).resolve().parents[1]) for module in (torch, numpy, einops)}
    paths |= {p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)}
    # Both spellings, for both binders (bubblewrap's and the hand-written root): a virtual environment
    # reached through a symbolic link runs as its unresolved path (sys.executable, pyvenv.cfg beside
    # it), while its files live under the resolved one.
    return sorted({q for p in paths if os.path.isdir(p) for q in (os.path.abspath(p), os.path.realpath(p))})


def environment(home: Path) -> dict[str, str]:
    """The worker's scrubbed environment: the passed variables (``OMP_WAIT_POLICY`` the kit's where not
    given), a home and temporary folder in its working copy."""
    env = {"OMP_WAIT_POLICY": OMP_WAIT_POLICY, **{key: os.environ[key] for key in PASSED_ENV if key in os.environ}}
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONHASHSEED="0", PYTHONUNBUFFERED="1")
    return env
