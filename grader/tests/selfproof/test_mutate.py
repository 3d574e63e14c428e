"""``grader mutate``: scope of mutation, identities, the equivalent list, the verdicts (hidden and public), a seeded
sample of each."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="cosmic-ray comes with the dev extra")

from grader import mistakes  # noqa: E402
from grader.grading.grade import grade  # noqa: E402
from grader.judge.plugin import STOPPED  # noqa: E402
from grader.selfproof.mutation import equivalent, mutate  # noqa: E402
from grader.selfproof.mutation.regions import Eligibility, Identity, identities  # noqa: E402
from grader.selfproof.mutation.verdict import KILLED, SURVIVED, public_verdict, verdict  # noqa: E402

SOURCE = '''def f(x):
    """Doc 1 + 2."""
    # BEGIN SOLUTION
    if x < 0:
        raise ValueError(f"x is {x + 1}, expected >= 0")
    return x * 2 + 1
    # END SOLUTION
y = 3 * 4
# BEGIN SOLUTION
def g(a: int | None) -> list[int] | None:
    n: int | str = a or 0
    return [n | 1]
# END SOLUTION
'''


def test_only_solution_code_outside_strings_and_annotations_is_in_scope():
    eligible = Eligibility(SOURCE)
    assert eligible((4, 9), (4, 10))  # the comparison
    assert eligible((6, 13), (6, 14))  # the multiplication
    assert not eligible((5, 34), (5, 35))  # inside the error message's f-string
    assert not eligible((2, 12), (2, 13))  # the docstring
    assert not eligible((8, 6), (8, 7))  # after END SOLUTION
    assert not eligible((10, 13), (10, 14))  # an argument's annotation
    assert not eligible((10, 34), (10, 35))  # the return annotation
    assert not eligible((11, 11), (11, 12))  # a variable's annotation
    assert eligible((11, 21), (11, 23))  # ... but not its value
    assert eligible((12, 14), (12, 15))


def test_identities_name_the_line_and_count_equal_ones():
    found = identities("m", SOURCE, [("core/NumberReplacer", (6, 15)), ("core/NumberReplacer", (6, 15)),
                                     ("core/NumberReplacer", (6, 19))])
    assert found == [Identity("m", "core/NumberReplacer", "return x * 2 + 1", i) for i in range(3)]


def test_equivalent_list_entries_need_a_reason(tmp_path: Path):
    listed = tmp_path / "equivalent.toml"
    listed.write_text('[[equivalent]]\nmodule = "m"\noperator = "core/AddNot"\nline = "if x:"\nreason = " "\n')
    with pytest.raises(equivalent.EquivalentListError, match="lacks reason"):
        equivalent.load(listed)


def test_the_kits_equivalent_list_loads():
    assert all(reason for reason in equivalent.load().values())


@pytest.mark.slow
def test_verdict_kills_a_mutant_that_loses_points_and_spares_the_reference():
    reference = grade("solutions", problems=["P4"], profile="ci").score  # GPU points not run here are not expected
    mutant = next(m for m in mistakes.load() if m.problem == "P4")
    with tempfile.TemporaryDirectory() as tmp:
        package = mistakes.materialize(mutant, Path(tmp))
        status, line = verdict(str(package.parent), "P4", reference)
    assert status == KILLED, line
    assert verdict("solutions", "P4", reference)[0] == SURVIVED


def test_first_failure_stops_the_judge_and_judges_the_rest_not_run():
    """What a verdict grades with: the tests after the first failure are "not run", and the grade
    is complete (not a judge that stopped abnormally, which would fail closed)."""
    mutant = next(m for m in mistakes.load() if m.problem == "P1")
    with tempfile.TemporaryDirectory() as tmp:
        package = mistakes.materialize(mutant, Path(tmp))
        result = grade(package.parent, problems=["P1"], profile="verdict", first_failure=True)
    statuses = [t.status for t in result.tests]
    first = statuses.index("failed")
    assert not result.error and set(statuses[:first]) == {"passed"} and statuses[first + 1:]
    assert {(t.status, t.message) for t in result.tests[first + 1:]} == {("not_run", STOPPED)}


@pytest.mark.slow
@pytest.mark.parametrize("problems, sample", [(["P1", "P2", "P3", "P4"], 5), (["P5", "P6", "P7", "P8"], 2)])
def test_a_seeded_sample_leaves_no_unlisted_survivor(tmp_path: Path, problems: list[str], sample: int):
    found = mutate(problems, work=tmp_path, sample=sample, seed=0, jobs=2)
    assert len(found) == sample * len(problems)
    bad = [f"{o.problem} {o.identity} ({o.status}): {o.detail}\n{o.diff}" for o in found
           if o.status not in ("killed", "equivalent")]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_public_verdict_kills_a_mutant_its_public_tests_catch_and_spares_the_reference():
    mutant = next(m for m in mistakes.load() if m.problem == "P3")
    with tempfile.TemporaryDirectory() as tmp:
        package = mistakes.materialize(mutant, Path(tmp))
        status, line = public_verdict(str(package.parent), "P3")
    assert status == KILLED and "tests/test_p3_einsum.py::" in line, line
    assert public_verdict("solutions", "P3")[0] == SURVIVED


@pytest.mark.slow
def test_a_public_session_keeps_its_own_folder_and_names_the_public_test_that_failed(tmp_path: Path):
    found = mutate(["P3"], work=tmp_path, sample=2, seed=0, suite="public")
    assert len(found) == 2 and {o.status for o in found} <= {"killed", "survived", "equivalent"}
    assert all("tests/test_p3_einsum.py::" in o.detail for o in found if o.status == "killed")
    assert [p.name for p in tmp_path.iterdir()] == ["public"]
