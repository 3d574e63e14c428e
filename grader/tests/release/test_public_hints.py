"""The public tests' hints name the mistake the submission's behaviour shows, and never another.

Each case is a mistaken P5 SGD or AdaGrad, P7 load_checkpoint or P8 train_step: a student-like one from
``fixtures/mistakes/`` (appended to a copy of the reference) or a curated mutant. Its public tests
must fail, at least one failure must carry a hint naming its own mistake, and no hint may name
any other known mistake (AdaGrad's hints come from trajectories torch.optim.Adagrad reproduces,
SGD's from torch.optim.SGD's and from the first steps a mistake fixes, P7's from the run's pieces
compared after load_checkpoint with what they were at the save, P8's from the reported norm beside torch's
and the step made). A checkpoint that torch.load(weights_only=True) refuses fails every test that loads it
naming the rule the save broke, and never with torch's advice to load it with weights_only=False.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.mistakes import load, materialize
from grader.submission import stage

KIT = Path(__file__).resolve().parents[3]
MISTAKES = KIT / "grader" / "tests" / "fixtures" / "mistakes"

SGD = ("weight_decay ignored", "the first momentum buffer is (1 - momentum) * g",
       "weight decay added after the momentum buffer")
ADAGRAD = ("eps inside the square root", "initial_accumulator_value ignored", "weight_decay ignored")
RESUME = ("torch's RNG", "numpy's global RNG", "Python's random", "the model's state_dict()", "the AdamW state")
NORM = ("ran on the scaled gradients", "scaled twice", "the norm after clipping")

CASES = {  # case: (public test file, -k selection, the mistake's own words, every known mistake's words)
    "p5_optim_sgd_momentum_as_average.py": ("test_p5_optim.py", "sgd_matches_torch", SGD[1], SGD),
    "p5_optim_sgd_decay_on_the_step.py": ("test_p5_optim.py", "sgd_matches_torch", SGD[2], SGD),
    "p5-sgd-damped-first-momentum": ("test_p5_optim.py", "sgd_matches_torch", SGD[1], SGD),
    "p5_optim_adagrad_eps_in_root.py": ("test_p5_optim.py", "AdaGrad or adagrad", ADAGRAD[0], ADAGRAD),
    "p5_optim_adagrad_sum_from_zero.py": ("test_p5_optim.py", "AdaGrad or adagrad", ADAGRAD[1], ADAGRAD),
    "p5-adagrad-eps-inside-sqrt": ("test_p5_optim.py", "AdaGrad or adagrad", ADAGRAD[0], ADAGRAD),
    "p7_checkpoint_python_rng_forgotten.py": ("test_p7_checkpoint.py", "checkpoint", RESUME[2], RESUME),
    "p7_checkpoint_adamw_state_unloaded.py": ("test_p7_checkpoint.py", "checkpoint", RESUME[4], RESUME),
    "p7-numpy-rng-not-restored": ("test_p7_checkpoint.py", "checkpoint", RESUME[1], RESUME),
    "p8-clip-before-unscale": ("test_p8_amp.py", "grad_norm", NORM[0], NORM),
    "p8-loss-scaled-twice": ("test_p8_amp.py", "grad_norm", NORM[1], NORM),
    "p8-grad-norm-after-clipping": ("test_p8_amp.py", "grad_norm", NORM[2], NORM),
}


def submission(case: str, dest: Path) -> Path:
    """The reference with the case's mistake: a fixture appended to its module, or a mutant's edit."""
    if not case.endswith(".py"):
        return materialize(next(m for m in load() if m.id == case), dest)
    package = stage(KIT / "solutions", dest)
    module = package / f"{case.split('_')[1]}.py"
    module.write_text(module.read_text() + "\n\n" + (MISTAKES / case).read_text())
    return package


def public_run(impl: Path, test_file: str, selection: str) -> subprocess.CompletedProcess:
    """The public tests of ``test_file`` selected by ``selection``, run on ``impl``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pytest", f"tests/{test_file}", "-k", selection, "--impl", str(impl),
                           "-q", "-p", "no:cacheprovider"], cwd=KIT, env=env, capture_output=True, text=True, timeout=600)


