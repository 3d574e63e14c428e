"""The GPU runner acceptance (grader/selfproof/acceptance.py, ``grader selfcheck --gpu``): it refuses clearly
without CUDA, and its verdicts are a pure function of the gradings."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader import mistakes
from grader.selfproof import acceptance
from grader.grading.results import GradingResult, TestResult


def graded(*tests: TestResult, error: str = "") -> GradingResult:
    return GradingResult(tests=tests, submission="s", isolation={}, execution_time=1.0, notes=(), error=error)


def result_of(problem: str, status: str, points: float = 1, gpu: bool = False) -> TestResult:
    return TestResult(problem=problem, module="m", name=f"{problem}-{status}-{gpu}", points=points, status=status,
                      gpu=gpu)


GPU_MUTANT = next(m for m in mistakes.load() if m.gpu)


def test_a_good_runner_passes_every_check():
    reference = graded(result_of(GPU_MUTANT.problem, "passed"), result_of(GPU_MUTANT.problem, "passed", gpu=True))
    stubs = graded(result_of(GPU_MUTANT.problem, "failed"), result_of(GPU_MUTANT.problem, "failed", gpu=True))
    killed = graded(result_of(GPU_MUTANT.problem, "passed"), result_of(GPU_MUTANT.problem, "failed", gpu=True))
    lines = acceptance.verdicts(reference, stubs, [(GPU_MUTANT, killed)])
    assert all(line.ok for line in lines), lines


def test_a_cpu_test_this_runner_cannot_measure_is_named_and_not_held_against_it():
    p = GPU_MUTANT.problem
    why = "not run: this host gives the worker no memory limit that counts kernel buffers (a cgroup)"
    unmeasured = TestResult(problem=p, module="m", name="keeps only block inputs", points=1, status="not_run",
                            message=why)
    reference = graded(result_of(p, "passed"), unmeasured, result_of(p, "passed", gpu=True))
    stubs = graded(result_of(p, "failed"), unmeasured, result_of(p, "failed", gpu=True))
    killed = graded(result_of(p, "passed"), unmeasured, result_of(p, "failed", gpu=True))
    lines = acceptance.verdicts(reference, stubs, [(GPU_MUTANT, killed)])
    assert all(line.ok for line in lines), lines
    assert f"not graded here: keeps only block inputs ({why})" in lines[0].seen


@pytest.mark.parametrize("broken, named", [
    ("gpu test not run", ["reference at full marks", "every GPU test run", f"mutant {GPU_MUTANT.id} killed"]),
    ("reference fails", ["reference at full marks", f"mutant {GPU_MUTANT.id} killed"]),  # nothing left to lose
    ("stub scores", ["stubs at 0"]),
    ("mutant survives", [f"mutant {GPU_MUTANT.id} killed"]),
])
def test_each_failure_is_named(broken, named):
    p = GPU_MUTANT.problem
    gpu_status = {"gpu test not run": "not_run", "reference fails": "failed"}.get(broken, "passed")
    reference = graded(result_of(p, "passed"), result_of(p, gpu_status, gpu=True))
    stubs = graded(result_of(p, "passed" if broken == "stub scores" else "failed"), result_of(p, "failed", gpu=True))
    mutant = graded(result_of(p, "passed"), result_of(p, "passed" if broken == "mutant survives" else "failed", gpu=True))
    failed = [line.check for line in acceptance.verdicts(reference, stubs, [(GPU_MUTANT, mutant)]) if not line.ok]
    assert failed == named


def test_without_cuda_it_refuses_at_once_and_says_why():
    done = subprocess.run([sys.executable, "-m", "grader", "selfcheck", "--gpu"], capture_output=True, text=True,
                          timeout=300)
    if acceptance.versions()["available"]:
        pytest.skip("a CUDA device is present: the acceptance itself runs (and is long)")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no CUDA device" in done.stdout and "GPU runner" in done.stdout, done.stdout


def test_gpu_only_mutants_stay_out_of_the_cpu_kill_matrix():
    assert {m.problem for m in mistakes.load() if m.gpu} >= {"P4", "P6", "P7"}
