"""The rule map: every rule of handout.md has a public test, a hidden test and a mutant (checked statically here;
``test_selfcheck.py`` proves the kills), and the map's check fails when any of the three goes missing."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import mistakes
from grader.grading.grade import grade
from grader.paths import KIT_ROOT
from grader.problems import PROBLEMS
from grader.rules import reader
from grader.selfproof.rulemap import RuleMap, MarkedTest, marked_tests

HANDOUT = """# Title

## P5 · optim.py — SGD (14 points)

- **Skip parameters without a gradient.** skip it, do not touch its state. <sup>[P5.skip-none-grad]</sup>
  A second sentence, `in code`. <sup>[P5.second]</sup>

### optim.SGD

Raises:
- `ValueError`: a negative `lr`. <sup>[P5.negative-lr]</sup>
"""


@pytest.fixture(scope="module")
def kit_map() -> RuleMap:
    return RuleMap.of_kit()


def test_the_reader_gives_each_rule_its_words_and_section(tmp_path):
    path = tmp_path / "handout.md"
    path.write_text(HANDOUT)
    rules = reader().read(path)
    assert list(rules) == ["P5.skip-none-grad", "P5.second", "P5.negative-lr"]
    assert rules["P5.skip-none-grad"].text == "Skip parameters without a gradient. skip it, do not touch its state."
    assert rules["P5.second"].text == "A second sentence, in code."
    assert rules["P5.negative-lr"].section == "optim.SGD" and rules["P5.negative-lr"].text == "ValueError: a negative lr."
    assert rules["P5.second"].quote().startswith("[P5.second] A second sentence")
    path.write_text(HANDOUT + "Again. <sup>[P5.second]</sup>\n")
    with pytest.raises(ValueError, match=r"\[P5.second\] twice"):
        reader().read(path)


def test_tests_name_rules_by_marker_on_the_function_or_the_module(tmp_path):
    path = tmp_path / "test_p5_optim.py"
    path.write_text('import pytest\npytestmark = [pytest.mark.rule("P5.a")]\n\n'
                    '@pytest.mark.gpu\n@pytest.mark.rule("P5.b", "P5.c")\ndef test_x():\n    pass\n\n'
                    'def test_y():\n    pass\n\ndef helper():\n    pass\n')
    assert marked_tests(path) == [MarkedTest(path.name, "test_x", ("P5.a", "P5.b", "P5.c"), gpu=True),
                              MarkedTest(path.name, "test_y", ("P5.a",))]


def test_every_rule_of_the_handout_has_a_public_test_a_hidden_test_and_a_mutant(kit_map):
    assert not kit_map.gaps(), "\n".join(kit_map.gaps())
    assert {rule.split(".")[0] for rule in kit_map.rules} == {*PROBLEMS, "ALL"}, (
        "a problem states no rule, or the rules that hold for every problem have no id")


def test_a_rule_whose_tests_or_mutant_are_removed_fails_the_map(kit_map):
    """The map's own mutants: one rule's public tests, hidden tests or mutants taken away, or an id nobody
    defines, each gives a gap line naming it."""
    rule = next(iter(kit_map.rules))
    without = {side: dataclasses.replace(kit_map, **{side: [t for t in getattr(kit_map, side) if rule not in t.rules]})
               for side in ("public", "hidden", "mutants")}
    assert any(f"[{rule}] has no public test" in line for line in without["public"].gaps())
    assert any(f"[{rule}] has no hidden test" in line for line in without["hidden"].gaps())
    assert any(f"[{rule}] has no mutant" in line for line in without["mutants"].gaps())
    stray = dataclasses.replace(kit_map, public=[*kit_map.public, MarkedTest("test_p1_memory.py", "test_z", ("P1.nowhere",))])
    assert "tests/test_p1_memory.py::test_z names [P1.nowhere], which handout.md does not define" in stray.gaps()


def _refusing_none_grads(dest: Path) -> Path:
    """The reference with SGD raising on a parameter whose .grad is None (breaks [P5.skip-none-grad])."""
    mutant = next(m for m in mistakes.load() if m.id == "p5-sgd-none-grad-as-zero")
    broken = dataclasses.replace(mutant, replace=mutant.find.replace("continue", "raise ValueError('no grad')"))
    return mistakes.materialize(broken, dest)


def test_a_failure_quotes_the_rule_it_checks_in_the_public_run_and_in_the_grade(tmp_path):
    package = _refusing_none_grads(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "--impl", str(package), "--rule", "P5.skip-none-grad",
                          "-q", "-p", "no:cacheprovider"], cwd=KIT_ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "rule:     [P5.skip-none-grad] Skip parameters without a gradient." in run.stdout, run.stdout[-3000:]
    assert " deselected" in run.stdout  # --rule ran that rule's tests alone
    result = grade(package, profile="ci", problems=["P5"], rules=("P5.skip-none-grad",), diagnose=False)
    failed = [t for t in result.tests if t.status == "failed"]
    assert failed and all("rule: [P5.skip-none-grad] Skip parameters without a gradient." in t.message for t in failed)
    assert {t.nodeid.split("::")[-1].split("[")[0] for t in result.tests} == {"test_params_without_grad_are_skipped"}
