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
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import mistakes
from ..grading.grade import grade
from ..grading.results import GradingResult
from ..paths import HIDDEN, KIT_ROOT, SOLUTIONS
from ..rules import handout_rules, reader

PUBLIC = KIT_ROOT / "tests"


@dataclass(frozen=True)
class MarkedTest:
    """A test function that names rules: its file, name, rule ids, and whether it needs a GPU."""

    file: str
    name: str
    rules: tuple[str, ...]
    gpu: bool = False


def marks(decorators: list[ast.expr], mark: str) -> list[ast.Call]:
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


def test_marks(path: Path, text: str | None = None) -> list[tuple[str, list[ast.expr]]]:
    """Each test function of one file, by name, with the marks it carries (module-level ``pytestmark`` first)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    module_marks: list[ast.expr] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module_marks = list(node.value.elts) if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
    return [(node.name, [*module_marks, *node.decorator_list]) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")]


def marked_tests(path: Path, text: str | None = None) -> list[MarkedTest]:
    """The test functions of one file that name rules (module-level ``pytestmark`` included)."""
    return [MarkedTest(path.name, name, ids, gpu=bool(marks(decorators, "gpu")))
            for name, decorators in test_marks(path, text) if (ids := _ids(marks(decorators, "rule")))]


@dataclass
class RuleMap:
    """Who checks and who breaks each rule."""

    rules: dict  # id -> tests/_rules.Rule, in the handout's order
    public: list[MarkedTest]
    hidden: list[MarkedTest]
    mutants: list[mistakes.Mutant]
    documented: dict[str, list[str]] = field(default_factory=dict)  # id -> where else it is named (docstrings)

    @classmethod
    def of_kit(cls) -> RuleMap:
        return cls(rules=handout_rules(), public=[t for p in sorted(PUBLIC.glob("test_p*.py")) for t in marked_tests(p)],
                   hidden=[t for p in sorted(HIDDEN.glob("test_p*.py")) for t in marked_tests(p)],
                   mutants=mistakes.load(), documented=named_in_solutions())

    def selected(self, only: list[str] | None = None) -> list[str]:
        """The rule ids of the problems or ids in ``only`` (all where None), in the handout's order."""
        return [r for r in self.rules if not only or r in only or r.split(".", 1)[0] in only]

    def checking(self, tests: list[MarkedTest], rule: str) -> list[MarkedTest]:
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


def _functions(nodeids: list[str]) -> set[tuple[str, str]]:
    """(file name, test function) of each node id: ``tests/test_p5_optim.py::test_x[sgd]`` -> (test_p5_optim.py, test_x)."""
    return {(Path(n.split("::")[0]).name, n.split("::")[-1].split("[")[0]) for n in nodeids}


def public_failures(packages: dict[str, Path], rules: dict[str, tuple[str, ...]], jobs: int) -> dict[str, set]:
    """Per mutant id: the public tests of its ``rules`` that fail on its package, as (file, function)."""
    ids = list(packages)
    runs = "".join(json.dumps({"package": str(packages[i]), "rules": list(rules[i])}) + "\n" for i in ids)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    done = subprocess.run([sys.executable, "-m", "grader.selfproof.public_runs", str(jobs)], input=runs, cwd=KIT_ROOT,
                          env=env, capture_output=True, text=True, timeout=3600, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    return {i: _functions(answer["failed"]) for i, answer in zip(ids, answers)}


def _failures(result: GradingResult) -> set | None:
    """The tests that failed in ``result``, as (file, function); None when grading failed."""
    return None if result.error else _functions([t.nodeid for t in result.tests if t.status == "failed"])


def hidden_failures(mutant: mistakes.Mutant, rules: tuple[str, ...], package: Path) -> set | None:
    """The hidden tests of ``rules`` that fail on ``package``, as (file, function); None when grading failed."""
    return _failures(grade(package, profile="ci", problems=[mutant.problem], rules=rules, diagnose=False))


def kills(rule_map: RuleMap, jobs: int = 2, only: list[str] | None = None,
          graded: dict[str, GradingResult] | None = None) -> dict[str, str]:
    """Per rule with CPU mutants: "killed" when each of its mutants fails a public and a hidden test of that rule,
    else which mutant survives which side; rules whose mutants are all GPU mutants: "gpu". ``graded``: gradings
    of mutants on their rules' hidden tests already made (the kill matrix's), by mutant id."""
    selected = rule_map.selected(only)
    broken = {m.id: (m, tuple(r for r in m.rules if r in selected)) for m in rule_map.mutants if not m.gpu}
    broken = {i: pair for i, pair in broken.items() if pair[1]}
    with tempfile.TemporaryDirectory(prefix="kit-rules-") as tmp:
        packages = {i: mistakes.materialize(m, Path(tmp) / i) for i, (m, _) in broken.items()}
        public = public_failures(packages, {i: rules for i, (_, rules) in broken.items()}, jobs)
        known = {i: _failures(graded[i]) for i in broken if graded and i in graded and broken[i][1] == broken[i][0].rules}
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            hidden = dict(zip(broken, pool.map(
                lambda i: known[i] if i in known else hidden_failures(*broken[i], packages[i]), broken)))
    verdicts: dict[str, str] = {}
    for i, (mutant, rules) in broken.items():
        for rule in rules:
            missed = [side for side, tests, failed in (("public", rule_map.public, public[i]),
                                                       ("hidden", rule_map.hidden, hidden[i]))
                      if failed is None or not {(t.file, t.name) for t in rule_map.checking(tests, rule)} & failed]
            if missed:
                verdicts[rule] = f"{i} survives the {' and '.join(missed)} tests"
            verdicts.setdefault(rule, "killed")
    gpu = {rule: "gpu (grader selfcheck --gpu)" for rule in selected
           if rule_map.breaking(rule) and all(m.gpu for m in rule_map.breaking(rule))}
    return {**verdicts, **gpu}
