"""The kit on several (Python, torch) pairs: does each one pass what the kit promises?

For each cell it builds a virtual environment (or reuses one that already has that torch),
installs that torch and the kit (editable, with its ``grader`` extra), then runs from the kit:
the public tests against the reference (``pytest tests --impl solutions``), ``grader grade
solutions --gpu off`` (must be full marks on the CPU part: 93/100, the GPU points not run) and
``grader grade assignment --gpu off`` (the stubs: must be 0). Prints one table row per cell;
exits 1 if an installed cell misses one of those, 2 if none could be installed:

    python -m grader.bench.matrix --python 3.10 3.11 3.13 --torch 2.6.0 2.11.0 2.13.0
    python -m grader.bench.matrix --python ~/.pyenv/versions/3.11.7/bin/python --torch 2.11.0 --delete

A Python is a version (the newest ``~/.pyenv/versions/X.Y.*``) or an interpreter's path.
Venvs live in ``--venvs`` (default ~/.cache/kit-matrix), one per cell, about 5 GB with a
CUDA build of torch: ``--delete`` removes each after its cell.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from grader.bench import records
from grader.paths import KIT_ROOT
from grader.grading.results import GradingResult

PYENV = Path.home() / ".pyenv" / "versions"
DEFAULT_VENVS = Path.home() / ".cache" / "kit-matrix"


class MatrixError(Exception):
    """A bad argument: said before anything is installed."""


@dataclass
class Cell:
    python: Path
    torch: str
    status: str = ""  # "ok", "FAIL" or "not installed: <why>"
    python_version: str = ""
    public: str = ""
    solutions: str = ""
    assignment: str = ""
    seconds: float = 0.0
    problems: tuple[str, ...] = ()


def resolve_python(spec: str) -> Path:
    """An interpreter path, or the newest pyenv install of version ``spec`` (e.g. ``3.11``)."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    if "/" in spec:
        raise MatrixError(f"--python {spec}: no such interpreter")
    found = sorted(PYENV.glob(f"{spec}.*/bin/python"), key=lambda p: [int(x) for x in p.parts[-3].split(".")
                                                                       if x.isdigit()])
    if not found:
        raise MatrixError(f"--python {spec}: neither an interpreter's path nor a version under {PYENV}")
    return found[-1]


def run(command: list[str], cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def last_error(proc: subprocess.CompletedProcess[str]) -> str:
    """pip's or Python's own last word on why it failed."""
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines()
             if line.strip() and not line.startswith("WARNING: Location")]
    errors = [line for line in lines if line.startswith("ERROR") or "Error" in line]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1][:160]


def venv_torch(python: Path, kit: Path) -> str:
    """The torch version ``python`` imports (without a local suffix), or "" when it lacks torch or
    does not import the grader from ``kit``."""
    if not python.exists():
        return ""
    proc = run([str(python), "-c", "import torch, grader; print(torch.__version__, grader.__file__)"], Path("/"))
    version, _, grader = proc.stdout.strip().partition(" ")
    return version.split("+")[0] if proc.returncode == 0 and Path(grader).is_relative_to(kit) else ""


