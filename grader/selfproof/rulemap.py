"""The rule map: every rule of the handout has a public test, a hidden test and a mutant that both kill.

Rules and their ids come from ``handout.md`` (``tests/_rules.py`` reads them); a test names the rules it checks
with ``@pytest.mark.rule("P5.skip-none-grad")`` (public tests in ``tests/``, hidden ones in
``grader/judge/hidden/``), read here from the source without importing it; a mutant of the catalog names the
rules it breaks (``rules = [...]`` in ``grader/mistakes/p*.toml``). ``gaps`` is the static half (a rule without a
public test, a hidden test or a mutant; an id nobody defines); ``kills`` is the dynamic half: each mutant run
against the public tests of each rule it names (``pytest tests --rule ID``) and graded on the hidden tests of
that rule alone (``GradingOptions.rules``). A rule only a GPU can observe has GPU tests and a ``gpu`` mutant,
proved by ``grader selfcheck --gpu`` on a GPU runner.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import mistakes
from ..grading.grade import grade
from ..paths import HIDDEN, KIT_ROOT, SOLUTIONS
from ..rules import handout_rules, reader

PUBLIC = KIT_ROOT / "tests"


@dataclass(frozen=True)
class Test:
    """A test function that names rules: its file, name, rule ids, and whether it needs a GPU."""

    file: str
    name: str
    rules: tuple[str, ...]
    gpu: bool = False


def _marks(decorators: list[ast.expr], mark: str) -> list[ast.Call]:
    """The ``pytest.mark.<mark>(...)`` calls among ``decorators`` (or a ``pytestmark`` value's items)."""
    found = []
    for node in decorators:
        call = node if isinstance(node, ast.Call) else None
        target = call.func if call else node
        if isinstance(target, ast.Attribute) and target.attr == mark:
            found.append(call or ast.Call(func=target, args=[], keywords=[]))
    return found


def _ids(calls: list[ast.Call]) -> tuple[str, ...]:
    return tuple(a.value for call in calls for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))


def tests_in(path: Path, text: str | None = None) -> list[Test]:
    """The test functions of one file that name rules (module-level ``pytestmark`` included)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    module_marks: list[ast.expr] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module_marks = list(node.value.elts) if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            marks = [*module_marks, *node.decorator_list]
            ids = _ids(_marks(marks, "rule"))
            if ids:
                found.append(Test(path.name, node.name, ids, gpu=bool(_marks(marks, "gpu"))))
    return found


@dataclass
class RuleMap:
    """Who checks and who breaks each rule."""

    rules: dict  # id -> tests/_rules.Rule, in the handout's order
    public: list[Test]
    hidden: list[Test]
    mutants: list[mistakes.Mutant]
    documented: dict[str, list[str]] = field(default_factory=dict)  # id -> where else it is named (docstrings)

    @classmethod
    def of_kit(cls) -> RuleMap:
        return cls(rules=handout_rules(), public=[t for p in sorted(PUBLIC.glob("test_p*.py")) for t in tests_in(p)],
                   hidden=[t for p in sorted(HIDDEN.glob("test_p*.py")) for t in tests_in(p)],
                   mutants=mistakes.load(), documented=named_in_solutions())

    def selected(self, only: list[str] | None = None) -> list[str]:
        """The rule ids of the problems or ids in ``only`` (all where None), in the handout's order."""
        return [r for r in self.rules if not only or r in only or r.split(".", 1)[0] in only]

    def checking(self, tests: list[Test], rule: str) -> list[Test]:
        return [t for t in tests if rule in t.rules]

    def breaking(self, rule: str) -> list[mistakes.Mutant]:
        return [m for m in self.mutants if rule in m.rules]

    def gaps(self, only: list[str] | None = None) -> list[str]:
        """What the map lacks, one line each: empty when every rule is checked twice and proved by a mutant."""
        lines = []
        for rule in self.selected(only):
            hidden = self.checking(self.hidden, rule)
            if not self.checking(self.public, rule):
                lines.append(f"[{rule}] has no public test (@pytest.mark.rule({rule!r}) in tests/)")
            if not hidden:
                lines.append(f"[{rule}] has no hidden test (@pytest.mark.rule({rule!r}) in grader/judge/hidden/)")
            if not self.breaking(rule):
                lines.append(f"[{rule}] has no mutant (rules = [{rule!r}] in grader/mistakes/)")
            elif hidden and all(t.gpu for t in hidden) and not all(m.gpu for m in self.breaking(rule)):
                lines.append(f"[{rule}] is checked by GPU tests alone: its mutants must be marked gpu = true")
        named = [(f"tests/{t.file}::{t.name}", t.rules) for t in self.public]
        named += [(f"grader/judge/hidden/{t.file}::{t.name}", t.rules) for t in self.hidden]
        named += [(f"mutant {m.id}", m.rules) for m in self.mutants]
        named += [(where, (rule,)) for rule, places in self.documented.items() for where in places]
        for where, ids in named:
            lines += [f"{where} names [{i}], which handout.md does not define" for i in ids
                      if i not in self.rules and (not only or i.split(".", 1)[0] in only)]
        return lines

    def table(self, verdicts: dict[str, str] | None = None,
              only: list[str] | None = None) -> list[tuple[str, str, str, str, str]]:
        """(rule, public tests, hidden tests, mutants, status) per rule, in the handout's order."""
        rows = []
        for rule in self.selected(only):
            public, hidden = self.checking(self.public, rule), self.checking(self.hidden, rule)
            broken = self.breaking(rule)
            missing = [what for what, have in (("public", public), ("hidden", hidden), ("mutant", broken)) if not have]
            status = f"missing {', '.join(missing)}" if missing else (verdicts or {}).get(rule, "mapped")
            rows.append((rule, ", ".join(t.name for t in public), ", ".join(
                t.name + (" (gpu)" if t.gpu else "") for t in hidden), ", ".join(m.id for m in broken), status))
        return rows


