"""``grader selfcheck``: the kit proves itself.

1. The reference scores every point that can run here (GPU points "not run" without CUDA).
2. The stubs are current and score 0.
3. Every mutant loses points in its own problem and in no other (the kill matrix).
4. Every rule of the handout has a public test, a hidden test and a mutant both kill (``rulemap``).
5. Every hostile submission gains nothing and the grader survives it (grader.selfproof.hostile.check).
6. The student release builds and leaks nothing.

Mutants are graded on their own problem only: problems are independent (each hidden suite
calls only its own module, and no reference module imports another problem's module; both
checked statically here), so a mutant of one module cannot change another problem's result.
Graded on its own problem, a mutant's judge stops at its first failed test (a verdict is all the
matrix needs, and the rest of the suite would only cost time); ``--full`` grades every problem for
every mutant instead, in full, and shows the points lost in each.
"""

from __future__ import annotations

import ast
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import mistakes
from ..grading import judges
from ..grading.grade import grade
from ..arguments import SECTIONS
from ..paths import ASSIGNMENT, HIDDEN, KIT_ROOT, SOLUTIONS
from ..problems import MODULES, PROBLEMS, suite_file
from ..grading.results import GradingResult

console = Console()


def independence_violations(kit: Path = KIT_ROOT) -> list[str]:
    """Reasons why problems could affect each other's grades (empty when they cannot)."""
    found = []
    for key, problem in PROBLEMS.items():
        path = HIDDEN / suite_file(key)
        for node in ast.walk(ast.parse(path.read_text())) if path.is_file() else ():
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                head = node.value.split(".", 1)[0]
                if head in MODULES and head != problem.module and (node.value == head or "." in node.value) \
                        and node.value.replace(".", "").replace("_", "").isalnum():
                    found.append(f"{path.name} refers to {node.value!r} (another problem's module)")
        source = kit / "solutions" / f"{problem.module}.py"
        if source.exists():
            others = {m for m in MODULES if m != problem.module}
            for node in ast.walk(ast.parse(source.read_text())):
                if _imports_kit_module(node, others):
                    found.append(f"solutions/{problem.module}.py imports another problem's module")
    return found