def hints(impl: Path, test_file: str, selection: str) -> tuple[int, list[str]]:
    """Run the public tests of ``test_file`` on ``impl``: pytest's exit code and every hint shown."""
    run = public_run(impl, test_file, selection)
    return run.returncode, [line for line in run.stdout.splitlines() if line.startswith("hint:")]


@pytest.mark.parametrize("case", CASES)
def test_each_hint_names_the_mistake_made_and_no_other(case, tmp_path):
    test_file, selection, own, known = CASES[case]
    code, shown = hints(submission(case, tmp_path), test_file, selection)
    assert code == 1, f"the public tests pass on {case}"
    assert any(own in hint for hint in shown), shown
    assert not [hint for hint in shown for other in known if other != own and other in hint], shown


@pytest.mark.parametrize("test_file, selection", [("test_p5_optim.py", "AdaGrad or adagrad or sgd_matches_torch"),
                                                  ("test_p7_checkpoint.py", "checkpoint"),
                                                  ("test_p8_amp.py", "grad_norm")])
def test_the_reference_gets_no_hint(test_file, selection):
    assert hints(KIT / "solutions", test_file, selection) == (0, [])


@pytest.mark.parametrize("case", ["p5_optim_sgd_momentum_as_average.py", "p5-sgd-damped-first-momentum"])
def test_a_momentum_mistake_is_named_first_and_sends_nowhere_else(case, tmp_path):
    """One wrong momentum line: the first failure quotes the rule it broke, and a failing test of another rule
    (a state dict continued from torch's) sends the student to the update rule, not to its own rule."""
    run = public_run(submission(case, tmp_path), "test_p5_optim.py", "not cuda")
    rules = [line for line in run.stdout.splitlines() if line.startswith("rule:")]
    assert run.returncode == 1 and "[P5.sgd-first-buffer]" in rules[0], rules
    own = ("[P5.sgd-first-buffer]", "[P5.sgd-matches-torch]")
    failures = run.stdout.split("called:   ")[1:]
    elsewhere = [f for f in failures if not any(rule in f for rule in own)]  # a hint may name the update rule
    assert not elsewhere, elsewhere


def test_an_off_by_one_start_is_named_before_numpys_error(tmp_path):
    """Starts drawn from 0 .. len - L - 2: numpy's "high <= 0" on L + 1 tokens comes with the rule of valid starts."""
    run = public_run(submission("p6-last-start-unreachable", tmp_path), "test_p6_data.py", "not 1gib")
    first = run.stdout.split("called:   ")[1]
    assert run.returncode == 1 and "[P6.batch-valid-starts]" in first.split("rule:")[1], first
    assert "high <= 0" not in first or "hint:     every start 0 .. len(tokens) - L - 1 is valid" in first, first


def test_a_checkpoint_that_does_not_load_names_the_rule_the_save_broke(tmp_path):
    run = public_run(submission("p7-numpy-state-as-array", tmp_path), "test_p7_checkpoint.py", "checkpoint")
    failed = int(re.search(r"(\d+) failed", run.stdout).group(1))
    reports = re.split(r"\n_{3,} \S+ _{3,}\n", run.stdout.split("short test summary")[0])[1:]
    assert run.returncode == 1 and len(reports) == failed, run.stdout
    for report in reports:  # hypothesis may report more than one failing example of a test: each quotes the rule
        rules = [line for line in report.splitlines() if line.startswith("rule:")]
        assert rules and all("[P7.loads-safely]" in line for line in rules), report
    assert "weights_only=False" not in run.stdout and "set to `False`" not in run.stdout


def test_a_library_not_implemented_error_is_a_failure_not_work_left(tmp_path):
    """time_matmul timing a float8 matmul: torch raises NotImplementedError (from C, under the student's call). The
    public tests report the failure with the rule it breaks; they do not count it as a stub still to write."""
    run = public_run(submission("p4-time-any-dtype", tmp_path), "test_p4_flops.py", "rejects_bad_arguments")
    failure = run.stdout.split("called:   ")[1]
    assert run.returncode == 1 and "NotImplementedError" in failure and "in a library your code called" in failure
    assert "[P4.time-matmul-refuses]" in failure.split("rule:")[1], failure
    assert "Not implemented yet" not in run.stdout, run.stdout
