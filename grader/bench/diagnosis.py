"""How well diagnosis by behaviour names mistakes it was not built from.

Grades, on the hidden suites and in the sandbox, each mistaken submission of
``grader/tests/fixtures/mistakes/`` (a misconception of the catalog written the way a student
would, independently of the mutant's edit: one file per mistake, its first line ``# mistake:
<mutant id>``, appended to a copy of the reference as the alternatives are; ``--mistakes
blind_mistakes``: the set written by authors who read the misconceptions' sentences and the
handout, never the catalog's code nor the diagnosis), then the reference
and the correct alternatives of ``grader/tests/fixtures/alternatives/``. Per problem it prints the
share of mistaken submissions whose failed tests name their own mistake (and no other), the share
named a wrong mistake on some test, the share with nothing known, and how many correct
submissions were named any mistake (the target: none)::

    python -m grader.bench.diagnosis
    python -m grader.bench.diagnosis --problems P1 P4 --profile grading --jobs 4
    python -m grader.bench.diagnosis --problems P5 P7 P8 --mistakes blind_mistakes
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grader.bench import records
from grader.grading.grade import grade
from grader.paths import KIT_ROOT
from grader.problems import PROBLEMS
from grader.submission import stage

FIXTURES = KIT_ROOT / "grader" / "tests" / "fixtures"
MISTAKE = re.compile(r"# mistake: (\S+)")
MISTAKE_SETS = ("mistakes", "blind_mistakes")  # folders of FIXTURES


@dataclass(frozen=True)
class Case:
    path: Path
    problem: str
    module: str
    mistake: str  # "" for a correct submission


def cases(problems: list[str], mistakes: str = "mistakes") -> list[Case]:
    """The mistaken submissions (of the set ``mistakes``) and the correct alternatives of ``problems``."""
    found = []
    for folder in (mistakes, "alternatives"):
        for path in sorted((FIXTURES / folder).glob("p*_*.py")):
            number, module = path.stem.split("_")[:2]
            match = MISTAKE.match(path.read_text())
            if number.upper() in problems:
                found.append(Case(path, number.upper(), module, match.group(1) if match else ""))
    return found


def named(package: Path, problem: str, profile: str) -> tuple[set[str], list[tuple[str, ...]]]:
    """Grade ``package`` on ``problem``: the names of its failed tests, and the mistakes each named."""
    result = grade(package, problems=[problem], profile=profile, gpu="off")
    failed = [t for t in result.tests if t.status == "failed"]
    return {t.name for t in failed}, [tuple(t.mistakes) for t in failed if t.mistakes]


def judged(case: Case, scratch: Path, profile: str) -> tuple[set[str], list[tuple[str, ...]]]:
    """Grade ``case``: the reference itself, or the reference with the case's file appended to its module."""
    if not case.module:
        return named(case.path, case.problem, profile)
    package = stage(KIT_ROOT / "solutions", scratch)
    target = package / f"{case.module}.py"
    target.write_text(target.read_text() + "\n\n" + case.path.read_text())
    return named(package, case.problem, profile)


def verdict(mistake: str, diagnoses: list[tuple[str, ...]]) -> str:
    """"own", "wrong" (some test named a set without the mistake) or "nothing" (no test named any)."""
    if any(mistake not in ids for ids in diagnoses):
        return "wrong"
    return "own" if diagnoses else "nothing"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.diagnosis", description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--profile", default="ci", help="hypothesis profile of the hidden suites (default: ci)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    parser.add_argument("--mistakes", default="mistakes", choices=MISTAKE_SETS,
                        help="the set of mistaken submissions (a folder of grader/tests/fixtures)")
    options = parser.parse_args(argv)
    run = records.start("diagnosis", argv)
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    everything = [Case(KIT_ROOT / "solutions", p, "", "") for p in options.problems] + cases(options.problems, options.mistakes)
    with tempfile.TemporaryDirectory(prefix="kit-diagnosis-") as scratch, ThreadPoolExecutor(options.jobs) as pool:
        graded = pool.map(lambda item: judged(item[1], Path(scratch) / str(item[0]), options.profile),
                          enumerate(everything))
        for case, (failed, diagnoses) in zip(everything, graded):
            if case.mistake:
                kind = verdict(case.mistake, diagnoses) if failed else "not caught"
                tally[case.problem][kind] += 1
            else:
                kind = "named " + str(diagnoses) if diagnoses else "nothing named"
                tally[case.problem]["correct"] += 1
                tally[case.problem]["correct named"] += bool(diagnoses)
            print(f"{case.problem} {case.path.name} ({case.mistake or 'correct'}): {kind} "
                  f"{sorted({m for ids in diagnoses for m in ids})}", flush=True)
    print("\n| problem | mistaken | own mistake | wrong mistake | nothing known | not caught | correct named |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    overall: dict[str, int] = defaultdict(int)
    for problem in options.problems:
        for key, count in tally[problem].items():
            overall[key] += count
    rows = {}
    for problem, n in [*((p, tally[p]) for p in options.problems), *([("all", overall)] if len(options.problems) > 1 else [])]:
        total = sum(n[k] for k in ("own", "wrong", "nothing", "not caught"))
        share = {k: f"{100 * n[k] / total:.0f}%" if total else "-" for k in ("own", "wrong", "nothing", "not caught")}
        print(f"| {problem} | {total} | {share['own']} | {share['wrong']} | {share['nothing']} | {share['not caught']} "
              f"| {n['correct named']} of {n['correct']} |")
        rows[problem] = {"mistaken": total, **share, "correct named": f"{n['correct named']} of {n['correct']}"}
    run.write(f"diagnosis names the mistakes of {options.mistakes} ({options.profile} profile)",
              rows[problem], rows=rows)


if __name__ == "__main__":
    main()
