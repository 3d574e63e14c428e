"""``grader gradescope-bundle``: a Gradescope autograder zip that grades through the same judge.

Gradescope unpacks the zip into /autograder/source, runs ``setup.sh`` once when it builds the
image, and ``run_autograder`` for every submission. The zip holds, at its root:

- ``setup.sh`` (from ``grader/classroom/gradescope/``): a virtual environment, torch, then the kit from
  the bundled source; the kit's files are then readable by root (the judge) only;
- ``run_autograder``: ``python -m grader grade /autograder/submission --out
  /autograder/results/results.json``; student code runs in the judge's sandboxed worker, which
  drops root to a dedicated uid. A results.json exists even when the grader cannot start;
- ``config.sh``: this bundle's settings; the environment overrides each one (and the paths), which
  is how the kit's tests run ``run_autograder`` in a fake layout;
- ``kit/``: pyproject.toml, README.md, the grader with its hidden suites, what the diagnosis of a
  failed test replays on: the reference solutions and the catalog of known mistakes, and what a failure
  quotes its handout rule from: handout.md and its reader ``tests/_rules.py``, and the worker's "code is reached
  by its name" hook ``tests/_by_name.py`` and P1's source reader ``tests/_layout_reader.py`` (``setup.sh`` makes the kit readable by root alone, and the worker's sandbox never holds the kit); no stubs, public tests or the
  kit's own tests.

The zip is reproducible: fixed order, fixed timestamps, the same bytes for the same kit.
"""

from __future__ import annotations

import math
import sys
import zipfile
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..options import GradingOptions
from ..paths import KIT_ROOT

SCRIPTS = Path(__file__).resolve().parent / "gradescope"
LEFT_OUT = (("tests",), ("bench",), ("classroom", "cluster"), ("release",))  # folders of grader/ grading doesn't need


def _left_out(parts: tuple[str, ...], path: Path) -> bool:
    """Not bundled: the folders above and caches."""
    return any(parts[:len(folder)] == folder for folder in LEFT_OUT) or "__pycache__" in parts or path.suffix == ".pyc"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
TESTED_TORCH = "torch==2.13.0"  # the version the kit's tests ran with; --torch changes it
GRADESCOPE_MEMORY_MB, GRADESCOPE_SECONDS = 768, 600  # Gradescope's default container: 768 MB, 10 minutes
WORKER_MEMORY_SHARE = 0.6  # of the container's memory: the worker's cap (the judge and grader take the rest)
BUDGET_SHARE = 0.9  # of Gradescope's timeout: the per-submission budget (interpreter start-up and margin)
STAMP = (2020, 1, 1, 0, 0, 0)
GRADESCOPE = GradingOptions(memory_mb=int(WORKER_MEMORY_SHARE * GRADESCOPE_MEMORY_MB),
                            budget_seconds=BUDGET_SHARE * GRADESCOPE_SECONDS)  # the bundle's defaults
# The grading options gradescope-bundle's command line sets (the others are GRADESCOPE's), each with what changes
# in its flag (``cli._grading_options``): Gradescope has no GPU, so no GPU pass ("only") either.
SETTINGS: dict[str, dict[str, Any]] = {
    "gpu": dict(choices=("auto", "require", "off"),
                help="GPU mode of run_autograder (Gradescope has no GPU: auto marks grades provisional)"),
    "profile": dict(help="hypothesis profile"),
    "memory_mb": dict(help=f"worker memory cap (default: {WORKER_MEMORY_SHARE:.0%}% of Gradescope's "
                           f"{GRADESCOPE_MEMORY_MB} MB container)"),
    "budget_seconds": dict(help=f"per-submission budget, a hard wall (default: {BUDGET_SHARE:.0%}% of Gradescope's "
                                f"{GRADESCOPE_SECONDS // 60} minutes)")}


class BundleError(ValueError):
    """The bundle cannot be written (bad target, kit files missing)."""


