"""``grader selfcheck --gpu``: accept a GPU runner before term, with one command.

On the runner it grades, with ``--gpu require``: the reference (it must score every point, every
GPU test run), the stubs (0), and each GPU-only curated mutant (``gpu = true`` in
``grader/mistakes/``) on its own problem (each must lose points there). It prints one table: the
versions of torch, its CUDA and the driver, the device, then every GPU test with its outcome and
time, then the verdicts. Without CUDA it refuses at once (exit 2) and says why; the grading
process itself never imports torch (a subprocess asks torch for the versions).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import mistakes
from ..grading.grade import grade
from ..paths import ASSIGNMENT, SOLUTIONS
from ..grading.results import GradingResult, write_json_atomic

VERSIONS = """import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda or "none (a CPU build)", "available": cuda,
                  "device": torch.cuda.get_device_name(0) if cuda else "none",
                  "devices": torch.cuda.device_count() if cuda else 0}))"""


@dataclass(frozen=True)
class Verdict:
    """One line of the acceptance: what was checked, whether it held, and what was seen."""

    check: str
    ok: bool
    seen: str


def versions(python: str = sys.executable) -> dict:
    """torch's version, its CUDA, the device and the NVIDIA driver, asked of a fresh interpreter."""
    done = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"could not import torch: {done.stderr.strip()[-300:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["driver"] = _driver()
    return found


def _driver() -> str:
    if not shutil.which("nvidia-smi"):
        return "unknown (no nvidia-smi)"
    done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown"


def refusal(found: dict) -> str | None:
    """Why this machine cannot accept itself as a GPU runner (None when it can)."""
    if found["available"]:
        return None
    return (f"no CUDA device is available here (torch {found['torch']}, CUDA {found['cuda']}, driver "
            f"{found['driver']}): run `grader selfcheck --gpu` on the GPU runner itself")


def verdicts(reference: GradingResult, stubs: GradingResult,
             mutants: list[tuple[mistakes.Mutant, GradingResult]]) -> list[Verdict]:
    """The acceptance, a pure function of the gradings."""
    gpu_tests = [t for t in reference.tests if t.gpu]
    not_run = [t.name for t in gpu_tests if t.status == "not_run"]
    elsewhere = reference.not_measurable_here()
    runnable = reference.max_score - sum(t.points for t in elsewhere)
    lines = [
        Verdict("reference at full marks", not reference.error and reference.score == runnable,
                f"{reference.score:g} / {reference.max_score:g}"
                + "".join(f"; not graded here: {t.name} ({t.message})" for t in elsewhere)
                + (f"; error: {reference.error}" if reference.error else "")),
        Verdict("every GPU test run", bool(gpu_tests) and not not_run,
                f"{len(gpu_tests)} GPU tests" + (f"; not run: {', '.join(not_run)}" if not_run else "")),
        Verdict("stubs at 0", not stubs.error and stubs.score == 0, f"{stubs.score:g} / {stubs.max_score:g}"),
    ]
    expected = {key: p.score for key, p in reference.problems().items()}
    for mutant, result in mutants:
        got = result.problems().get(mutant.problem)
        lost = expected.get(mutant.problem, 0) - (got.score if got else 0)
        lines.append(Verdict(f"mutant {mutant.id} killed", not result.error and lost > 0,
                             f"-{lost:g} in {mutant.problem}" if lost > 0 else f"no point lost in {mutant.problem}"))
    return lines


def table(found: dict, reference: GradingResult, lines: list[Verdict]) -> Table:
    """Versions, the GPU tests' outcomes and times, and the verdicts, as one table."""
    out = Table(title=f"GPU runner acceptance: torch {found['torch']}, CUDA {found['cuda']}, driver "
                      f"{found['driver']}, {found['device']} (x{found['devices']})")
    out.add_column("check")
    out.add_column("result")
    out.add_column("seen")
    for test in (t for t in reference.tests if t.gpu):
        out.add_row(f"{test.problem} {test.name}", test.status, f"{test.duration:.1f} s")
    for line in lines:
        out.add_row(line.check, "[green]ok[/]" if line.ok else "[red]FAILED[/]", line.seen)
    return out


def _grade_mutant(mutant: mistakes.Mutant, jobs: int) -> GradingResult:
    with tempfile.TemporaryDirectory(prefix="kit-gpu-mutant-") as tmp:
        package = mistakes.materialize(mutant, Path(tmp))
        return grade(package, gpu="require", profile="ci", problems=[mutant.problem], jobs=jobs, diagnose=False)


def main(*, jobs: int = 2, out: Path | None = None) -> int:
    """0 when this machine is accepted as a GPU runner, 1 when a check failed, 2 without CUDA; with
    ``out``, the reference's and the stubs' results.json are kept there (``solutions.json``,
    ``assignment.json``) beside the table (``acceptance.txt``)."""
    console = Console()
    found = versions()
    why = refusal(found)
    if why:
        console.print(f"[red]grader selfcheck --gpu[/]: {why}")
        return 2
    reference = grade(SOLUTIONS, gpu="require", profile="ci", jobs=jobs)
    stubs = grade(ASSIGNMENT, gpu="require", profile="ci", jobs=jobs)
    graded = [(m, _grade_mutant(m, jobs)) for m in mistakes.load() if m.gpu]
    lines = verdicts(reference, stubs, graded)
    console.print(table(found, reference, lines))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "solutions.json", reference.to_gradescope_dict())
        write_json_atomic(out / "assignment.json", stubs.to_gradescope_dict())
        recorder = Console(file=(out / "acceptance.txt").open("w"), width=200)
        recorder.print(table(found, reference, lines))
    return 0 if all(line.ok for line in lines) else 1
