"""End to end: a mistaken submission graded in the sandbox gets its known mistake named in
results.json (message and extra_data) and in ``grader show``; the reference gets none. P7's and P8's, named by
the probe the judge runs after the suite, reach every failed test of their problem the same way."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.classroom import show
from grader.grading.grade import main
from grader.options import GradingOptions
from grader.paths import KIT_ROOT
from grader.submission import stage
from grader.tests.grading.test_results import validate

pytestmark = pytest.mark.slow

MISTAKES = KIT_ROOT / "grader" / "tests" / "fixtures" / "mistakes"
MISTAKE = MISTAKES / "p4_flops_multiply_adds.py"


def graded(submission: Path, out: Path, problem: str = "P4", diagnose: bool = True) -> dict:
    options = GradingOptions(gpu="off", problems=(problem,), profile="ci", diagnose=diagnose)
    assert main(str(submission), out=out, options=options) == 0
    data = json.loads(out.read_text())
    assert validate(data) == []
    return data


def test_a_mistaken_submission_is_told_its_known_mistake_and_the_reference_is_not(tmp_path, capsys):
    package = stage(KIT_ROOT / "solutions", tmp_path / "submission")
    target = package / "flops.py"
    target.write_text(target.read_text() + "\n\n" + MISTAKE.read_text())
    with ThreadPoolExecutor(max_workers=2) as pool:  # P4's paused calls leave a core idle: two at a time
        data, reference, verdicts_alone = pool.map(lambda args: graded(*args), [
            (package, tmp_path / "out" / "alice.json"), (KIT_ROOT / "solutions", tmp_path / "reference.json"),
            (package, tmp_path / "verdicts.json", "P4", False)])  # the last as a kill matrix grades
    named = [t for t in data["tests"] if t["extra_data"].get("mistakes")]
    assert named and all(t["extra_data"]["mistakes"] == ["p4-matmul-missing-factor-2"] for t in named)
    assert all("Known mistake (p4-matmul-missing-factor-2)" in t["output"] and "flops.matmul_flops" in t["output"]
               for t in named)
    capsys.readouterr()
    assert show.main(str(tmp_path / "out"), "alice") == 0
    assert "Known mistake (p4-matmul-missing-factor-2)" in capsys.readouterr().out
    assert not any(t["extra_data"].get("mistakes") for t in reference["tests"])
    assert not any(t["extra_data"].get("mistakes") or "Known mistake" in t["output"] for t in verdicts_alone["tests"])
    assert _steady_verdicts(verdicts_alone) == _steady_verdicts(data)


def _steady_verdicts(data: dict) -> dict[str, str]:
    """Each test's verdict, by node id, but the P4 CPU timings against the judge's: on an MFU off by 2 their verdict
    follows the machine's load (the band an honest timing needs on a loaded machine can admit it), whatever the
    diagnosis."""
    return {t["extra_data"]["nodeid"]: t.get("status") for t in data["tests"]
            if "on_cpu_agrees_with_an_independent_timing" not in t["extra_data"]["nodeid"]}


@pytest.mark.parametrize("problem, module, fixture, mistake", [
    ("P7", "checkpoint", "p7_checkpoint_numpy_rng_forgotten.py", "p7-numpy-rng-not-restored"),
    ("P8", "amp", "p8_amp_grads_zeroed.py", "p8-zero-grad-keeps-tensors")])
def test_a_probed_mistake_is_named_on_every_failed_test_of_its_problem(problem, module, fixture, mistake, tmp_path, capsys):
    package = stage(KIT_ROOT / "solutions", tmp_path / "submission")
    target = package / f"{module}.py"
    target.write_text(target.read_text() + "\n\n" + (MISTAKES / fixture).read_text())
    data = graded(package, tmp_path / "out" / "bob.json", problem)
    failed = [t for t in data["tests"] if t.get("status") == "failed"]
    assert failed and all(t["extra_data"].get("mistakes") == [mistake] for t in failed)
    capsys.readouterr()
    assert show.main(str(tmp_path / "out"), "bob") == 0
    assert f"Known mistake ({mistake})" in capsys.readouterr().out
