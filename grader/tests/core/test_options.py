"""The grading options (grader/options.py): every value checked once, as the record is built, with the
command line's one-line reasons; one versioned record crosses to each judge session; the seed is
recorded as used only where the profile draws from it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from grader.grading.grade import GradingError, grade
from grader.options import RECORD_VERSION, GradingOptions
from grader.paths import KIT_ROOT as KIT
from grader.problems import RANGE

REFUSED = [
    (dict(memory_mb=10), ["--memory-mb", "10"], "--memory-mb: must be at least 64 MB, got 10"),
    (dict(call_seconds=60, budget_seconds=30), ["--call-seconds", "60", "--budget-seconds", "30"],
     "--call-seconds 60 exceeds --budget-seconds 30"),
    (dict(call_seconds=0), ["--call-seconds", "0"], "--call-seconds: must be more than 0 seconds, got 0"),
    (dict(seed=-1), ["--seed", "-1"], "--seed: must be a whole number from 0 to 2**63 - 1, got -1"),
    (dict(problems=("P0",)), ["--problems", "P0"], f"--problems: unknown problem(s) P0: use {RANGE}"),
    (dict(gpu="maybe"), ["--gpu", "maybe"], "--gpu: invalid choice"),
]


@pytest.mark.parametrize("changes, argv, reason", REFUSED, ids=[" ".join(a) for _, a, _ in REFUSED])
def test_the_python_api_refuses_what_the_command_line_refuses(tmp_path, changes, argv, reason):
    with pytest.raises(GradingError) as refused:
        grade(KIT / "solutions", **changes)
    assert reason in str(refused.value)
    run = subprocess.run([sys.executable, "-P", "-m", "grader", "grade", "solutions", *argv], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and reason.replace("--gpu: ", "argument --gpu: ") in run.stderr, run.stderr


def test_one_versioned_record_crosses_to_the_judge():
    options = GradingOptions(gpu="off", seed=7, problems=("P3", "P1"), memory_mb=2048, isolation="require-strong",
                             first_failure=True, diagnose=False)
    flag, record = options.judge_argv(budget_seconds=100.0)  # the record alone: no hypothesis flag beside it
    crossed = GradingOptions.from_json(record)
    assert flag == "--grading-options"
    assert crossed == replace(options, budget_seconds=100.0) and crossed.problems == ("P1", "P3")
    data = json.loads(options.to_json())
    for broken in ({**data, "version": RECORD_VERSION + 1}, {k: v for k, v in data.items() if k != "gpu"},
                   {**data, "memory_mb": 1}):
        with pytest.raises(ValueError):
            GradingOptions.from_json(json.dumps(broken))


def test_a_judge_budget_below_the_call_limit_caps_the_call():
    argv = GradingOptions(call_seconds=30).judge_argv(budget_seconds=10.0)
    assert GradingOptions.from_json(argv[argv.index("--grading-options") + 1]).call_seconds == 10.0


def test_the_seed_is_recorded_only_where_the_profile_draws_from_it():
    assert GradingOptions(seed=5, profile="grading").graded_with()["seed"] == 5
    assert GradingOptions(seed=5, profile="ci").graded_with()["seed"] is None


def test_rule_ids_are_shaped_as_the_handouts_reader_reads_them():
    from grader.rules import handout_rules

    ids = tuple(handout_rules())
    assert ids and GradingOptions(rules=ids).rules == ids
    with pytest.raises(ValueError, match=r"--rules: not a rule id: 'P5\.Bad' \(ids look like P5\.skip-none-grad\)"):
        GradingOptions(rules=("P5.Bad",))