def _imports_kit_module(node: ast.AST, modules: set[str]) -> bool:
    """``from .x import``, ``from . import x`` or ``import assignment.x``/``solutions.x`` for x in ``modules``."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return (node.module or "").split(".")[0] in modules or any(a.name in modules for a in node.names)
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
        [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module else []
    return any(n.split(".")[0] in ("assignment", "solutions") and set(n.split(".")[1:2]) & modules for n in names)


def _graded(result: GradingResult) -> dict[str, float]:
    return {key: p.score for key, p in result.problems().items() if p.total}


def check_reference(jobs: int) -> tuple[bool, GradingResult]:
    result = grade(SOLUTIONS, jobs=jobs, profile="ci")
    runnable = result.max_score - sum(p.not_run for p in result.problems().values())
    ok = not result.error and result.score == runnable and result.max_score == sum(p.points for p in PROBLEMS.values())
    failing = [f"{t.problem} {t.name}: {t.message}" for t in result.tests if t.status == "failed"]
    console.print(f"[{'green' if ok else 'red'}]reference[/]: {result.score:g} / {result.max_score:g} "
                  f"({result.max_score - runnable:g} points not run here) in {result.execution_time:.0f} s")
    for line in failing[:10]:
        console.print(f"  failed: {line[:300]}")
    return ok, result


def check_stubs(jobs: int) -> bool:
    from ..release.stubs import stale_stubs

    stale = stale_stubs(SOLUTIONS, ASSIGNMENT)
    result = grade(ASSIGNMENT, jobs=jobs, profile="ci")
    ok = not stale and result.score == 0 and not result.error
    console.print(f"[{'green' if ok else 'red'}]stubs[/]: {result.score:g} / {result.max_score:g}"
                  + (f"; stale: {', '.join(stale)} (run grader stubs)" if stale else "")
                  + f" in {result.execution_time:.0f} s")
    return ok


def _grade_mutant(mutant: mistakes.Mutant, full: bool) -> GradingResult:
    """The mutant graded on every problem (``full``: points lost anywhere show); else, where it names the handout
    rules it breaks, on the hidden tests of those rules alone, every one run (the rule map reads which failed),
    and otherwise on its own problem, stopped at its first failed test (a verdict is all that is asked there)."""
    with tempfile.TemporaryDirectory(prefix="kit-mutant-") as tmp:
        package = mistakes.materialize(mutant, Path(tmp))
        if full:
            return grade(package, profile="ci", diagnose=False)
        if mutant.rules:
            return grade(package, profile="ci", problems=[mutant.problem], rules=mutant.rules, diagnose=False)
        return grade(package, profile="ci", problems=[mutant.problem], first_failure=True)


def _lost(result: GradingResult, expected: dict[str, float]) -> dict[str, float]:
    """Points lost against the reference, per problem graded."""
    return {key: expected.get(key, 0) - score for key, score in _graded(result).items()}


def _verdict(mutant: mistakes.Mutant, result: GradingResult, lost: dict[str, float]) -> str:
    """"killed", "SURVIVED", "MISATTRIBUTED (...)" or "GRADER ERROR", from the points ``lost`` per problem."""
    killed = lost.get(mutant.problem, 0) > 0
    stray = [key for key, points in lost.items() if key != mutant.problem and points != 0]
    return "killed" if killed and not stray and not result.error else (
        "SURVIVED" if not killed else f"MISATTRIBUTED ({', '.join(stray)})" if stray else "GRADER ERROR")


def check_mutants(reference: GradingResult, jobs: int, full: bool,
                  only: list[str] | None) -> tuple[bool, dict[str, GradingResult]]:
    """Every chosen CPU mutant loses points in its own problem (``full``: and in no other); the gradings by id."""
    chosen = [m for m in mistakes.load() if not only or m.id in only or m.problem in only]
    catalog = [m for m in chosen if not m.gpu]  # only a GPU test can kill the others: grader selfcheck --gpu
    expected = _graded(reference)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda m: _grade_mutant(m, full), catalog))
    if full:
        table = Table(title=f"kill matrix: points lost per problem ({len(catalog)} mutants)")
        table.add_column("mutant")
        for key in PROBLEMS:
            table.add_column(key, justify="right")
    else:
        table = Table(title=f"kill matrix: the test that kills each mutant, graded on its own problem "
                            f"({len(catalog)} mutants; --full: every problem, points lost)")
        table.add_column("mutant")
        table.add_column("first failed test")
    table.add_column("verdict")
    bad = 0
    for mutant, result in zip(catalog, results):
        # graded on its rules' tests alone, the reference would have passed every one of them
        lost = _lost(result, expected if full or not mutant.rules else {mutant.problem: sum(t.points for t in result.tests)})
        verdict = _verdict(mutant, result, lost)
        bad += verdict != "killed"
        if full:
            cells = [f"-{lost[k]:g}" if lost.get(k) else "·" for k in PROBLEMS]
        else:
            cells = [next((t.name for t in result.tests if t.status == "failed"), "·")]
        table.add_row(mutant.id, *cells, f"[{'green' if verdict == 'killed' else 'red'}]{verdict}[/]")
    console.print(table)
    per_problem = {key: sum(m.problem == key for m in catalog) for key in PROBLEMS}
    console.print("mutants per problem: " + ", ".join(f"{k} {n}" for k, n in per_problem.items())
                  + f"; {len(chosen) - len(catalog)} GPU-only left to `grader selfcheck --gpu` on a GPU runner")
    return bad == 0, {m.id: result for m, result in zip(catalog, results)}


def check_rules(jobs: int, only: list[str] | None, graded: dict[str, GradingResult] | None = None) -> bool:
    """The rule map: no gap, and every CPU mutant of a rule killed by that rule's public and hidden tests
    (``only``: the rules of these problems, or these rule ids; ``graded``: the kill matrix's gradings of
    mutants on their rules' tests, not graded again)."""
    from .rulemap import RuleMap, kills

    rule_map = RuleMap.of_kit()
    gaps = rule_map.gaps(only)
    verdicts = kills(rule_map, jobs, only, graded)
    table = Table(title=f"rule map: {len(rule_map.selected(only))} rules of handout.md")
    for column in ("rule", "public", "hidden", "mutant", "status"):
        table.add_column(column, overflow="fold")
    for *cells, status in rule_map.table(verdicts, only):
        table.add_row(*cells, f"[{'green' if status in ('killed', 'mapped') or status.startswith('gpu') else 'red'}]"
                              f"{status}[/]")
    console.print(table)
    for line in gaps:
        console.print(f"[red]rules[/]: {line}")
    return not gaps and all(v == "killed" or v.startswith("gpu") for v in verdicts.values())


def check_release() -> bool:
    from ..release import ReleaseError, build

    with tempfile.TemporaryDirectory(prefix="kit-selfcheck-") as tmp:
        try:
            build(Path(tmp) / "release")
        except ReleaseError as exc:
            console.print(f"[red]release[/]: {exc}")
            return False
    console.print("[green]release[/]: built and verified (no solution body, hidden test or tool leaked)")
    return True


def print_isolation() -> None:
    """The containment a worker gets on this host, and what it lacks for ``--isolation require-strong``."""
    from ..containment.level import host

    level = host()
    lacks = "; lacks " + "; ".join(level.lacks) if level.lacks else " (strong: namespaces, syscall filter, memory limit)"
    console.print(f"isolation on this host: {level.mechanism}{lacks}")


def main(*, jobs: int = 2, full: bool = False, quick: bool = False, mutants: list[str] | None = None,
         sections: list[str] | None = None) -> int:
    """Run the proof; 0 only when every section holds."""
    wanted = sections or list(SECTIONS)
    verdicts: dict[str, bool] = {}
    print_isolation()
    if "independence" in wanted:
        violations = independence_violations()
        for line in violations:
            console.print(f"[red]independence[/]: {line}")
        verdicts["independence"] = not violations
    reference = None
    with judges.warm():  # some hundred gradings in this process: their judges fork from one warm judge
        if "reference" in wanted or "mutants" in wanted:
            verdicts["reference"], reference = check_reference(jobs)
        if "stubs" in wanted:
            verdicts["stubs"] = check_stubs(jobs)
        graded: dict[str, GradingResult] = {}
        if "mutants" in wanted and reference is not None:
            verdicts["mutants"], graded = check_mutants(reference, jobs, full, mutants)
        if "rules" in wanted:
            verdicts["rules"] = check_rules(jobs, mutants, {} if full else graded)
    if "attacks" in wanted:
        from .hostile import check as attacks

        verdicts["attacks"] = attacks.main(quick=quick) == 0
    if "release" in wanted:
        verdicts["release"] = check_release()
    console.print("selfcheck: " + ", ".join(f"{name} {'ok' if ok else 'FAILED'}" for name, ok in verdicts.items()))
    return 0 if all(verdicts.values()) else 1