def named_in_solutions(solutions: Path = SOLUTIONS) -> dict[str, list[str]]:
    """The rule ids the reference's docstrings and comments name (the stubs keep them), by id: where."""
    found: dict[str, list[str]] = {}
    for path in sorted(solutions.glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for rule in reader().ids_in(line):
                found.setdefault(rule, []).append(f"solutions/{path.name}:{number}")
    return found


def public_kills(mutant: mistakes.Mutant, rule: str, package: Path) -> bool:
    """Whether the public tests of ``rule`` fail on ``package`` (the mutant's submission)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "--impl", str(package), "--rule", rule, "-q",
                          "-p", "no:cacheprovider", "-x"], cwd=KIT_ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    return run.returncode == 1


def hidden_kills(rule: str, package: Path) -> bool:
    """Whether a hidden test of ``rule`` fails on ``package``, graded on those tests alone."""
    problem = rule.split(".", 1)[0]
    result = grade(package, profile="ci", problems=[problem], rules=(rule,), first_failure=True, diagnose=False)
    return not result.error and any(t.status == "failed" for t in result.tests)


def kills(rule_map: RuleMap, jobs: int = 2, only: list[str] | None = None) -> dict[str, str]:
    """Per rule with CPU mutants: "killed", or which side let which mutant through."""
    pairs = [(rule, m) for rule in rule_map.selected(only) for m in rule_map.breaking(rule) if not m.gpu]

    def verdict(pair: tuple[str, mistakes.Mutant]) -> tuple[str, str]:
        rule, mutant = pair
        with tempfile.TemporaryDirectory(prefix="kit-rule-") as tmp:
            package = mistakes.materialize(mutant, Path(tmp))
            missed = [side for side, killed in (("public", public_kills(mutant, rule, package)),
                                                ("hidden", hidden_kills(rule, package))) if not killed]
        return rule, f"{mutant.id} survives the {' and '.join(missed)} tests" if missed else "killed"

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        found = list(pool.map(verdict, pairs))
    verdicts: dict[str, str] = {}
    for rule, said in found:
        verdicts[rule] = said if said != "killed" or rule not in verdicts else verdicts[rule]
    gpu_only = {rule for rule in rule_map.rules if rule_map.breaking(rule) and all(m.gpu for m in rule_map.breaking(rule))}
    return {**verdicts, **{rule: "gpu (grader selfcheck --gpu)" for rule in gpu_only}}