def _config(options: GradingOptions, torch: str, torch_index_url: str) -> str:
    values = {"KIT_GPU": options.gpu, "KIT_PROFILE": options.profile, "KIT_TORCH": torch,
              "KIT_TORCH_INDEX": torch_index_url, "KIT_MEMORY_MB": str(options.memory_mb),
              "KIT_BUDGET_SECONDS": f"{options.budget_seconds:g}"}
    lines = ["# Written by `grader gradescope-bundle`; each value can be overridden by the environment."]
    lines += [f': "${{{key}={_quote(value)}}}"' for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    if any(c in value for c in "\"'$`\\\n}"):
        raise BundleError(f"unsupported character in setting {value!r}")
    return value


def kit_files(kit: Path = KIT_ROOT) -> list[tuple[Path, str]]:
    """(file, name in the zip) for the kit's part of the bundle, sorted."""
    shared = ("tests/_rules.py", "tests/_by_name.py", "tests/_layout_reader.py")  # the public tests' modules the grader loads (grader.public)
    files = [(kit / name, f"kit/{name}") for name in ("pyproject.toml", "README.md", "handout.md", *shared)]
    files += [(path, f"kit/solutions/{path.name}") for path in sorted((kit / "solutions").glob("*.py"))]
    for path in sorted((kit / "grader").rglob("*")):
        parts = path.relative_to(kit / "grader").parts
        if path.is_file() and not path.is_symlink() and not _left_out(parts, path):
            files.append((path, f"kit/{path.relative_to(kit).as_posix()}"))
    missing = [str(p) for p, _ in files if not p.is_file()]
    if missing:
        raise BundleError(f"kit files missing: {', '.join(missing)}")
    return files


def _add(bundle: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=STAMP)
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, data)


def check_torch(torch: str, torch_index_url: str) -> None:
    """BundleError unless ``torch`` is a pip requirement for torch and the index (if any) an http(s) address."""
    try:
        name = canonicalize_name(Requirement(torch).name)
    except InvalidRequirement:
        name = ""
    if name != "torch":
        raise BundleError(f"--torch {torch!r}: expected what pip installs for torch, e.g. {TESTED_TORCH} or torch>=2.6")
    if torch_index_url and not torch_index_url.startswith(("https://", "http://")):
        raise BundleError(f"--torch-index-url {torch_index_url!r}: expected an http(s) address, or '' for PyPI")


def timeout_minutes(options: GradingOptions) -> int:
    """The autograder timeout Gradescope must be set to (its default, unless the budget needs more)."""
    return max(GRADESCOPE_SECONDS, math.ceil(options.budget_seconds / BUDGET_SHARE / 60) * 60) // 60


def build(out: Path, *, options: GradingOptions = GRADESCOPE, torch: str = TESTED_TORCH,
          torch_index_url: str = CPU_TORCH_INDEX, kit: Path = KIT_ROOT) -> Path:
    """Write the autograder zip, whose run_autograder grades with ``options``, to ``out``; returns it."""
    if out.suffix != ".zip":
        raise BundleError(f"{out}: the bundle is a .zip file")
    if not out.parent.is_dir():
        raise BundleError(f"{out}: no folder {out.parent} (make it first)")
    check_torch(torch, torch_index_url)
    config = _config(options, torch, torch_index_url)
    files = kit_files(kit)
    temp = out.with_name(f".{out.name}.tmp")
    try:
        with zipfile.ZipFile(temp, "w") as bundle:
            _add(bundle, "setup.sh", (SCRIPTS / "setup.sh").read_bytes(), executable=True)
            _add(bundle, "run_autograder", (SCRIPTS / "run_autograder.sh").read_bytes(), executable=True)
            _add(bundle, "config.sh", config.encode())
            for path, name in files:
                _add(bundle, name, path.read_bytes(), executable=path.suffix == ".sh")
        temp.replace(out)
    finally:
        temp.unlink(missing_ok=True)
    return out


def main(out: str, *, options: GradingOptions = GRADESCOPE, torch: str = TESTED_TORCH,
         torch_index_url: str = CPU_TORCH_INDEX) -> int:
    """Write the bundle; 0 when written, 2 when it could not be."""
    try:
        path = build(Path(out), options=options, torch=torch, torch_index_url=torch_index_url)
    except (BundleError, OSError) as exc:
        print(f"grader gradescope-bundle: {exc}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(path) as bundle:
        count = len(bundle.namelist())
    minutes = timeout_minutes(options)
    timeout = (f"Gradescope's default {GRADESCOPE_MEMORY_MB} MB and {minutes} minutes suffice with these settings"
               if minutes * 60 == GRADESCOPE_SECONDS else
               f"set the autograder timeout in Gradescope's settings to at least {minutes} minutes: its default "
               f"{GRADESCOPE_SECONDS // 60} would stop every grading before this budget ends")
    print(f"wrote {path} ({count} files, {path.stat().st_size >> 10} KiB): upload it as the Gradescope "
          f"autograder (Ubuntu 22.04 base image; {timeout}, see README); GPU mode {options.gpu}, "
          f"hypothesis profile {options.profile}, {torch}, worker memory {options.memory_mb} MB, "
          f"budget {options.budget_seconds:g} s")
    return 0
