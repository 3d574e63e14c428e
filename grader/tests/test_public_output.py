"""What a student reads from the public tests: one pointed message per failure, nothing repeated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.mutants import Mutant, load, materialize
from grader.submission import stage

KIT = Path(__file__).resolve().parents[2]


def run_public(impl: Path, *selection: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pytest", *selection, "--impl", str(impl), "-q", "-p", "no:cacheprovider"],
                          cwd=KIT, env=env, capture_output=True, text=True, timeout=600)


def mutant(mutant_id: str) -> Mutant:
    return next(m for m in load() if m.id == mutant_id)


@pytest.mark.parametrize("mutant_id, selection, shown", [
    ("p5-sgd-weight-decay-after-momentum", "test_sgd_matches_torch and weight_decay", "weight decay added after the momentum"),
    ("p5-sgd-damped-first-momentum", "test_sgd_matches_torch and momentum", "the first momentum buffer is g itself"),
    ("p5-adagrad-eps-inside-sqrt", "test_adagrad_matches_torch", "eps inside the square root"),
    ("p5-sgd-closure-without-grad", "test_step_returns_the_closure_loss", "torch.enable_grad()"),
])
def test_an_optimizer_mistake_is_located_and_hinted(tmp_path, mutant_id, selection, shown):
    run = run_public(materialize(mutant(mutant_id), tmp_path), "tests/test_p5_optim.py", "-k", selection)
    assert run.returncode == 1, run.stdout[-3000:]
    assert f"hint:     a common cause" in run.stdout and shown in run.stdout, run.stdout[-3000:]
    assert "During handling" not in run.stdout, run.stdout[-3000:]
    returned = [line for line in run.stdout.splitlines() if line.startswith("returned: ")]
    assert returned and not any('"' in line or "'" in line for line in returned), returned
    if "matches_torch" in selection:
        assert any("at index (" in line and "after step" in line for line in returned), returned


def test_the_closure_contract_is_tested_apart_from_the_update_rule(tmp_path):
    run = run_public(materialize(mutant("p5-sgd-damped-first-momentum"), tmp_path), "tests/test_p5_optim.py",
                     "-k", "closure or sgd_matches_torch")
    assert "test_step_returns_the_closure_loss" not in run.stdout.split("short test summary")[-1], run.stdout[-3000:]
    assert "test_sgd_matches_torch" in run.stdout, run.stdout[-3000:]


def test_an_int32_count_gets_a_hint(tmp_path):
    package = stage(KIT / "solutions", tmp_path)
    flops = package / "flops.py"
    flops.write_text(flops.read_text().replace(
        '    return 2 * as_count(m, "m") * as_count(k, "k") * as_count(n, "n")\n',
        '    return int(torch.tensor(2 * as_count(m, "m") * as_count(k, "k") * as_count(n, "n")).to(torch.int32))\n'))
    run = run_public(package.parent, "tests/test_p4_flops.py", "-k", "lecture_example")
    assert "a multiple of 2**32" in run.stdout, run.stdout[-3000:]


def test_a_module_that_fails_to_import_is_named_as_the_student_sees_it(tmp_path):
    package = stage(KIT / "solutions", tmp_path)
    (package / "strides.py").write_text("import torch\n\nx = undefined_name\n")
    run = run_public(package.parent, "tests/test_p2_strides.py", "-k", "contiguous_strides")
    assert f"assignment/strides.py could not be imported: NameError" in run.stdout, run.stdout[-3000:]
    assert "(line 3)" in run.stdout and "_submission_under_test" not in run.stdout, run.stdout[-3000:]
    assert "During handling" not in run.stdout
