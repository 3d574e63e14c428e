"""How well ``grader similarity`` separates copies from honest work, and what a class costs.

Separation: on the class of ``similarity_class`` (the kit's fixtures, honest, and copies of the
reference with each disguise and all of them), the lowest score and line count of a copy against
the reference, and the highest of any honest pair. Cost: ``grader similarity`` on a class of
``--size`` full submissions (the reference, disguised by a different combination of the disguises
and each with a different fixture appended, so that no two are alike and every pair matches a lot:
the worst case for the comparison and the page), timed as a command, wall clock and CPU::

    python -m grader.bench.similarity --size 200
"""

from __future__ import annotations

import argparse
import itertools
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..classroom.similarity.compare import compare
from ..classroom.similarity.documents import read_class, stubs
from ..paths import SOLUTIONS, kit_pythonpath
from . import records
from .similarity_class import DISGUISES, FIXTURES, HONEST_SETS, disguise, honest_class, planted_copies


def separation(root: Path) -> dict[str, float | int | str]:
    """How far the planted copies stand from the honest pairs: the copies' lowest score and fewest lines, the
    honest pairs' highest score and most lines."""
    honest = set(honest_class(root / "class"))
    copies = planted_copies(root / "class" / "reference", root / "class")
    documents, _ = read_class(root / "class", root / "scratch")
    pairs = compare(documents, [], stubs())
    copied = [p for p in pairs if {p.a, p.b} in ({"reference", c} for c in copies)]
    fair = [p for p in pairs if p.a in honest and p.b in honest]
    top = max(fair, key=lambda p: p.score)
    most = max(fair, key=lambda p: p.lines)
    return {"honest submissions": len(honest), "honest pairs": len(fair), "copies": len(copies),
            "copies' lowest score": round(min(p.score for p in copied), 3),
            "copies' fewest lines": min(p.lines for p in copied),
            "honest highest score": round(top.score, 3), "its lines": top.lines, "its pair": f"{top.a} / {top.b}",
            "honest most lines": most.lines, "their score": round(most.score, 3), "their pair": f"{most.a} / {most.b}"}


def large_class(root: Path, size: int) -> None:
    fixtures = [p for folder in HONEST_SETS for p in sorted((FIXTURES / folder).glob("p*_*.py"))]
    combinations = [c for n in range(len(DISGUISES) + 1) for c in itertools.combinations(DISGUISES, n)]
    modules = {p.name: p.read_text() for p in SOLUTIONS.glob("*.py")}
    for index in range(size):
        package = root / f"student{index:03d}" / "assignment"
        package.mkdir(parents=True)
        fixture = fixtures[index % len(fixtures)]
        for name, text in modules.items():
            if name == f"{fixture.stem.split('_')[1]}.py":
                text += "\n\n" + fixture.read_text()
            (package / name).write_text(disguise(text, combinations[index % len(combinations)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.similarity", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=200, help="submissions in the timed class")
    options = parser.parse_args(argv)
    run = records.start("similarity", argv)
    with tempfile.TemporaryDirectory(prefix="kit-bench-similarity-") as scratch:
        root = Path(scratch)
        separated = separation(root / "measured")
        print("; ".join(f"{name} {value}" for name, value in separated.items()))
        large_class(root / "large", options.size)
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-m", "grader", "similarity", str(root / "large"), "--out", str(root / "out")],
                       check=True, env=kit_pythonpath(), stdout=subprocess.DEVNULL)
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        pages = sum(p.stat().st_size for p in (root / "out").iterdir()) / 2**20
    print(f"grader similarity on {options.size} submissions ({options.size * (options.size - 1) // 2} pairs): "
          f"{wall:.1f} s wall, {cpu:.1f} CPU-s, {pages:.1f} MiB written; {records.cpu()['model']}")
    run.write("grader similarity: copies flagged and honest pairs not, and what a class of copies costs",
              {**separated, "class": options.size, "wall s": round(wall, 1), "CPU-s": round(cpu, 1),
               "MiB written": round(pages, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
