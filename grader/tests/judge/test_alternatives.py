"""Correct implementations written differently score what the reference scores on the hidden suites.

Each ``fixtures/alternatives/p<N>_<module>.py`` redefines a few tricky functions or classes of
its problem in another way; appended to a copy of the reference module it replaces the
reference's definitions, and the result must score every point that runs here (GPU tests
without CUDA are not run), as the reference does (``grader selfcheck``). A hidden test that such
a submission fails tests the reference's style, not the contract. Each ``p<N>_<module>_lenient.py`` does the same with value checks only:
no type checks, plain arithmetic on whatever it is given (wrong types are not graded); another
``p<N>_<module>_<name>.py`` is one more way again (P7's: a checkpoint layout of its own). Each
``p<N>_<module>_module.py`` is a whole module written from the handout and the stub alone, without
reading the reference: it replaces the reference's module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.grading import judges
from grader.grading.grade import grade
from grader.paths import KIT_ROOT
from grader.problems import PROBLEMS
from grader.submission import stage

pytestmark = pytest.mark.slow

ALTERNATIVES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "alternatives").glob("p*_*.py"))
WHOLE = "_module"  # the stem's end of a whole module


@pytest.fixture(scope="module", autouse=True)
def warm():
    """Twenty gradings: their judges fork from one warm judge (what is graded is the same either way)."""
    with judges.warm():
        yield


def _defined(source: str) -> set[str]:
    return {node.name for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=lambda path: path.stem)
def test_a_second_correct_implementation_scores_full_marks(alternative: Path, tmp_path: Path):
    problem = alternative.stem.split("_", 1)[0]
    module = PROBLEMS[problem.upper()].module
    assert alternative.stem == f"{problem}_{module}" or alternative.stem.startswith(f"{problem}_{module}_"), alternative.name
    package = stage(KIT_ROOT / "solutions", tmp_path / "submission")
    target = package / f"{module}.py"
    if alternative.stem.endswith(WHOLE):
        target.write_text(alternative.read_text())
    else:
        replaced = _defined(alternative.read_text())
        assert replaced and replaced <= _defined(target.read_text()), "an alternative redefines reference definitions"
        target.write_text(target.read_text() + "\n\n" + alternative.read_text())
    result = grade(package, problems=[problem.upper()], profile="ci")
    failed = [f"{t.name}: {t.message[:300]}" for t in result.tests if t.status not in ("passed", "not_run")]
    assert not result.error and result.score == sum(t.points for t in result.tests if t.status != "not_run"), (
        "\n".join(failed) or result.error)  # full marks on every test run here, as the reference gets
