"""What a student reads from the public tests: one pointed message per failure, nothing repeated."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.mistakes import Mutant, load, materialize
from grader.problems import MODULES
from grader.submission import stage

KIT = Path(__file__).resolve().parents[3]


def run_public(impl: Path, *selection: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pytest", *selection, "--impl", str(impl), "-q", "-p", "no:cacheprovider"],
                          cwd=KIT, env=env, capture_output=True, text=True, timeout=600)


def mutant(mutant_id: str) -> Mutant:
    return next(m for m in load() if m.id == mutant_id)


@pytest.mark.parametrize("mutant_id, selection, shown", [
    ("p5-sgd-weight-decay-after-momentum", "test_sgd_matches_torch and weight_decay", "weight decay added after the momentum"),
    ("p5-sgd-damped-first-momentum", "test_sgd_matches_torch and momentum", "the first momentum buffer is (1 - momentum) * g"),
    ("p5-sgd-closure-without-grad", "test_step_returns_the_closure_loss", "torch.enable_grad()"),
])
def test_an_optimizer_mistake_is_located_and_hinted(tmp_path, mutant_id, selection, shown):
    run = run_public(materialize(mutant(mutant_id), tmp_path), "tests/test_p5_optim.py", "-k", selection)
    assert run.returncode == 1, run.stdout[-3000:]
    hints = [line for line in run.stdout.splitlines() if line.startswith("hint:     ")]
    assert any(shown in hint for hint in hints), run.stdout[-3000:]
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


# -- the student's loop: -k by function, -m by problem, frames in their own code ----------------

COUNTER = '''
import json
import os

from _pytest.mark import KeywordMatcher
from _pytest.mark.expression import Expression


def pytest_collection_finish(session):
    names = os.environ["KIT_KEYWORDS"].split(",")
    matchers = [KeywordMatcher.from_item(item) for item in session.items]
    counts = {name: sum(Expression.compile(name).evaluate(m) for m in matchers) for name in names}
    print("KEYWORD-COUNTS " + json.dumps(counts))
'''


def public_names() -> list[str]:
    """Every public function and class of every problem's reference module (what a student implements)."""
    names = []
    for module in MODULES:
        tree = ast.parse((KIT / "solutions" / f"{module}.py").read_text())
        names += [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                  and not node.name.startswith("_")]
    return names


def test_every_public_name_selects_its_tests_with_k(tmp_path):
    """``pytest tests/ -k NAME`` (the README's recipe) selects at least one test for every name."""
    (tmp_path / "keyword_counts.py").write_text(COUNTER)
    names = public_names()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(tmp_path),
           "KIT_KEYWORDS": ",".join(names)}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "--impl", "solutions", "--collect-only", "-q",
                          "-p", "keyword_counts", "-p", "no:cacheprovider"], cwd=KIT, env=env, capture_output=True,
                         text=True, timeout=300)
    line = next(line for line in run.stdout.splitlines() if line.startswith("KEYWORD-COUNTS "))
    counts = json.loads(line.split(" ", 1)[1])
    assert len(names) > 40 and not [n for n in names if counts[n] == 0], counts


def test_an_off_by_one_in_get_batch_is_caught_by_k_get_batch(tmp_path):
    package = stage(KIT / "solutions", tmp_path)
    data = package / "data.py"
    source = data.read_text()
    assert source.count("    high = len(tokens) - length\n") == 1
    data.write_text(source.replace("    high = len(tokens) - length\n", "    high = len(tokens) - length - 1\n"))
    run = run_public(package.parent, "tests/", "-k", "get_batch")
    assert run.returncode == 1 and "test_the_last_valid_start_is_drawn" in run.stdout, run.stdout[-3000:]


def test_one_problem_at_a_time_with_m(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "--collect-only", "-q", "-m", "p5",
                          "-p", "no:cacheprovider"], cwd=KIT, capture_output=True, text=True, timeout=300)
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith("tests/test_p5_optim.py::") for line in collected), run.stdout[-2000:]


def test_an_exception_in_student_code_shows_the_student_s_frames(tmp_path):
    package = stage(KIT / "solutions", tmp_path)
    optim = package / "optim.py"
    source = optim.read_text()
    assert source.count(".addcmul_(") >= 1
    optim.write_text(source.replace(".addcmul_(", ".addcmull_(", 1))
    run = run_public(package.parent, "tests/test_p5_optim.py", "-k", "test_adagrad_defaults")
    assert run.returncode == 1, run.stdout[-3000:]
    assert "called:   optim.AdaGrad.step()" in run.stdout, run.stdout[-3000:]
    assert 'assignment/optim.py", line' in run.stdout and "addcmull_" in run.stdout, run.stdout[-3000:]
    assert "_kit.py" not in run.stdout.split("where:")[-1].split("read:")[0], run.stdout[-3000:]


@pytest.mark.parametrize("value, shown", [(1, "1"), ((2, 3), "(2, 3)"), ("abc", "'abc'"), (None, "None")])
def test_short_values_are_shown_whole(value, shown):
    sys.path.insert(0, str(KIT / "tests"))
    try:
        from _kit import show
    finally:
        sys.path.remove(str(KIT / "tests"))
    assert show(value, 80) == shown


def test_a_momentum_buffer_that_is_the_gradient_is_caught_and_named(tmp_path):
    """The handout's pitfall ``buf = g.clone()``: the public tests catch the aliasing buffer."""
    package = stage(KIT / "solutions", tmp_path)
    optim = package / "optim.py"
    source = optim.read_text()
    aliasing = source.replace('buf = state["momentum_buffer"] = g.clone()', 'buf = state["momentum_buffer"] = g')
    assert aliasing != source
    optim.write_text(aliasing)
    run = run_public(package.parent, "tests/test_p5_optim.py")
    assert run.returncode == 1 and "test_sgd_momentum_buffer_is_not_the_gradient" in run.stdout, run.stdout[-3000:]
    assert "your momentum buffer is p.grad itself" in run.stdout, run.stdout[-3000:]


def test_the_handout_says_what_torch_does_without_cuda():
    import warnings

    import torch

    handout = (KIT / "handout.md").read_text()
    if not torch.cuda.is_available():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.amp.GradScaler("cuda")
        assert caught, "GradScaler('cuda') without CUDA no longer warns: update the handout"
    assert "silently disables" not in handout and "disables itself without CUDA, with a warning" in handout
    assert "must not be negative either" not in handout  # read as a contradiction beside "not checked"
