"""P4's public timing tests never blame correct code on a busy machine, and still name a timing mistake.

Four busy loops (child processes, killed whatever happens) run beside the public CPU timing tests:
the reference passes them (three times over), the curated timing mutants fail them and no hint
names another mistake, and a total returned for a mean is named as such.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.mistakes import load, materialize

KIT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # about a minute on 2 busy cores
BUSY_LOOPS = 4
TIMING = "time_matmul_is_the_mean or matmul_mfu_on_cpu"  # the CPU timing tests


@pytest.fixture
def busy_machine() -> Iterator[None]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY_LOOPS)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def run_timing_tests(impl: Path, times: int = 1) -> subprocess.CompletedProcess:
    """The public CPU timing tests on ``impl``, each run ``times`` times over in one pytest session."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pytest", *["tests/test_p4_flops.py"] * times, "--keep-duplicates",
                           "-k", TIMING, "--impl", str(impl), "-q", "-p", "no:cacheprovider"],
                          cwd=KIT, env=env, capture_output=True, text=True, timeout=600)


def test_correct_timing_passes_beside_four_busy_loops(busy_machine):
    run = run_timing_tests(KIT / "solutions", times=3)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "6 passed" in run.stdout, run.stdout[-3000:]


HINTS = {"p4-time-total-not-mean": "the total of the 32 repeats, not their mean",
         "p4-time-only-the-launch": "the clock stopped after the first product"}
ALWAYS_NAMED = {"p4-time-total-not-mean"}  # one product's time, the other's signature, varies with the load


@pytest.mark.parametrize("mutant_id", HINTS)
def test_a_timing_mistake_fails_beside_four_busy_loops_and_no_other_is_named(busy_machine, tmp_path, mutant_id):
    run = run_timing_tests(materialize(next(m for m in load() if m.id == mutant_id), tmp_path))
    hints = [line for line in run.stdout.splitlines() if line.startswith("hint:")]
    assert run.returncode == 1, run.stdout[-3000:]
    assert not [hint for hint in hints for other, words in HINTS.items() if other != mutant_id and words in hint], hints
    if mutant_id in ALWAYS_NAMED:
        assert any(HINTS[mutant_id] in hint for hint in hints), run.stdout[-3000:]