def prepare(cell: Cell, venvs: Path, kit: Path) -> Path | None:
    """The cell's venv interpreter, built if needed; None (and ``cell.status`` says why) if not installable."""
    version = run([str(cell.python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], kit)
    if version.returncode != 0:
        cell.status = f"not installed: {cell.python} does not run ({last_error(version)})"
        return None
    cell.python_version = version.stdout.strip()
    venv = venvs / f"py{cell.python_version}-torch{cell.torch}"
    python = venv / "bin" / "python"
    if venv_torch(python, kit) == cell.torch:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    for step in ([str(cell.python), "-m", "venv", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", f"torch=={cell.torch}"],
                 [str(python), "-m", "pip", "install", "--quiet", "-e", f"{kit}[grader]"]):
        proc = run(step, kit)
        if proc.returncode != 0:
            cell.status = f"not installed: {last_error(proc)}"
            shutil.rmtree(venv, ignore_errors=True)
            return None
    return python


def public_tests(python: Path, kit: Path) -> tuple[str, bool]:
    """``pytest tests --impl solutions``: its counts (naming the tests that failed), and whether all ran and none failed."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "public.xml"
        proc = run([str(python), "-m", "pytest", "tests", "--impl", "solutions", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={xml}"], kit)
        if not xml.exists():
            return f"no report ({last_error(proc)})", False
        root = ElementTree.parse(xml).getroot()
    suites = list(root.iter("testsuite"))
    total, failed, errors, skipped = (sum(int(s.get(key, 0)) for s in suites)
                                      for key in ("tests", "failures", "errors", "skipped"))
    failed += errors
    passed = total - failed - skipped
    names = [case.get("name", "") for case in root.iter("testcase")
             if case.find("failure") is not None or case.find("error") is not None]
    which = f" ({', '.join(names)})" if names else ""
    return (f"{passed} passed, {failed} failed{which}, {skipped} skipped",
            proc.returncode == 0 and failed == 0 and passed > 0)


def grade(python: Path, kit: Path, submission: str) -> GradingResult | str:
    """``grader grade SUBMISSION --gpu off``'s result, or why there is none."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        proc = run([str(python), "-m", "grader", "grade", submission, "--gpu", "off", "--out", str(out)], kit)
        if not out.exists():
            return f"no results ({last_error(proc)})"
        return GradingResult.from_gradescope_dict(json.loads(out.read_text()))


def score_text(result: GradingResult | str) -> str:
    if isinstance(result, str):
        return result
    not_run = sum(t.points for t in result.tests if t.status == "not_run")
    return f"{result.score:g}/{result.max_score:g}" + (f" ({not_run:g} not run)" if not_run else "")


def run_cell(cell: Cell, venvs: Path, kit: Path, delete: bool) -> None:
    start = time.monotonic()
    python = prepare(cell, venvs, kit)
    if python is None:
        return
    cell.public, public_ok = public_tests(python, kit)
    solutions, assignment = grade(python, kit, "solutions"), grade(python, kit, "assignment")
    cell.solutions, cell.assignment = score_text(solutions), score_text(assignment)
    cell.problems = tuple(
        ["public tests"] * (not public_ok)
        + ["reference short of full CPU marks"] * (isinstance(solutions, str) or solutions.error != ""
                                                   or any(t.status in ("failed", "error") for t in solutions.tests))
        + ["stubs score"] * (isinstance(assignment, str) or assignment.error != "" or assignment.score != 0))
    cell.status = "FAIL" if cell.problems else "ok"
    cell.seconds = time.monotonic() - start
    if delete:
        shutil.rmtree(python.parent.parent, ignore_errors=True)


def table(cells: list[Cell]) -> str:
    header = ("python", "torch", "public tests (solutions)", "grade solutions", "grade assignment", "seconds", "verdict")
    rows = [(c.python_version or str(c.python), c.torch, c.public, c.solutions, c.assignment,
             f"{c.seconds:.0f}" if c.seconds else "", c.status + (": " + ", ".join(c.problems) if c.problems else ""))
            for c in cells]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(value.ljust(w) for value, w in zip(row, widths)) + " |" for row in [header, *rows]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--python", nargs="+", required=True, help="versions (3.11) or interpreter paths")
    parser.add_argument("--torch", nargs="+", required=True, help="torch versions from the package index, e.g. 2.6.0")
    parser.add_argument("--venvs", type=Path, default=DEFAULT_VENVS, help="where the venvs live (reused if present)")
    parser.add_argument("--kit", type=Path, default=KIT_ROOT, help="the kit checkout to install and test")
    parser.add_argument("--delete", action="store_true", help="remove each venv after its cell (about 5 GB each)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not (args.kit / "pyproject.toml").is_file() or not (args.kit / "solutions").is_dir():
            raise MatrixError(f"--kit {args.kit}: not a kit checkout (no pyproject.toml and solutions/)")
        for version in args.torch:
            if not all(part.isdigit() for part in version.split(".")):
                raise MatrixError(f"--torch {version}: expected a release number such as 2.6.0")
        cells = [Cell(resolve_python(spec), version) for spec in args.python for version in args.torch]
    except MatrixError as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 2
    run = records.start("matrix", argv)
    args.venvs.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        print(f"matrix: {cell.python} + torch {cell.torch} ...", file=sys.stderr, flush=True)
        run_cell(cell, args.venvs, args.kit.resolve(), args.delete)
        print(f"matrix:   {cell.status} {cell.public} | {cell.solutions} | {cell.assignment} | {cell.seconds:.0f} s",
              file=sys.stderr, flush=True)
    print(table(cells))
    run.write("the kit on each (Python, torch) pair: public tests, the reference and the stubs graded",
              {"cells": len(cells), "ok": sum(c.status == "ok" for c in cells)},
              rows={f"{c.python_version or c.python} + torch {c.torch}": {
                  "public tests": c.public, "grade solutions": c.solutions, "grade assignment": c.assignment,
                  "verdict": c.status, "s": round(c.seconds)} for c in cells})
    if all(c.status.startswith("not installed") for c in cells):
        return 2
    return 1 if any(c.status == "FAIL" for c in cells) else 0


if __name__ == "__main__":
    sys.exit(main())
